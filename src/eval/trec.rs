//! Readers for relevance judgments (qrels) and runs.
//!
//! Formats and rules (trec_eval 9.0.x is the reference; where convrag is stricter it says so):
//! - **qrels**: `qid iter docid rel`, whitespace-separated, exactly 4 fields; `iter` is ignored (it is
//!   not always 0); `rel` is an integer (negative = in the pool but unjudged, as in trec_eval).
//!   Blank lines and lines starting with `#` are skipped (trec_eval skips `#` lines; it rejects
//!   blank qrels lines, convrag tolerates them).
//! - **TREC run**: `qid Q0 docid rank score tag`, at least 6 fields (more are ignored, as in
//!   trec_eval); the rank column is ignored: documents are ranked by score, ties broken by docid
//!   (see [`crate::eval::measures`]). A score must be a finite number: trec_eval's `atof` would read
//!   `abc` as 0 silently, convrag reports the line instead.
//! - **JSON run**: `{"qid": {"docid": score, ...}, ...}` (the layout pytrec_eval and many iKAT
//!   tools write); also an iKAT submission (`{"run_name", "turns": [...]}`), whose passage
//!   provenance is read in response order (see [`ikat_run_to_run`]).
//! - **Duplicates**: a (query, document) pair given twice is an error naming both lines, in qrels
//!   and runs alike. trec_eval also refuses them ("duplicate docs"), but only when it evaluates that
//!   query; convrag refuses the file.
//! - Queries of the run without judgments are skipped; qrels queries absent from the run are
//!   skipped too, unless averaging over all qrels queries (`-c`), where they score 0.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::{read_text, EvalError, Result};

/// Judgments: query id → document id → relevance grade.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Qrels {
    pub queries: BTreeMap<String, HashMap<String, i64>>,
}

impl Qrels {
    pub fn get(&self, qid: &str) -> Option<&HashMap<String, i64>> {
        self.queries.get(qid)
    }
    pub fn len(&self) -> usize {
        self.queries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }
    /// Adds one judgment; `Err(previous grade)` when the pair is already judged.
    pub fn insert(&mut self, qid: &str, docid: &str, rel: i64) -> std::result::Result<(), i64> {
        let docs = self.queries.entry(qid.to_string()).or_default();
        match docs.get(docid) {
            Some(&old) => Err(old),
            None => {
                docs.insert(docid.to_string(), rel);
                Ok(())
            }
        }
    }
}

/// A run: per query (in the order queries first appear in the file) the retrieved
/// (document id, score) pairs in file order; ranking happens at evaluation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    queries: Vec<(String, Vec<(String, f64)>)>,
    index: HashMap<String, usize>,
}

impl Run {
    pub fn len(&self) -> usize {
        self.queries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }
    /// Queries in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[(String, f64)])> {
        self.queries.iter().map(|(q, d)| (q.as_str(), d.as_slice()))
    }
    pub fn get(&self, qid: &str) -> Option<&[(String, f64)]> {
        self.index.get(qid).map(|&i| self.queries[i].1.as_slice())
    }
    /// Appends a document to a query (creating the query at the end if new).
    pub fn push(&mut self, qid: &str, docid: String, score: f64) {
        let i = match self.index.get(qid) {
            Some(&i) => i,
            None => {
                self.queries.push((qid.to_string(), Vec::new()));
                self.index.insert(qid.to_string(), self.queries.len() - 1);
                self.queries.len() - 1
            }
        };
        self.queries[i].1.push((docid, score));
    }
    /// Sets a query's documents (replacing them if the query exists).
    pub fn insert(&mut self, qid: String, docs: Vec<(String, f64)>) {
        match self.index.get(&qid) {
            Some(&i) => self.queries[i].1 = docs,
            None => {
                self.index.insert(qid.clone(), self.queries.len());
                self.queries.push((qid, docs));
            }
        }
    }
    /// Builds a run from ranked lists: the first document gets the highest score.
    pub fn from_rankings<I, S>(rankings: I) -> Run
    where
        I: IntoIterator<Item = (S, Vec<String>)>,
        S: Into<String>,
    {
        let mut run = Run::default();
        for (qid, docs) in rankings {
            let n = docs.len();
            let list = docs
                .into_iter()
                .enumerate()
                .map(|(i, d)| (d, (n - i) as f64))
                .collect();
            run.insert(qid.into(), list);
        }
        run
    }
}

/// Lines of a text file with their 1-based numbers, skipping blank and `#` lines.
fn content_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter_map(|(i, l)| {
        let t = l.trim();
        (!t.is_empty() && !t.starts_with('#')).then_some((i + 1, t))
    })
}

/// Reads TREC qrels (4 columns) from a file (`.gz` allowed).
pub fn read_qrels(path: &Path) -> Result<Qrels> {
    parse_qrels(path, &read_text(path)?)
}

