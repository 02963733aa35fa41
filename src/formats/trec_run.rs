//! TREC run files: `topic Q0 docid rank score tag`, six whitespace-separated columns.
//!
//! Written reproducibly: within a topic, hits are ordered by the score *as printed* (highest
//! first) and ties by docid in descending byte order, which is exactly the order `trec_eval`
//! evaluates (it re-sorts by score, then by docid descending, ignoring the rank column); so the
//! rank column always agrees with what gets evaluated and equal inputs give identical bytes.
//! Scores print by default as the shortest decimal that reads back to the same f64 (Python
//! `repr` style, e.g. `0.99986017`), so printing never creates or hides ties; a fixed number of
//! decimals (Anserini prints `%.6f`) can be chosen instead.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::validate::{Report, ValidationContext};
use super::{atomic, numbered_lines, pyjson, read_text, FormatError, Result};

/// One line of a TREC run.
#[derive(Debug, Clone, PartialEq)]
pub struct TrecRunLine {
    /// 1-based line in the file it was read from (0 when built in memory).
    pub line: usize,
    pub topic_id: String,
    pub docid: String,
    pub rank: u32,
    pub score: f64,
    pub run_tag: String,
}

/// A ranked list for one topic, best first.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedList {
    pub topic_id: String,
    pub hits: Vec<(String, f64)>,
}

/// Reads a TREC run (e.g. the AG task's `baseline_r_out.tsv`) strictly: six columns, integer
/// rank, finite score. Lines keep their file order.
pub fn read_run(path: &Path) -> Result<Vec<TrecRunLine>> {
    let text = read_text(path)?;
    let mut out = Vec::new();
    for (line, l) in numbered_lines(&text) {
        if l.trim().is_empty() {
            continue;
        }
        out.push(
            parse_line(l)
                .map_err(|m| FormatError::parse(path, line, m))
                .map(|mut r| {
                    r.line = line;
                    r
                })?,
        );
    }
    Ok(out)
}

/// Groups run lines by topic, keeping the order in which topics first appear and the file
/// order within each topic.
pub fn group_by_topic(lines: &[TrecRunLine]) -> Vec<RankedList> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut out: Vec<RankedList> = Vec::new();
    for l in lines {
        let i = *index.entry(&l.topic_id).or_insert_with(|| {
            out.push(RankedList {
                topic_id: l.topic_id.clone(),
                hits: Vec::new(),
            });
            out.len() - 1
        });
        out[i].hits.push((l.docid.clone(), l.score));
    }
    out
}

fn parse_line(l: &str) -> std::result::Result<TrecRunLine, String> {
    let cols: Vec<&str> = l.split_whitespace().collect();
    if cols.len() != 6 {
        return Err(format!(
            "expected 6 whitespace-separated columns, found {}",
            cols.len()
        ));
    }
    let rank: u32 = cols[3]
        .parse()
        .map_err(|_| format!("rank {:?} is not a non-negative integer", cols[3]))?;
    let score: f64 = cols[4]
        .parse()
        .ok()
        .filter(|s: &f64| s.is_finite())
        .ok_or_else(|| format!("score {:?} is not a finite number", cols[4]))?;
    Ok(TrecRunLine {
        line: 0,
        topic_id: cols[0].to_string(),
        docid: cols[2].to_string(),
        rank,
        score,
        run_tag: cols[5].to_string(),
    })
}

/// How scores are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScoreFormat {
    /// Shortest round-trip decimal (Python `repr`).
    #[default]
    Shortest,
    /// Fixed number of decimals (`%.Nf`).
    Fixed(usize),
}

impl ScoreFormat {
    pub fn format(self, score: f64) -> Result<String> {
        if !score.is_finite() {
            return Err(FormatError::Invalid(format!("non-finite score {score}")));
        }
        Ok(match self {
            ScoreFormat::Shortest => pyjson::float_repr(score)?,
            ScoreFormat::Fixed(d) => format!("{score:.d$}"),
        })
    }
}

/// Writes TREC runs.
#[derive(Debug, Clone)]
pub struct TrecRunWriter {
    pub run_tag: String,
    /// At most this many hits per topic (TREC RAG: 100; iKAT: 1000).
    pub max_per_topic: usize,
    pub score_format: ScoreFormat,
}

