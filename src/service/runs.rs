//! The Runs view: a user's stored batch runs measured against judgments they uploaded, per run
//! and per turn, and two runs compared turn by turn. Measures and tests are `crate::eval`'s (the
//! code of `convrag eval ranking` and `convrag eval compare`); a turn's ranking is what the run's
//! TREC file lists for it (unique passages in rank order, scores as submitted).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, LazyLock};

use regex::Regex;

use serde::Serialize;

use crate::eval::compare::{compare, CompareOptions, ScoreTable};
use crate::eval::measures::{evaluate, EvalOptions, Measure};
use crate::eval::{Qrels, Run};
use crate::formats::trec_run::submitted_score;
use crate::store::runs::{QrelsInfo, RunListing};
use crate::store::{Store, StoreError, Turn};

/// The measures of a run's summary and of each turn.
pub const SUMMARY_MEASURES: &[&str] = &["ndcg_cut.3", "ndcg_cut.10", "P.10", "recall.100", "map"];
/// Passages shown per turn.
pub const SHOWN_PASSAGES: usize = 10;
/// Passages of a turn that are evaluated (as many as a TREC run file of the run holds).
const EVALUATED_PASSAGES: usize = 1000;

/// Request parameters the Runs view reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunField {
    Run,
    A,
    B,
    Qrels,
    Measure,
    Name,
    Body,
}

impl RunField {
    pub fn as_str(self) -> &'static str {
        match self {
            RunField::Run => "run",
            RunField::A => "a",
            RunField::B => "b",
            RunField::Qrels => "qrels",
            RunField::Measure => "measure",
            RunField::Name => "name",
            RunField::Body => "body",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunsError {
    /// No run or judgments of that name among the user's (another user's are not found either).
    #[error("{what} {name:?} not found")]
    NotFound {
        field: RunField,
        what: &'static str,
        name: String,
    },
    #[error("{}: {reason}", field.as_str())]
    Invalid { field: RunField, reason: String },
    /// Judgments larger than `limits.qrels_bytes` (refused from the declared length, or at the
    /// first byte beyond it).
    #[error("the judgments are larger than the {max} bytes allowed (limits.qrels_bytes)")]
    TooLarge { max: usize },
    /// A parse or check task failed (it panicked).
    #[error("a qrels task failed: {0}")]
    Task(#[source] tokio::task::JoinError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type Result<T, E = RunsError> = std::result::Result<T, E>;

fn invalid(field: RunField, reason: impl Into<String>) -> RunsError {
    RunsError::Invalid {
        field,
        reason: reason.into(),
    }
}

/// A passage of a turn's ranking with its judged grade (`None`: not judged).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct JudgedPassage {
    pub rank: i32,
    pub passage_id: String,
    pub title: Option<String>,
    pub grade: Option<i64>,
}

/// What one run did for one turn.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TurnOutcome {
    pub rewrite: Option<String>,
    /// Texts of the PTKB statements the turn selected, best first.
    pub ptkb: Vec<String>,
    /// The first passages of the ranking.
    pub passages: Vec<JudgedPassage>,
}

/// A turn of a run with its measures (empty when the judgments do not judge the turn).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TurnMeasures {
    /// The query id of the turn (e.g. `9-1_3`).
    pub turn_id: String,
    pub topic: String,
    pub utterance: String,
    pub judged: bool,
    /// trec_eval name (`ndcg_cut_10`) → value.
    pub measures: BTreeMap<String, f64>,
    #[serde(flatten)]
    pub outcome: TurnOutcome,
}

/// `GET /v1/runs/{run}`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RunReport {
    pub run: RunListing,
    pub qrels: String,
    /// Turns of the run the judgments judge (the summary's mean is over them, as trec_eval's).
    pub judged_turns: usize,
    /// trec_eval name → mean over the judged turns.
    pub summary: BTreeMap<String, f64>,
    pub turns: Vec<TurnMeasures>,
}

/// One turn of two runs.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TurnComparison {
    pub turn_id: String,
    pub topic: String,
    pub utterance: String,
    pub judged: bool,
    /// The measure of run A and of run B (`null`: not judged; a judged turn a run lacks
    /// scores 0).
    pub value_a: Option<f64>,
    pub value_b: Option<f64>,
    /// B − A.
    pub difference: Option<f64>,
    /// `null` where the run has no such turn.
    pub a: Option<TurnOutcome>,
    pub b: Option<TurnOutcome>,
}