/// Parses TREC qrels text; `path` only names the source in errors.
pub fn parse_qrels(path: &Path, text: &str) -> Result<Qrels> {
    let mut qrels = Qrels::default();
    let mut first_line: HashMap<(String, String), usize> = HashMap::new();
    for (no, line) in content_lines(text) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() != 4 {
            return Err(EvalError::parse(
                path,
                no,
                format!(
                    "malformed qrels line: expected 4 fields `qid iter docid rel`, found {}",
                    fields.len()
                ),
            ));
        }
        let rel: i64 = fields[3].parse().map_err(|_| {
            EvalError::parse(
                path,
                no,
                format!("relevance `{}` is not an integer", fields[3]),
            )
        })?;
        if qrels.insert(fields[0], fields[2], rel).is_err() {
            let prev = first_line[&(fields[0].to_string(), fields[2].to_string())];
            return Err(EvalError::parse(
                path,
                no,
                format!(
                    "duplicate judgment for query `{}` document `{}` (first at line {prev})",
                    fields[0], fields[2]
                ),
            ));
        }
        first_line.insert((fields[0].to_string(), fields[2].to_string()), no);
    }
    Ok(qrels)
}

/// Reads a run, detecting the format: JSON (`{"qid": {"docid": score}}` or an iKAT submission)
/// when the file starts with `{`, rank_llm hits when it starts with `[`, TREC 6-column text
/// otherwise.
pub fn read_run(path: &Path) -> Result<Run> {
    let text = read_text(path)?;
    let start = text.trim_start();
    if start.starts_with('{') {
        parse_json_run(path, &text)
    } else if start.starts_with('[') {
        parse_rank_llm_run(path, &text)
    } else {
        parse_trec_run(path, &text)
    }
}

#[derive(Deserialize)]
struct RankLlmQuery {
    hits: Vec<RankLlmHit>,
}

#[derive(Deserialize)]
struct RankLlmHit {
    qid: StatementId,
    docid: StatementId,
    score: f64,
}

/// rank_llm candidate lists: `[{"query", "hits": [{"qid", "docid", "score", ...}]}]`.
pub fn parse_rank_llm_run(path: &Path, text: &str) -> Result<Run> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let queries: Vec<RankLlmQuery> = serde_path_to_error::deserialize(de).map_err(|e| {
        EvalError::parse(
            path,
            e.inner().line().max(1),
            format!("{} (at {})", e.inner(), e.path()),
        )
    })?;
    let mut run = Run::default();
    let mut seen = std::collections::HashSet::new();
    for (i, q) in queries.iter().enumerate() {
        for h in &q.hits {
            let (qid, docid) = (h.qid.to_string(), h.docid.to_string());
            if !h.score.is_finite() {
                return Err(EvalError::file(
                    path,
                    format!("query {}: score of `{docid}` is not finite", i + 1),
                ));
            }
            if !seen.insert((qid.clone(), docid.clone())) {
                return Err(EvalError::file(
                    path,
                    format!("duplicate document `{docid}` for query `{qid}`"),
                ));
            }
            run.push(&qid, docid, h.score);
        }
    }
    Ok(run)
}

fn parse_score(path: &Path, line: usize, s: &str) -> Result<f64> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(EvalError::parse(
            path,
            line,
            format!("score `{s}` is not a finite number"),
        )),
    }
}

/// Parses a TREC run (`qid Q0 docid rank score tag`).
pub fn parse_trec_run(path: &Path, text: &str) -> Result<Run> {
    let mut run = Run::default();
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    for (no, line) in content_lines(text) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 6 {
            return Err(EvalError::parse(
                path,
                no,
                format!(
                    "malformed run line: expected 6 fields `qid Q0 docid rank score tag`, found {}",
                    fields.len()
                ),
            ));
        }
        let score = parse_score(path, no, fields[4])?;
        let key = (fields[0].to_string(), fields[2].to_string());
        if let Some(prev) = seen.get(&key) {
            return Err(EvalError::parse(
                path,
                no,
                format!(
                    "duplicate document `{}` for query `{}` (first at line {prev})",
                    fields[2], fields[0]
                ),
            ));
        }
        seen.insert(key, no);
        run.push(fields[0], fields[2].to_string(), score);
    }
    Ok(run)
}

/// `{"docid": score}` kept in file order, refusing duplicate keys (serde_json places the error).
struct ScoredDocs(Vec<(String, f64)>);

impl<'de> Deserialize<'de> for ScoredDocs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ScoredDocs;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object {\"docid\": score}")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<ScoredDocs, A::Error> {
                let mut docs: Vec<(String, f64)> = Vec::new();
                let mut seen = std::collections::HashSet::new();
                while let Some(docid) = map.next_key::<String>()? {
                    let score: f64 = map.next_value()?;
                    if !score.is_finite() {
                        return Err(de::Error::custom(format!(
                            "score of `{docid}` is not a finite number"
                        )));
                    }
                    if !seen.insert(docid.clone()) {
                        return Err(de::Error::custom(format!("duplicate document `{docid}`")));
                    }
                    docs.push((docid, score));
                }
                Ok(ScoredDocs(docs))
            }
        }
        d.deserialize_map(V)
    }
}