impl TrecRunWriter {
    pub fn new(run_tag: impl Into<String>, max_per_topic: usize) -> Self {
        TrecRunWriter {
            run_tag: run_tag.into(),
            max_per_topic,
            score_format: ScoreFormat::Shortest,
        }
    }

    /// The run as text. Topics are written in the given order; fails on a duplicate topic, a
    /// duplicate docid within a topic, whitespace inside a field, or a non-finite score.
    pub fn render(&self, lists: &[RankedList]) -> Result<String> {
        check_field("run tag", &self.run_tag)?;
        let mut out = String::new();
        let mut topics = HashSet::new();
        for list in lists {
            check_field("topic id", &list.topic_id)?;
            if !topics.insert(list.topic_id.as_str()) {
                return Err(FormatError::Invalid(format!(
                    "topic {} appears twice",
                    list.topic_id
                )));
            }
            let mut seen = HashSet::new();
            let mut hits = Vec::with_capacity(list.hits.len());
            for (docid, score) in &list.hits {
                check_field("docid", docid)?;
                if !seen.insert(docid.as_str()) {
                    return Err(FormatError::Invalid(format!(
                        "docid {docid} appears twice for topic {}",
                        list.topic_id
                    )));
                }
                let printed = self.score_format.format(*score)?;
                let value: f64 = printed.parse().expect("printed score parses");
                hits.push((docid.as_str(), printed, value));
            }
            hits.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| b.0.cmp(a.0)));
            for (rank, (docid, printed, _)) in hits.iter().take(self.max_per_topic).enumerate() {
                push_line(
                    &mut out,
                    &list.topic_id,
                    docid,
                    rank + 1,
                    printed,
                    &self.run_tag,
                );
            }
        }
        Ok(out)
    }

    /// Renders, validates and writes the run atomically.
    pub fn write(&self, path: &Path, lists: &[RankedList]) -> Result<()> {
        let text = self.render(lists)?;
        let report = validate_text(
            &text,
            &RunRules::new(self.max_per_topic),
            &ValidationContext::default(),
        );
        report.check()?;
        atomic::write_atomic(path, text.as_bytes())
    }
}

/// One line of a run whose order and rank column the caller decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankedLine<'a> {
    pub topic_id: &'a str,
    pub docid: &'a str,
    pub rank: usize,
    pub score: f64,
}

/// Lines in the order given, ranks as given: for rankers whose own order is the ranking (a
/// reranked head over a first-stage tail, a retriever's hits), where [`TrecRunWriter`]'s re-sort
/// would not apply. Fails on whitespace inside a field or a non-finite score.
pub fn render_ranked<'a>(
    run_tag: &str,
    score_format: ScoreFormat,
    lines: impl IntoIterator<Item = RankedLine<'a>>,
) -> Result<String> {
    check_field("run tag", run_tag)?;
    let mut out = String::new();
    for l in lines {
        check_field("topic id", l.topic_id)?;
        check_field("docid", l.docid)?;
        let printed = score_format.format(l.score)?;
        push_line(&mut out, l.topic_id, l.docid, l.rank, &printed, run_tag);
    }
    Ok(out)
}

/// [`render_ranked`], written atomically.
pub fn write_ranked<'a>(
    path: &Path,
    run_tag: &str,
    score_format: ScoreFormat,
    lines: impl IntoIterator<Item = RankedLine<'a>>,
) -> Result<()> {
    let text = render_ranked(run_tag, score_format, lines)?;
    atomic::write_atomic(path, text.as_bytes())
}

/// The one place a run line is spelled out.
fn push_line(out: &mut String, topic_id: &str, docid: &str, rank: usize, score: &str, tag: &str) {
    use std::fmt::Write;
    writeln!(out, "{topic_id} Q0 {docid} {rank} {score} {tag}").expect("writing to a String");
}

/// The rule every written field obeys: a run line is whitespace-separated columns.
pub fn check_field(what: &str, s: &str) -> Result<()> {
    if s.is_empty() || s.chars().any(char::is_whitespace) {
        return Err(FormatError::Invalid(format!(
            "{what} {s:?} is empty or contains whitespace"
        )));
    }
    Ok(())
}