/// `GET /v1/runs/compare`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RunComparison {
    pub a: RunListing,
    pub b: RunListing,
    pub qrels: String,
    /// trec_eval name.
    pub measure: String,
    /// Means over the judged turns of either run (`convrag eval compare`'s).
    pub mean_a: f64,
    pub mean_b: f64,
    pub mean_difference: f64,
    /// Paired t-test (`null` when every difference is equal) and paired randomization test,
    /// two-sided, as `convrag eval compare` computes them.
    pub t_test_p: Option<f64>,
    pub randomization_p: f64,
    pub wins: usize,
    pub ties: usize,
    pub losses: usize,
    /// In the runs' turn order.
    pub turns: Vec<TurnComparison>,
}

/// A stored run's turns by query id, in topic and turn order.
struct StoredRun {
    listing: RunListing,
    turns: Vec<(String, Turn)>,
}

impl StoredRun {
    /// What `convrag eval ranking` reads from the run's TREC file.
    fn ranking(&self) -> Run {
        let mut run = Run::default();
        for (_, turn) in &self.turns {
            let Some(qid) = &turn.external_turn_id else {
                continue;
            };
            let mut seen = std::collections::HashSet::new();
            let docs = turn
                .passages
                .iter()
                .filter(|p| seen.insert(p.passage_id.as_str()))
                .take(EVALUATED_PASSAGES)
                .map(|p| (p.passage_id.clone(), submitted_score(p.score)))
                .collect();
            run.insert(qid.clone(), docs);
        }
        run
    }
}

fn outcome(turn: &Turn, judged: Option<&HashMap<String, i64>>) -> TurnOutcome {
    TurnOutcome {
        rewrite: turn.rewritten_utterance.clone(),
        ptkb: turn
            .ptkb_ranking
            .iter()
            .filter(|s| s.selected)
            .map(|s| s.text.clone())
            .collect(),
        passages: turn
            .passages
            .iter()
            .take(SHOWN_PASSAGES)
            .map(|p| JudgedPassage {
                rank: p.rank,
                passage_id: p.passage_id.clone(),
                title: p.title.clone(),
                grade: judged.and_then(|j| j.get(&p.passage_id).copied()),
            })
            .collect(),
    }
}

/// The `measure` parameter: one measure that scores each turn, a cutoff measure with its one
/// cutoff (`ndcg_cut.10`, `ndcg_cut_10`, `P.10`, `recall.100`) or one without (`map`). The
/// OpenAPI document states it; [`one_measure`] refuses what it does not match.
pub const MEASURE_PATTERN: &str = "^(?:(?:ndcg_cut|P|recall|map_cut|success)[._][1-9][0-9]{0,5}\
    |map|recip_rank|Rprec|set_P|set_recall|set_F)$";

static MEASURE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(MEASURE_PATTERN).expect("a valid pattern (unit-tested)"));

/// Fragments of [`QRELS_PATTERN`]: a judgment line (`query iteration document grade`: fields of
/// printable ASCII without spaces, the query not starting with `#`, separated by spaces or tabs;
/// an integer grade), and a blank or `#` comment line (no NUL).
const QRELS_JUDGMENT: &str =
    "[ \\t]*[!-\"$-~][!-~]*[ \\t]+[!-~]+[ \\t]+[!-~]+[ \\t]+[+-]?[0-9]{1,18}[ \\t]*\\r?";
const QRELS_OTHER: &str = "[ \\t]*(?:#[^\\n\\u0000]*|\\r)?";

/// Uploaded judgments (`PUT /v1/qrels/{name}`): lines separated by `\n` (a `\r` before it is
/// allowed), each a judgment, a comment or blank, at least one a judgment. The OpenAPI document
/// states it as the body's pattern; [`RunService::put_qrels`] refuses what it does not match.
pub static QRELS_PATTERN: LazyLock<String> = LazyLock::new(|| {
    format!("^(?:{QRELS_OTHER}\\n)*{QRELS_JUDGMENT}(?:\\n(?:{QRELS_JUDGMENT}|{QRELS_OTHER}))*$")
});

static QRELS_TEXT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&QRELS_PATTERN).expect("a valid pattern (unit-tested)"));
static QRELS_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!("^(?:{QRELS_JUDGMENT}|{QRELS_OTHER})$"))
        .expect("a valid pattern (unit-tested)")
});