/// `{"qid": {"docid": score}}`, refusing duplicate query keys.
struct JsonRun(Vec<(String, Vec<(String, f64)>)>);

impl<'de> Deserialize<'de> for JsonRun {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = JsonRun;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object {\"qid\": {\"docid\": score}}")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<JsonRun, A::Error> {
                let mut out = Vec::new();
                let mut seen = std::collections::HashSet::new();
                while let Some(qid) = map.next_key::<String>()? {
                    let docs: ScoredDocs = map.next_value()?;
                    if !seen.insert(qid.clone()) {
                        return Err(de::Error::custom(format!("duplicate query `{qid}`")));
                    }
                    out.push((qid, docs.0));
                }
                Ok(JsonRun(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Parses a JSON run: `{"qid": {"docid": score}}` or an iKAT submission.
pub fn parse_json_run(path: &Path, text: &str) -> Result<Run> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| EvalError::json(path, &e))?;
    if value.get("turns").is_some_and(|t| t.is_array()) {
        let ikat = parse_ikat_run(path, text)?;
        return Ok(ikat_run_to_run(&ikat));
    }
    let parsed: JsonRun = serde_json::from_str(text).map_err(|e| EvalError::json(path, &e))?;
    let mut run = Run::default();
    for (qid, docs) in parsed.0 {
        run.insert(qid, docs);
    }
    Ok(run)
}

/// A statement id in `ptkb_provenance`: the guidelines use integers, some tools write strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(untagged)]
pub enum StatementId {
    Int(i64),
    Str(String),
}

impl fmt::Display for StatementId {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            StatementId::Int(i) => write!(f, "{i}"),
            StatementId::Str(s) => f.write_str(s.trim()),
        }
    }
}