/// What a TREC run must satisfy.
#[derive(Debug, Clone, Default)]
pub struct RunRules {
    /// Largest number of lines per topic.
    pub max_per_topic: usize,
    /// Official topic ids, when known: unknown topics are errors, missing ones warnings.
    pub topics: Option<Vec<String>>,
}

impl RunRules {
    pub fn new(max_per_topic: usize) -> Self {
        RunRules {
            max_per_topic,
            topics: None,
        }
    }
}

/// Validates TREC run text (see `validate_file`).
pub fn validate_text(text: &str, rules: &RunRules, ctx: &ValidationContext) -> Report {
    let mut report = Report::default();
    let mut run_tag: Option<String> = None;
    struct TopicState {
        count: usize,
        last_score: f64,
        last_rank: u32,
        docids: HashSet<String>,
        last_line: usize,
    }
    let mut topics: HashMap<String, TopicState> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut previous_topic: Option<String> = None;
    for (line, l) in numbered_lines(text) {
        if l.trim().is_empty() {
            report.error(line, "empty line");
            continue;
        }
        let r = match parse_line(l) {
            Ok(r) => r,
            Err(m) => {
                report.error(line, m);
                continue;
            }
        };
        let cols: Vec<&str> = l.split_whitespace().collect();
        if cols[1] != "Q0" {
            report.error(
                line,
                format!(
                    "second column must be the fixed string \"Q0\", found {:?}",
                    cols[1]
                ),
            );
        }
        match &run_tag {
            None => run_tag = Some(r.run_tag.clone()),
            Some(t) if *t != r.run_tag => report.error(
                line,
                format!(
                    "run tag {:?} differs from {:?} on the first line",
                    r.run_tag, t
                ),
            ),
            _ => {}
        }
        if let Some(official) = &rules.topics {
            if !official.contains(&r.topic_id) {
                report.error(line, format!("unknown topic {:?}", r.topic_id));
            }
        }
        if !ctx.knows(&r.docid) {
            report.error(
                line,
                format!("docid {:?} is not in the collection", r.docid),
            );
        }
        let is_new = !topics.contains_key(&r.topic_id);
        if is_new {
            order.push(r.topic_id.clone());
        } else if previous_topic.as_deref() != Some(r.topic_id.as_str()) {
            report.warning(
                line,
                format!("lines of topic {:?} are not contiguous", r.topic_id),
            );
        }
        previous_topic = Some(r.topic_id.clone());
        let st = topics.entry(r.topic_id.clone()).or_insert(TopicState {
            count: 0,
            last_score: f64::INFINITY,
            last_rank: 0,
            docids: HashSet::new(),
            last_line: 0,
        });
        st.count += 1;
        if st.count == rules.max_per_topic + 1 {
            report.error(
                line,
                format!(
                    "topic {:?} has more than {} results",
                    r.topic_id, rules.max_per_topic
                ),
            );
        }
        if r.score > st.last_score {
            report.error(
                line,
                format!(
                    "score {} is higher than the previous score {} of topic {:?} (scores must be non-increasing)",
                    cols[4], st.last_score, r.topic_id
                ),
            );
        }
        if r.rank <= st.last_rank {
            report.warning(
                line,
                format!(
                    "rank {} does not increase (previous {})",
                    r.rank, st.last_rank
                ),
            );
        }
        if !st.docids.insert(r.docid.clone()) {
            report.error(
                line,
                format!(
                    "docid {:?} appears twice for topic {:?}",
                    r.docid, r.topic_id
                ),
            );
        }
        st.last_score = r.score;
        st.last_rank = r.rank;
        st.last_line = line;
    }
    if let Some(official) = &rules.topics {
        for t in official {
            if !topics.contains_key(t) {
                report.warning(0, format!("no results for topic {t:?}"));
            }
        }
    }
    report
}

/// Validates a TREC run file.
pub fn validate_file(path: &Path, rules: &RunRules, ctx: &ValidationContext) -> Result<Report> {
    Ok(validate_text(&read_text(path)?, rules, ctx))
}

/// A score as the pipeline computed it: scores are `f32` and stored as `f64`; the shortest
/// decimal that identifies the `f32` is what a submission shows (0.1, not 0.10000000149011612).
/// Distinct `f32` values keep their order, so a non-increasing ranking stays non-increasing.
pub fn submitted_score(stored: f64) -> f64 {
    let single = stored as f32;
    format!("{single}").parse().unwrap_or(stored)
}