/// Refuses uploaded judgments that [`QRELS_PATTERN`] does not match, naming the first line
/// that is neither a judgment, a comment nor blank.
fn check_qrels_text(text: &str) -> Result<()> {
    if QRELS_TEXT.is_match(text) {
        return Ok(());
    }
    let bad_line = text.split('\n').position(|line| !QRELS_LINE.is_match(line));
    Err(invalid(
        RunField::Body,
        match bad_line {
            Some(i) => format!(
                "line {}: expected a TREC qrels line `query iteration document grade` (fields of \
                 printable ASCII without spaces, an integer grade), a `#` comment or a blank line",
                i + 1
            ),
            None => "no judgments: expected TREC qrels lines `query 0 document grade`".to_string(),
        },
    ))
}

/// Refuses a name judgments cannot have.
fn check_name(name: &str) -> Result<()> {
    if crate::store::require_identifier("name", name, 100).is_err() {
        return Err(invalid(
            RunField::Name,
            "must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit",
        ));
    }
    Ok(())
}

/// One measure named by the `measure` parameter ([`MEASURE_PATTERN`]).
pub fn one_measure(spec: &str) -> Result<Measure> {
    let bad = |reason: String| invalid(RunField::Measure, reason);
    if !MEASURE.is_match(spec) {
        return Err(bad(format!(
            "`{spec}` is not one per-turn measure: name one with its cutoff (ndcg_cut.10, P.10, \
             recall.100, map_cut.100, success.1) or one without (map, recip_rank, Rprec, set_P, \
             set_recall, set_F)"
        )));
    }
    let list = Measure::parse_list(spec).map_err(|e| bad(e.to_string()))?;
    match list.as_slice() {
        [m] if !m.is_count() => Ok(*m),
        [m] => Err(bad(format!(
            "`{}` is a count, not a per-turn score",
            m.name()
        ))),
        _ => Err(bad(format!(
            "`{spec}` names {} measures; name one with its cutoff, e.g. ndcg_cut.10",
            list.len()
        ))),
    }
}

/// The judged lines of qrels text as `convrag eval` reads them: line number, query, document,
/// grade; blank and `#` lines skipped.
fn judged_lines(text: &str) -> impl Iterator<Item = Result<(usize, &str, &str, i64)>> {
    text.lines().enumerate().filter_map(|(i, line)| {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let no = i + 1;
        let mut fields = line.split_whitespace();
        let parts: [Option<&str>; 5] = std::array::from_fn(|_| fields.next());
        let [Some(query), Some(_), Some(doc), Some(grade), None] = parts else {
            let found = parts.iter().flatten().count() + fields.count();
            return Some(Err(invalid(
                RunField::Body,
                format!(
                    "line {no}: malformed qrels line: expected 4 fields `qid iter docid rel`, \
                     found {found}"
                ),
            )));
        };
        Some(match grade.parse::<i64>() {
            Ok(grade) => Ok((no, query, doc, grade)),
            Err(_) => Err(invalid(
                RunField::Body,
                format!("line {no}: relevance `{grade}` is not an integer"),
            )),
        })
    })
}

/// Parses TREC qrels text, naming the line of a problem. A pair judged on several lines is
/// judged by the last, as pytrec_eval and ir_measures read qrels (the pattern the document
/// states cannot say "no pair twice", and a later line correcting an earlier one is how
/// judgments get amended). Builds only the judgments themselves: no copy of the text or its
/// lines, so a parse holds about its result.
pub fn parse_qrels_text(_name: &str, text: &str) -> Result<Qrels> {
    let mut qrels = Qrels::default();
    for judged in judged_lines(text) {
        let (_, query, doc, grade) = judged?;
        // Owned keys only for what is new: a query's string once, a document's once per query.
        let Some(docs) = qrels.queries.get_mut(query) else {
            let docs = HashMap::from([(doc.to_string(), grade)]);
            qrels.queries.insert(query.to_string(), docs);
            continue;
        };
        match docs.get_mut(doc) {
            Some(old) => *old = grade,
            None => {
                docs.insert(doc.to_string(), grade);
            }
        }
    }
    if qrels.is_empty() {
        return Err(invalid(
            RunField::Body,
            "no judgments: expected TREC qrels lines `query 0 document grade`",
        ));
    }
    Ok(qrels)
}

/// The judged queries and (query, document) pairs of qrels text that [`check_qrels_text`]
/// accepts, counted without building the judgments (pairs borrow from the text).
fn count_qrels(text: &str) -> Result<(usize, usize)> {
    let mut queries = HashSet::new();
    let mut pairs = HashSet::new();
    for judged in judged_lines(text) {
        let (_, query, doc, _) = judged?;
        queries.insert(query);
        pairs.insert((query, doc));
    }
    Ok((queries.len(), pairs.len()))
}