/// The parts of an iKAT run file evaluation needs (see the iKAT 2024 guidelines).
#[derive(Debug, Clone, Deserialize)]
pub struct IkatRun {
    #[serde(default)]
    pub run_name: Option<String>,
    #[serde(default)]
    pub run_type: Option<String>,
    pub turns: Vec<IkatRunTurn>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct IkatRunTurn {
    pub turn_id: String,
    #[serde(default)]
    pub responses: Vec<IkatResponse>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct IkatResponse {
    #[serde(default)]
    pub rank: Option<i64>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub ptkb_provenance: Vec<StatementId>,
    #[serde(default)]
    pub passage_provenance: Vec<IkatPassage>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct IkatPassage {
    pub id: String,
    #[serde(default)]
    pub score: Option<f64>,
    #[serde(default)]
    pub used: Option<bool>,
}

impl IkatRunTurn {
    /// Responses in rank order (the `rank` field; file order when absent or equal).
    pub fn ranked_responses(&self) -> Vec<&IkatResponse> {
        let mut r: Vec<&IkatResponse> = self.responses.iter().collect();
        r.sort_by_key(|x| x.rank.unwrap_or(i64::MAX));
        r
    }
}

/// Reads an iKAT run file.
pub fn read_ikat_run(path: &Path) -> Result<IkatRun> {
    parse_ikat_run(path, &read_text(path)?)
}

pub fn parse_ikat_run(path: &Path, text: &str) -> Result<IkatRun> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let run: IkatRun = serde_path_to_error::deserialize(de).map_err(|e| {
        let inner = e.inner();
        EvalError::parse(
            path,
            inner.line().max(1),
            format!("{} (at {})", inner, e.path()),
        )
    })?;
    let mut seen = std::collections::HashSet::new();
    for t in &run.turns {
        if !seen.insert(t.turn_id.as_str()) {
            return Err(EvalError::file(
                path,
                format!("turn `{}` appears twice", t.turn_id),
            ));
        }
    }
    Ok(run)
}

/// The passage ranking of an iKAT run: provenance of all responses in response order (as the
/// guidelines assess it), first occurrence of a passage kept, at most 1000 per turn. Scores are
/// rank-based (n, n-1, ...), since provenance scores of different responses are not comparable.
pub fn ikat_run_to_run(ikat: &IkatRun) -> Run {
    let rankings = ikat.turns.iter().map(|t| {
        let mut seen = std::collections::HashSet::new();
        let mut docs = Vec::new();
        for r in t.ranked_responses() {
            for p in &r.passage_provenance {
                if docs.len() < 1000 && seen.insert(p.id.clone()) {
                    docs.push(p.id.clone());
                }
            }
        }
        (t.turn_id.clone(), docs)
    });
    Run::from_rankings(rankings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("x.txt")
    }

    #[test]
    fn qrels_errors_name_file_and_line() {
        let e = parse_qrels(p(), "q1 0 d1 1\n\nq1 0 d2\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.txt:3: malformed qrels line: expected 4 fields `qid iter docid rel`, found 3"
        );
        let e = parse_qrels(p(), "q1 0 d1 1\nq1 0 d2 x\n").unwrap_err();
        assert!(e.to_string().starts_with("x.txt:2: relevance `x`"), "{e}");
        let e = parse_qrels(p(), "q1 0 d1 1\n# c\nq1 Q0 d1 2\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.txt:3: duplicate judgment for query `q1` document `d1` (first at line 1)"
        );
    }

    #[test]
    fn qrels_second_column_ignored() {
        let q = parse_qrels(p(), "q1 7 d1 2\nq1 Q0 d2 -1\n").unwrap();
        assert_eq!(q.get("q1").unwrap()["d1"], 2);
        assert_eq!(q.get("q1").unwrap()["d2"], -1);
    }

    #[test]
    fn run_errors_name_file_and_line() {
        let e = parse_trec_run(p(), "q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 abc t\n").unwrap_err();
        assert_eq!(e.to_string(), "x.txt:2: score `abc` is not a finite number");
        let e = parse_trec_run(p(), "q1 Q0 d1 1 2.5\n").unwrap_err();
        assert!(
            e.to_string().starts_with("x.txt:1: malformed run line"),
            "{e}"
        );
        let e =
            parse_trec_run(p(), "q1 Q0 d1 1 2.5 t\nq2 Q0 d1 1 1 t\nq1 Q0 d1 3 1 t\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.txt:3: duplicate document `d1` for query `q1` (first at line 1)"
        );
        // Extra columns are ignored, as trec_eval does.
        let r = parse_trec_run(p(), "q1 Q0 d1 1 2.5 t extra\n").unwrap();
        assert_eq!(r.get("q1").unwrap(), vec![("d1".to_string(), 2.5)]);
    }

    #[test]
    fn json_run_errors_name_line() {
        let e = parse_json_run(p(), "{\"q1\": {\"d1\": 1.0,\n \"d1\": 2.0}}").unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("x.txt:2: duplicate document `d1`"), "{s}");
        let e = parse_json_run(p(), "{\"q1\": {\"d1\": 1.0},\n\"q2\": {\"d1\": \"high\"}}")
            .unwrap_err();
        assert!(e.to_string().starts_with("x.txt:2: "), "{e}");
        let e = parse_json_run(p(), "{\"q1\": {\"d1\": 1.0}\n\n").unwrap_err();
        assert!(e.to_string().starts_with("x.txt:3: "), "{e}");
        let r = parse_json_run(p(), "{\"q1\": {\"d2\": 1.0, \"d1\": 3}}").unwrap();
        assert_eq!(
            r.get("q1").unwrap(),
            vec![("d2".to_string(), 1.0), ("d1".to_string(), 3.0)]
        );
    }

    #[test]
    fn rank_llm_hits() {
        let r = parse_rank_llm_run(p(), r#"[{"query": "q", "hits": [{"content": "c", "qid": 7, "docid": "d1", "rank": 1, "score": 2.5}]}]"#).unwrap();
        assert_eq!(r.get("7").unwrap(), &[("d1".to_string(), 2.5)]);
        let e = parse_rank_llm_run(
            p(),
            "[{\"query\": \"q\",\n \"hits\": [{\"qid\": 7, \"docid\": \"d1\"}]}]",
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with("x.txt:2: missing field `score`"),
            "{e}"
        );
    }

    #[test]
    fn ikat_run_provenance_in_response_order() {
        let text = r#"{"run_name": "r", "run_type": "automatic", "turns": [
          {"turn_id": "1-2_3", "responses": [
            {"rank": 2, "text": "b", "ptkb_provenance": [], "passage_provenance": [{"id": "c", "score": 9.0}, {"id": "a", "score": 1.0}]},
            {"rank": 1, "text": "a", "ptkb_provenance": [2, 1], "passage_provenance": [{"id": "a", "score": 0.5, "used": true}, {"id": "b", "score": 0.4}]}
          ]}]}"#;
        let run = parse_json_run(p(), text).unwrap();
        let ids: Vec<&str> = run
            .get("1-2_3")
            .unwrap()
            .iter()
            .map(|(d, _)| d.as_str())
            .collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert!(run.get("1-2_3").unwrap()[0].1 > run.get("1-2_3").unwrap()[2].1);
        let e = parse_ikat_run(p(), "{\"turns\": [{\"turn_id\": 3}]}").unwrap_err();
        assert!(e.to_string().contains("turns[0].turn_id"), "{e}");
    }
}