#[cfg(test)]
mod tests {
    #[test]
    fn scores_print_as_the_f32_they_were() {
        use super::submitted_score;
        assert_eq!(submitted_score(0.1f32 as f64), 0.1);
        assert_eq!(submitted_score(12.345678f32 as f64), 12.345678);
        assert_eq!(submitted_score(-3.0), -3.0);
        let a = 0.70000005f32 as f64;
        let b = 0.7f32 as f64;
        assert!(submitted_score(a) > submitted_score(b));
    }

    use super::*;

    #[test]
    fn ties_are_broken_like_trec_eval_and_truncated() {
        let w = TrecRunWriter::new("tag", 3);
        let text = w
            .render(&[RankedList {
                topic_id: "1".into(),
                hits: vec![
                    ("b".into(), 1.0),
                    ("a".into(), 2.0),
                    ("c".into(), 1.0),
                    ("d".into(), 0.5),
                ],
            }])
            .unwrap();
        assert_eq!(
            text,
            "1 Q0 a 1 2.0 tag\n1 Q0 c 2 1.0 tag\n1 Q0 b 3 1.0 tag\n"
        );
    }

    #[test]
    fn fixed_precision_ties_are_decided_on_printed_value() {
        let mut w = TrecRunWriter::new("t", 10);
        w.score_format = ScoreFormat::Fixed(2);
        let text = w
            .render(&[RankedList {
                topic_id: "q".into(),
                hits: vec![("x".into(), 0.501), ("y".into(), 0.499)],
            }])
            .unwrap();
        assert_eq!(text, "q Q0 y 1 0.50 t\nq Q0 x 2 0.50 t\n");
    }

    #[test]
    fn ranked_lines_keep_their_order_and_ranks() {
        let line = |docid, rank, score| RankedLine {
            topic_id: "7",
            docid,
            rank,
            score,
        };
        let text = render_ranked(
            "tag",
            ScoreFormat::Fixed(6),
            [line("b", 1, 0.5f32 as f64), line("a", 2, 0.75)],
        )
        .unwrap();
        assert_eq!(text, "7 Q0 b 1 0.500000 tag\n7 Q0 a 2 0.750000 tag\n");
        assert!(render_ranked("a tag", ScoreFormat::Fixed(6), []).is_err());
        assert!(render_ranked("t", ScoreFormat::Fixed(6), [line("a", 1, f64::NAN)]).is_err());
    }

    #[test]
    fn rejects_duplicates_and_whitespace() {
        let w = TrecRunWriter::new("t", 10);
        let dup = RankedList {
            topic_id: "q".into(),
            hits: vec![("x".into(), 1.0), ("x".into(), 0.5)],
        };
        assert!(w.render(&[dup]).is_err());
        let ws = RankedList {
            topic_id: "q 1".into(),
            hits: vec![],
        };
        assert!(w.render(&[ws]).is_err());
        assert!(TrecRunWriter::new("bad tag", 1).render(&[]).is_err());
    }

    #[test]
    fn validator_finds_each_problem_on_its_line() {
        let text =
            "1 Q0 a 1 2.0 t\n1 Q0 b 2 3.0 t\n1 Q0 a 3 1.0 t\n1 Q1 c 4 0.5 u\n1 Q0 d x 0.1 t\n";
        let r = validate_text(text, &RunRules::new(3), &ValidationContext::default());
        let lines: Vec<usize> = r.problems.iter().map(|p| p.line).collect();
        assert!(
            r.problems
                .iter()
                .any(|p| p.line == 2 && p.message.contains("non-increasing")),
            "{r:?}"
        );
        assert!(r
            .problems
            .iter()
            .any(|p| p.line == 3 && p.message.contains("twice")));
        assert!(r
            .problems
            .iter()
            .any(|p| p.line == 4 && p.message.contains("Q0")));
        assert!(r
            .problems
            .iter()
            .any(|p| p.line == 4 && p.message.contains("run tag")));
        assert!(r
            .problems
            .iter()
            .any(|p| p.line == 4 && p.message.contains("more than 3")));
        assert!(r
            .problems
            .iter()
            .any(|p| p.line == 5 && p.message.contains("rank")));
        assert!(!lines.contains(&1));
    }
}