/// Qrels texts checked or parsed at once, server-wide: each holds up to `limits.qrels_bytes`
/// of text and its parse, so this bounds their memory whatever the number of callers.
pub const QRELS_AT_ONCE: usize = 2;

/// Leave to read and store one qrels text ([`RunService::admit_qrels`]), held until the text is
/// stored or refused.
pub struct QrelsPermit {
    /// The most bytes the text may have (`limits.qrels_bytes`).
    pub max_bytes: usize,
    _work: tokio::sync::OwnedSemaphorePermit,
}

/// The Runs view's reads and the uploads of judgments.
#[derive(Clone)]
pub struct RunService {
    store: Store,
    /// [`QRELS_AT_ONCE`] permits: qrels texts being read, checked, parsed or stored.
    work: Arc<tokio::sync::Semaphore>,
}

impl RunService {
    pub fn new(store: Store) -> Self {
        RunService {
            store,
            work: Arc::new(tokio::sync::Semaphore::new(QRELS_AT_ONCE)),
        }
    }

    /// Admits judgments `name` before their body is read: a valid name, a declared length
    /// within `limits.qrels_bytes` (413) and the user's quota (429), then one of the
    /// [`QRELS_AT_ONCE`] permits, waited for in turn.
    pub async fn admit_qrels(
        &self,
        user_id: i64,
        name: &str,
        declared_bytes: Option<u64>,
    ) -> Result<QrelsPermit> {
        check_name(name)?;
        let max_bytes = self.store.limits().qrels_bytes;
        if declared_bytes.is_some_and(|n| n > max_bytes as u64) {
            return Err(RunsError::TooLarge { max: max_bytes });
        }
        self.store
            .check_qrels_quota(user_id, name, declared_bytes.unwrap_or(0))
            .await?;
        let work = self
            .work
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        Ok(QrelsPermit {
            max_bytes,
            _work: work,
        })
    }

    /// Deletes the user's run `name` with its conversations.
    pub async fn delete_run(&self, user_id: i64, name: &str) -> Result<()> {
        self.store
            .delete_run(user_id, name)
            .await
            .map_err(|e| match e {
                StoreError::NotFound { .. } => RunsError::NotFound {
                    field: RunField::Run,
                    what: "run",
                    name: name.to_string(),
                },
                other => other.into(),
            })
    }

    /// Deletes the user's judgments `name`.
    pub async fn delete_qrels(&self, user_id: i64, name: &str) -> Result<()> {
        check_name(name)?;
        self.store
            .delete_qrels(user_id, name)
            .await
            .map_err(|e| match e {
                StoreError::NotFound { .. } => RunsError::NotFound {
                    field: RunField::Name,
                    what: "judgments",
                    name: name.to_string(),
                },
                other => other.into(),
            })
    }

    /// The user's runs, newest first.
    pub async fn list(&self, user_id: i64) -> Result<Vec<RunListing>> {
        Ok(self.store.list_runs(user_id).await?)
    }

    /// The user's judgments.
    pub async fn list_qrels(&self, user_id: i64) -> Result<Vec<QrelsInfo>> {
        Ok(self.store.list_qrels(user_id).await?)
    }

    /// Stores (or replaces) the user's judgments `name` from TREC qrels text, checked off the
    /// request threads under the `permit` [`Self::admit_qrels`] gave.
    pub async fn put_qrels(
        &self,
        permit: QrelsPermit,
        user_id: i64,
        name: &str,
        text: String,
    ) -> Result<QrelsInfo> {
        check_name(name)?;
        if text.len() > permit.max_bytes {
            return Err(RunsError::TooLarge {
                max: permit.max_bytes,
            });
        }
        let (text, counted) = tokio::task::spawn_blocking(move || {
            let counted = check_qrels_text(&text).and_then(|()| count_qrels(&text));
            (text, counted)
        })
        .await
        .map_err(RunsError::Task)?;
        let (queries, judgments) = counted?;
        let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        let info = self
            .store
            .put_qrels(user_id, name, &text, count(queries), count(judgments))
            .await?;
        drop(permit);
        Ok(info)
    }

    /// The user's judgments `name`, parsed off the request threads under one of the
    /// [`QRELS_AT_ONCE`] permits, and held only by the request that asked.
    async fn qrels(&self, user_id: i64, name: &str) -> Result<Qrels> {
        let _work = self
            .work
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let text =
            self.store
                .qrels_text(user_id, name)
                .await?
                .ok_or_else(|| RunsError::NotFound {
                    field: RunField::Qrels,
                    what: "judgments",
                    name: name.to_string(),
                })?;
        let name = name.to_string();
        tokio::task::spawn_blocking(move || parse_qrels_text(&name, &text))
            .await
            .map_err(RunsError::Task)?
    }

    async fn run(&self, user_id: i64, name: &str, field: RunField) -> Result<StoredRun> {
        let listing = self
            .store
            .run_listing(user_id, name)
            .await?
            .ok_or_else(|| RunsError::NotFound {
                field,
                what: "run",
                name: name.to_string(),
            })?;
        let mut turns = Vec::new();
        let run = self.store.run_conversations(user_id, name);
        for conversation in run.list().await? {
            let topic = run.topic(&conversation).unwrap_or_default().to_string();
            for turn in self
                .store
                .list_turns(user_id, conversation.id, false)
                .await?
            {
                turns.push((topic.clone(), turn));
            }
        }
        Ok(StoredRun { listing, turns })
    }

    /// Run `name` measured against judgments `qrels`: the summary and every turn.
    pub async fn report(&self, user_id: i64, name: &str, qrels: &str) -> Result<RunReport> {
        let run = self.run(user_id, name, RunField::Run).await?;
        let judgments = self.qrels(user_id, qrels).await?;
        let measures = Measure::parse_all(SUMMARY_MEASURES).expect("valid measure names");
        let evaluation = evaluate(
            &judgments,
            &run.ranking(),
            &measures,
            &EvalOptions::default(),
        );
        let names: Vec<String> = measures.iter().map(Measure::name).collect();
        let summary = names.iter().cloned().zip(evaluation.all.clone()).collect();
        let turns = run
            .turns
            .iter()
            .map(|(topic, turn)| {
                let qid = turn.external_turn_id.clone().unwrap_or_default();
                let values = evaluation.per_query.get(&qid);
                TurnMeasures {
                    judged: values.is_some(),
                    measures: values
                        .map(|v| names.iter().cloned().zip(v.iter().copied()).collect())
                        .unwrap_or_default(),
                    outcome: outcome(turn, judgments.get(&qid)),
                    turn_id: qid,
                    topic: topic.clone(),
                    utterance: turn.utterance.clone(),
                }
            })
            .collect();
        Ok(RunReport {
            run: run.listing,
            qrels: qrels.to_string(),
            judged_turns: evaluation.num_q,
            summary,
            turns,
        })
    }

    /// Runs `a` and `b` compared on `measure` turn by turn.
    pub async fn compare(
        &self,
        user_id: i64,
        a: &str,
        b: &str,
        qrels: &str,
        measure: &str,
    ) -> Result<RunComparison> {
        // A run compared with itself is a fair question (every turn a tie, randomization p = 1,
        // the t-test undefined), answered like any other pair.
        let measure = one_measure(measure)?;
        let run_a = self.run(user_id, a, RunField::A).await?;
        let run_b = self.run(user_id, b, RunField::B).await?;
        let judgments = self.qrels(user_id, qrels).await?;
        // Turns of either run, in run A's order then B's own.
        let mut order: Vec<(String, String, String)> = Vec::new();
        let mut by_id: HashMap<String, (Option<&Turn>, Option<&Turn>)> = HashMap::new();
        for (side, run) in [(0, &run_a), (1, &run_b)] {
            for (topic, turn) in &run.turns {
                let qid = turn.external_turn_id.clone().unwrap_or_default();
                let entry = by_id.entry(qid.clone()).or_insert_with(|| {
                    order.push((qid, topic.clone(), turn.utterance.clone()));
                    (None, None)
                });
                if side == 0 {
                    entry.0 = Some(turn);
                } else {
                    entry.1 = Some(turn);
                }
            }
        }
        // The judgments of these turns only: the means are over the turns the runs answered.
        let mut judged = Qrels::default();
        for (qid, _, _) in &order {
            if let Some(j) = judgments.get(qid) {
                judged.queries.insert(qid.clone(), j.clone());
            }
        }
        if judged.is_empty() {
            return Err(invalid(
                RunField::Qrels,
                format!("the judgments {qrels:?} judge no turn of either run"),
            ));
        }
        // Labelled by side, so that a run compared with itself is still two columns.
        let runs = [
            ("a".to_string(), run_a.ranking()),
            ("b".to_string(), run_b.ranking()),
        ];
        let table = ScoreTable::ranking(&judged, &runs, &[measure], 1)
            .map_err(|e| invalid(RunField::Measure, e.to_string()))?;
        let comparison = compare(table, CompareOptions::default())
            .map_err(|e| invalid(RunField::Measure, e.to_string()))?;
        let m = &comparison.measures[0];
        let pair = &m.pairs[0];
        let topics = &comparison.table.topics;
        let value = |run: usize, qid: &str| {
            let i = topics.binary_search_by(|t| t.as_str().cmp(qid)).ok()?;
            Some(comparison.table.runs[run].values[0][i])
        };
        let turns = order
            .into_iter()
            .map(|(qid, topic, utterance)| {
                let (ta, tb) = by_id[&qid];
                let grades = judged.get(&qid);
                let (value_a, value_b) = (value(0, &qid), value(1, &qid));
                TurnComparison {
                    judged: grades.is_some(),
                    difference: value_a.zip(value_b).map(|(x, y)| y - x),
                    value_a,
                    value_b,
                    a: ta.map(|t| outcome(t, grades)),
                    b: tb.map(|t| outcome(t, grades)),
                    turn_id: qid,
                    topic,
                    utterance,
                }
            })
            .collect();
        Ok(RunComparison {
            a: run_a.listing,
            b: run_b.listing,
            qrels: qrels.to_string(),
            measure: m.measure.clone(),
            mean_a: m.means[0],
            mean_b: m.means[1],
            mean_difference: pair.mean_delta,
            t_test_p: pair.t_test_p,
            randomization_p: pair.randomization.p,
            wins: pair.wins,
            ties: pair.ties,
            losses: pair.losses,
            turns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_measure_is_required() {
        assert_eq!(one_measure("ndcg_cut.10").unwrap().name(), "ndcg_cut_10");
        assert_eq!(one_measure("map").unwrap().name(), "map");
        assert_eq!(one_measure("P_5").unwrap().name(), "P_5");
        assert_eq!(one_measure("set_F").unwrap().name(), "set_F");
        for bad in [
            "ndcg_cut",
            "num_rel",
            "bogus",
            "P.5,10",
            "ndcg_cut.010",
            " map",
            "P.0",
        ] {
            match one_measure(bad) {
                Err(RunsError::Invalid { field, .. }) => assert_eq!(field, RunField::Measure),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn qrels_text_errors_name_the_line() {
        let e = parse_qrels_text("q", "1_1 0 a 1\n1_1 0 b x\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "body: line 2: relevance `x` is not an integer"
        );
        assert!(parse_qrels_text("q", "# nothing\n").is_err());
        assert_eq!(parse_qrels_text("q", "1_1 0 a 2\n").unwrap().len(), 1);
        // A pair judged again: the last line counts.
        let amended = parse_qrels_text("q", "1_1 0 a 2\n1_1 0 b 1\n1_1 Q0 a 0\n").unwrap();
        assert_eq!(amended.get("1_1").unwrap().get("a"), Some(&0));
        assert_eq!(amended.get("1_1").unwrap().len(), 2);
    }

    /// What the pattern matches is what the server reads: every matching text parses, and a
    /// text it does not match is refused naming the line.
    #[test]
    fn qrels_pattern_is_the_rule() {
        for good in [
            "1_1 0 a 1",
            "1_1 0 a 1\n",
            "# judged by hand\r\n\n 1-1_2\tQ0\tdoc:7 -1 \r\n1-1_2 0 doc:8 +2\n",
            "q 0 d 0\n\n\n",
        ] {
            assert!(check_qrels_text(good).is_ok(), "{good:?}");
            assert!(parse_qrels_text("q", good).is_ok(), "{good:?}");
        }
        for (bad, line) in [
            ("1_1 0 a x\n", Some(1)),
            ("1_1 0 a 1\n1_1 0 b\n", Some(2)),
            ("#q 0 d 1\n", None),
            ("", None),
            ("q 0 d 1 # note", Some(1)),
            ("q\u{a0}0 d 1", Some(1)),
            ("q 0 d 1\r\r\n", Some(1)),
            ("q 0 d 12345678901234567890", Some(1)),
        ] {
            let message = check_qrels_text(bad).unwrap_err().to_string();
            match line {
                Some(n) => assert!(
                    message.starts_with(&format!("body: line {n}: ")),
                    "{message}"
                ),
                None => assert!(message.contains("no judgments"), "{message}"),
            }
        }
    }
}
