//! The verdicts of the organizers' iKAT 2025 checker (`validate_trec_ikat25.py`,
//! irlabamsterdam/iKAT), reproduced without fixing anything.
//!
//! The checker reads the submission line by line. Before it checks a line it "fixes" it: it
//! drops duplicate references of a list, trims more than 1000 references (turning `references`
//! and the citations into lists, which its checks then reject) and drops responses from the end
//! while the responses exceed 250 words; it writes the fixed lines to `FILE.fixed`. convrag
//! reports each of those fixes as a warning and leaves the file alone. The checks, on the line
//! as fixed: `metadata` an object with `team_id`, `run_id` and a `run_type` of automatic,
//! manual or generation-only; `references` an object of sortable scores (its ids not matching
//! `clueweb22-enDDDD-DD-DDDDD:N` only warn); each response an object with a string `text`,
//! `citations` (an object whose ids are all references) and `ptkb_provenance`. Then, over the
//! file: every turn of the topics present (a line counts when its `turn_id` is a string), and
//! no other turn. A duplicate line passes, as it does there. (The topics may be in any layout
//! [`super::ikat::read_topics`] reads; the checker itself finds turns only in the 2025 layout's
//! `responses`.) Where the checker stops with a
//! Python traceback, convrag reports an error on that line and checks no further, as it does.
//!
//! Each [`Finding`] renders the checker's own message ([`FindingKind::official`]), so its output
//! and convrag's can be compared line for line (tests/it/formats_ikat25.rs).

use std::collections::BTreeSet;

use regex::Regex;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::ikat::IkatTopic;
use super::validate::{Problem, Report, Severity};
use super::words::{is_python_space, trec_rag_sentence_words};

/// Most references per turn (the checker trims beyond).
pub const MAX_REFERENCES: usize = 1000;
/// Most words over a turn's responses, `len(NFKC(text.strip()).split())` summed (the checker
/// drops responses beyond).
pub const MAX_RESPONSE_WORDS: usize = 250;

/// A JSON value as Python's `json.loads` returns it: objects keep their key order (a repeated
/// key keeps its first place and its last value).
#[derive(Debug, Clone, PartialEq)]
enum Py {
    Null,
    Bool(bool),
    Num(serde_json::Number),
    Str(String),
    List(Vec<Py>),
    Dict(Vec<(String, Py)>),
}

impl<'de> Deserialize<'de> for Py {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(PyVisitor)
    }
}

struct PyVisitor;

impl<'de> Visitor<'de> for PyVisitor {
    type Value = Py;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Py, E> {
        Ok(Py::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Py, E> {
        Ok(Py::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Py, E> {
        Ok(Py::Num(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Py, E> {
        Ok(Py::Num(n.into()))
    }
    fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Py, E> {
        serde_json::Number::from_f64(n)
            .map(Py::Num)
            .ok_or_else(|| E::custom("non-finite number"))
    }
    fn visit_str<E>(self, s: &str) -> Result<Py, E> {
        Ok(Py::Str(s.to_string()))
    }
    fn visit_string<E>(self, s: String) -> Result<Py, E> {
        Ok(Py::Str(s))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Py, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = seq.next_element()? {
            v.push(x);
        }
        Ok(Py::List(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Py, A::Error> {
        let mut v: Vec<(String, Py)> = Vec::new();
        while let Some((k, x)) = map.next_entry::<String, Py>()? {
            match v.iter_mut().find(|(key, _)| *key == k) {
                Some(slot) => slot.1 = x,
                None => v.push((k, x)),
            }
        }
        Ok(Py::Dict(v))
    }
}

impl Py {
    /// Python's type name.
    fn type_name(&self) -> &'static str {
        match self {
            Py::Null => "NoneType",
            Py::Bool(_) => "bool",
            Py::Num(n) if n.is_f64() => "float",
            Py::Num(_) => "int",
            Py::Str(_) => "str",
            Py::List(_) => "list",
            Py::Dict(_) => "dict",
        }
    }

    /// Python's `str()` of a scalar (containers in JSON form, close enough for messages).
    fn py_str(&self) -> String {
        match self {
            Py::Null => "None".into(),
            Py::Bool(true) => "True".into(),
            Py::Bool(false) => "False".into(),
            Py::Num(n) => n.to_string(),
            Py::Str(s) => s.clone(),
            other => format!("{other:?}"),
        }
    }

    fn get(&self, key: &str) -> Option<&Py> {
        match self {
            Py::Dict(items) => items.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn as_f64(&self) -> Option<f64> {
        match self {
            Py::Num(n) => n.as_f64(),
            Py::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        }
    }
}

/// What the checker says about one line (or, at line 0, the file).
#[derive(Debug, Clone, PartialEq)]
pub enum FindingKind {
    JsonDecode(String),
    /// The checker stops here with a Python traceback (the exception).
    Crash(String),
    MetadataNotObject,
    /// Sorted.
    MetadataMissingKeys(Vec<String>),
    RunTypeInvalid(String),
    RunTypeMissing,
    /// The Python exception of `references.items()` or of sorting its scores.
    ReferencesNotDict(String),
    ReferencesNotList,
    ReferencePattern {
        index: usize,
        id: String,
    },
    ResponsesNotList,
    ResponseNotObject(usize),
    ResponseText(usize),
    CitationsMissing(usize),
    PtkbProvenanceMissing(usize),
    CitationsNotDict {
        response: usize,
        exception: String,
    },
    CitationNotInReferences {
        response: usize,
        id: String,
    },
    /// Fix: a `references` list repeated ids.
    DuplicateReferences(usize),
    /// Fix: more than 1000 references (the count).
    ReferencesTrimmed(usize),
    /// Fix: citations of references beyond the 1000th dropped.
    CitationsDropped {
        response: usize,
        count: usize,
    },
    /// Fix: the responses' words, over 250.
    ResponsesTooLong(usize),
    MissingTurn(String),
    AdditionalTurn(String),
}

impl FindingKind {
    /// Error or warning (fixes are warnings: convrag does not apply them).
    pub fn severity(&self) -> Severity {
        use FindingKind::*;
        match self {
            RunTypeMissing
            | ReferencePattern { .. }
            | DuplicateReferences(_)
            | ReferencesTrimmed(_)
            | CitationsDropped { .. }
            | ResponsesTooLong(_) => Severity::Warning,
            _ => Severity::Error,
        }
    }

    /// A fix the checker applies (and writes into `FILE.fixed`).
    pub fn is_fix(&self) -> bool {
        matches!(
            self,
            FindingKind::DuplicateReferences(_)
                | FindingKind::ReferencesTrimmed(_)
                | FindingKind::CitationsDropped { .. }
                | FindingKind::ResponsesTooLong(_)
        )
    }

    /// The checker's message.
    pub fn official(&self) -> String {
        use FindingKind::*;
        match self {
            JsonDecode(e) => format!("JSON decode error: {e}"),
            Crash(e) => format!("Traceback: {e}"),
            MetadataNotObject => "metadata must be an object".into(),
            MetadataMissingKeys(keys) => {
                let keys: Vec<String> = keys.iter().map(|k| format!("'{k}'")).collect();
                format!("metadata missing keys: {{{}}}", keys.join(", "))
            }
            RunTypeInvalid(t) => format!("invalid metadata.run_type: {t}"),
            RunTypeMissing => "field 'run_type' is missing from metadata".into(),
            ReferencesNotDict(e) => format!(
                "references must be a dict, with segment IDs as keys and scores as values: {e}"
            ),
            ReferencesNotList => "references error in the format".into(),
            ReferencePattern { index, id } => {
                format!("reference[{index}] not in CLUEWEB_PATTERN format: {id}")
            }
            ResponsesNotList => "responses must be a list".into(),
            ResponseNotObject(i) => format!("responses[{i}] must be object"),
            ResponseText(i) => format!("responses[{i}].text missing or not string"),
            CitationsMissing(i) => format!("responses[{i}].citations missing"),
            PtkbProvenanceMissing(i) => format!("responses[{i}].ptkb_provenance missing"),
            CitationsNotDict { response, exception } => format!(
                "responses[{response}].citations must be a dict, with segment IDs as keys and scores as values: {exception}"
            ),
            CitationNotInReferences { response, id } => {
                format!("responses[{response}].citation not found in references: {id}")
            }
            DuplicateReferences(n) => format!("removed {n} duplicate reference(s)"),
            ReferencesTrimmed(n) => {
                format!("references trimmed from {n} to {MAX_REFERENCES}")
            }
            CitationsDropped { response, count } => format!(
                "responses[{response}].citations: dropped {count} citation(s) not found in trimmed references"
            ),
            ResponsesTooLong(n) => {
                format!("response_length={n} > {MAX_RESPONSE_WORDS}. Trimming responses...")
            }
            MissingTurn(t) => format!("Missing turn_id: {t}"),
            AdditionalTurn(t) => format!("Additional turn_id not in topics: {t}"),
        }
    }
}

/// One verdict of the checker: the 1-based line it concerns (0: the file).
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub line: usize,
    pub kind: FindingKind,
}

impl Finding {
    /// As a validation problem: the checker's message, and for fixes what the checker would do.
    pub fn problem(&self) -> Problem {
        let mut message = match self.kind {
            FindingKind::ResponsesTooLong(n) => format!(
                "response_length={n} > {MAX_RESPONSE_WORDS}: the official checker drops responses from the end"
            ),
            _ => self.kind.official(),
        };
        if self.kind.is_fix() {
            message.push_str(" (it writes the fixed line into FILE.fixed)");
        }
        if matches!(self.kind, FindingKind::Crash(_)) {
            message.push_str(" (the official checker stops here)");
        }
        Problem {
            line: self.line,
            severity: self.kind.severity(),
            message,
        }
    }
}

/// The findings as a report.
pub fn to_report(findings: &[Finding]) -> Report {
    Report {
        problems: findings.iter().map(Finding::problem).collect(),
    }
}

/// The checker's verdicts on submission `text` against the turns of `topics`.
pub fn check_text(text: &str, topics: &[IkatTopic]) -> Vec<Finding> {
    let pattern = Regex::new(r"^clueweb22-en\d{4}-\d{2}-\d{5}:\d+\n?\z").expect("valid pattern");
    let mut out = Vec::new();
    let mut submitted = BTreeSet::new();
    for (i, raw) in python_lines(text).enumerate() {
        let line = i + 1;
        let stripped = raw.trim_matches(is_python_space);
        if stripped.is_empty() {
            continue;
        }
        let entry: Py = match serde_json::from_str(stripped) {
            Ok(v) => v,
            Err(e) => {
                out.push(Finding {
                    line,
                    kind: FindingKind::JsonDecode(e.to_string()),
                });
                continue;
            }
        };
        let mut line_findings = Vec::new();
        let checked = check_entry(&entry, &pattern, &mut submitted, &mut line_findings);
        let crashed = checked.is_err();
        if let Err(crash) = checked {
            // Only the fixes were printed before the traceback.
            line_findings.retain(FindingKind::is_fix);
            line_findings.push(FindingKind::Crash(crash));
        }
        out.extend(line_findings.into_iter().map(|kind| Finding { line, kind }));
        if crashed {
            return out;
        }
    }
    let expected: BTreeSet<String> = topics
        .iter()
        .flat_map(|t| t.turns.iter().map(|u| t.turn_key(u)))
        .collect();
    for t in expected.difference(&submitted) {
        out.push(Finding {
            line: 0,
            kind: FindingKind::MissingTurn(t.clone()),
        });
    }
    for t in submitted.difference(&expected) {
        out.push(Finding {
            line: 0,
            kind: FindingKind::AdditionalTurn(t.clone()),
        });
    }
    out
}

/// Lines as Python's text mode splits them (`\n`, `\r\n` and `\r` end a line).
fn python_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest.find(['\n', '\r']).unwrap_or(rest.len());
        let line = &rest[..end];
        let skip = if rest[end..].starts_with("\r\n") {
            2
        } else {
            usize::from(end < rest.len())
        };
        rest = &rest[end + skip..];
        Some(line)
    })
}

/// A Python exception that stops the checker.
type Crash = String;

/// `sorted(d.items(), key=value, reverse=True)` keys; the exception when the scores cannot be
/// compared (a single item is never compared).
fn sorted_keys(items: &[(String, Py)]) -> Result<Vec<String>, String> {
    if items.len() > 1 {
        let numbers = items.iter().all(|(_, v)| v.as_f64().is_some());
        let strings = items.iter().all(|(_, v)| matches!(v, Py::Str(_)));
        if !numbers && !strings {
            let a = items[0].1.type_name();
            let b = items
                .iter()
                .map(|(_, v)| v.type_name())
                .find(|t| *t != a || !matches!(*t, "int" | "float" | "bool" | "str"))
                .unwrap_or(a);
            // Python's reversed sort first compares the second item with the first.
            return Err(format!(
                "'<' not supported between instances of '{a}' and '{b}'"
            ));
        }
    }
    let mut sorted: Vec<&(String, Py)> = items.iter().collect();
    sorted.sort_by(|(_, x), (_, y)| match (x, y) {
        (Py::Str(x), Py::Str(y)) => y.cmp(x),
        _ => {
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            y.total_cmp(&x)
        }
    });
    Ok(sorted.into_iter().map(|(k, _)| k.clone()).collect())
}

/// `value.items()` sorted, or the exception.
fn dict_keys(value: Option<&Py>) -> Result<Vec<String>, String> {
    match value {
        Some(Py::Dict(items)) => sorted_keys(items),
        other => Err(format!(
            "'{}' object has no attribute 'items'",
            other.map_or("NoneType", Py::type_name)
        )),
    }
}

/// One line's checks: its turn id into `submitted`, its findings into `out`.
fn check_entry(
    entry: &Py,
    pattern: &Regex,
    submitted: &mut BTreeSet<String>,
    out: &mut Vec<FindingKind>,
) -> Result<(), Crash> {
    if !matches!(entry, Py::Dict(_)) {
        return Err(format!(
            "AttributeError: '{}' object has no attribute 'get'",
            entry.type_name()
        ));
    }
    if let Some(Py::Str(t)) = entry.get("turn_id") {
        submitted.insert(t.clone());
    }
    let fixed = fix_references(entry, out)?;
    let responses = fix_length(entry, out)?;
    check_metadata(entry, out)?;
    let references = fixed.references.as_ref().or(entry.get("references"));
    let refs = check_references(references, pattern, out);
    let Some(responses) = responses else {
        out.push(FindingKind::ResponsesNotList);
        return Ok(());
    };
    for (idx, a) in responses.iter().enumerate() {
        let citations = fixed
            .citations
            .get(idx)
            .and_then(Option::as_ref)
            .or_else(|| a.get("citations"));
        check_response(idx, a, citations, &refs, out)?;
    }
    Ok(())
}

/// What the checker's fixes replace in a line.
struct Fixed {
    references: Option<Py>,
    /// Per response, its citations as a list (after trimming the references).
    citations: Vec<Option<Py>>,
}

/// `fix_citations`: duplicates of a `references` list, more than 1000 references.
fn fix_references(entry: &Py, out: &mut Vec<FindingKind>) -> Result<Fixed, Crash> {
    let mut fixed = Fixed {
        references: None,
        citations: Vec::new(),
    };
    let mut refs: Vec<Py> = match entry.get("references") {
        None => Vec::new(),
        Some(Py::Dict(items)) => match sorted_keys(items) {
            Ok(keys) => keys.into_iter().map(Py::Str).collect(),
            // Iterating the dict itself: its keys, unique.
            Err(_) if items.len() > MAX_REFERENCES => {
                return Err("TypeError: a dict cannot be sliced".into())
            }
            Err(_) => return Ok(fixed),
        },
        Some(Py::List(v)) => v.clone(),
        Some(Py::Str(s)) => s.chars().map(|c| Py::Str(c.to_string())).collect(),
        Some(other) => {
            return Err(format!(
                "TypeError: object of type '{}' has no len()",
                other.type_name()
            ))
        }
    };
    let mut unique: Vec<Py> = Vec::new();
    for r in &refs {
        if matches!(r, Py::List(_) | Py::Dict(_)) {
            return Err(format!("TypeError: unhashable type: '{}'", r.type_name()));
        }
        if !unique.contains(r) {
            unique.push(r.clone());
        }
    }
    if unique.len() != refs.len() {
        out.push(FindingKind::DuplicateReferences(refs.len() - unique.len()));
        fixed.references = Some(Py::List(unique.clone()));
        refs = unique;
    }
    if refs.len() <= MAX_REFERENCES {
        return Ok(fixed);
    }
    out.push(FindingKind::ReferencesTrimmed(refs.len()));
    refs.truncate(MAX_REFERENCES);
    let Some(Py::List(responses)) = entry.get("responses") else {
        fixed.references = Some(Py::List(refs));
        return Ok(fixed);
    };
    for (idx, r) in responses.iter().enumerate() {
        let Some(old) = r.get("citations") else {
            fixed.citations.push(None);
            continue;
        };
        let old: Vec<Py> = match old {
            Py::Dict(items) => items.iter().map(|(k, _)| Py::Str(k.clone())).collect(),
            Py::List(v) => v.clone(),
            other => {
                return Err(format!(
                    "TypeError: '{}' object is not iterable",
                    other.type_name()
                ))
            }
        };
        let kept: Vec<Py> = old.iter().filter(|c| refs.contains(c)).cloned().collect();
        if kept.len() != old.len() {
            out.push(FindingKind::CitationsDropped {
                response: idx,
                count: old.len() - kept.len(),
            });
        }
        fixed.citations.push(Some(Py::List(kept)));
    }
    fixed.references = Some(Py::List(refs));
    Ok(fixed)
}

/// `fix_ikat_responses`: the responses left once those beyond 250 words are dropped from the
/// end; `None` when `responses` is not a list.
fn fix_length<'a>(entry: &'a Py, out: &mut Vec<FindingKind>) -> Result<Option<&'a [Py]>, Crash> {
    let responses: &[Py] = match entry.get("responses") {
        None => &[],
        Some(Py::List(v)) => v,
        Some(Py::Dict(items)) if items.is_empty() => return Ok(None),
        Some(Py::Str(s)) if s.is_empty() => return Ok(None),
        Some(Py::Dict(_) | Py::Str(_)) => {
            return Err("AttributeError: 'str' object has no attribute 'get'".into())
        }
        Some(other) => {
            return Err(format!(
                "TypeError: '{}' object is not iterable",
                other.type_name()
            ))
        }
    };
    let mut lengths = Vec::with_capacity(responses.len());
    for a in responses {
        let words = match a {
            Py::Dict(_) => match a.get("text") {
                None => 0,
                Some(Py::Str(t)) => trec_rag_sentence_words(t),
                Some(other) => {
                    return Err(format!(
                        "AttributeError: '{}' object has no attribute 'strip'",
                        other.type_name()
                    ))
                }
            },
            other => {
                return Err(format!(
                    "AttributeError: '{}' object has no attribute 'get'",
                    other.type_name()
                ))
            }
        };
        lengths.push(words);
    }
    let mut total: usize = lengths.iter().sum();
    if total <= MAX_RESPONSE_WORDS {
        return Ok(Some(responses));
    }
    out.push(FindingKind::ResponsesTooLong(total));
    let mut kept = responses.len();
    while total > MAX_RESPONSE_WORDS && kept > 0 {
        kept -= 1;
        if responses[kept].get("text").is_none() {
            return Err("KeyError: 'text'".into());
        }
        total -= lengths[kept];
    }
    Ok(Some(&responses[..kept]))
}

fn check_metadata(entry: &Py, out: &mut Vec<FindingKind>) -> Result<(), Crash> {
    let Some(Py::Dict(md)) = entry.get("metadata") else {
        out.push(FindingKind::MetadataNotObject);
        return Ok(());
    };
    let has = |k: &str| md.iter().any(|(key, _)| key == k);
    let missing: Vec<String> = ["run_id", "run_type", "team_id"]
        .into_iter()
        .filter(|k| !has(k))
        .map(str::to_string)
        .collect();
    if !missing.is_empty() {
        out.push(FindingKind::MetadataMissingKeys(missing));
    }
    match md.iter().find(|(k, _)| k == "run_type").map(|(_, v)| v) {
        None => out.push(FindingKind::RunTypeMissing),
        Some(Py::Str(s)) if ["manual", "automatic", "generation-only"].contains(&s.as_str()) => {}
        Some(v @ (Py::List(_) | Py::Dict(_))) => {
            return Err(format!("TypeError: unhashable type: '{}'", v.type_name()))
        }
        Some(v) => out.push(FindingKind::RunTypeInvalid(v.py_str())),
    }
    Ok(())
}

/// What citations are looked up in: the sorted reference ids, or the value itself when it
/// could not be sorted.
enum Refs {
    Ids(Vec<String>),
    Value(Option<Py>),
}

fn check_references(references: Option<&Py>, pattern: &Regex, out: &mut Vec<FindingKind>) -> Refs {
    let refs = match dict_keys(references) {
        Ok(ids) => Refs::Ids(ids),
        Err(e) => {
            out.push(FindingKind::ReferencesNotDict(e));
            Refs::Value(references.cloned())
        }
    };
    let items: Vec<Py> = match &refs {
        Refs::Ids(ids) => ids.iter().cloned().map(Py::Str).collect(),
        Refs::Value(Some(Py::List(v))) => v.clone(),
        Refs::Value(_) => {
            out.push(FindingKind::ReferencesNotList);
            return refs;
        }
    };
    for (index, r) in items.iter().enumerate() {
        let ok = matches!(r, Py::Str(s) if pattern.is_match(s));
        if !ok {
            out.push(FindingKind::ReferencePattern {
                index,
                id: r.py_str(),
            });
        }
    }
    refs
}

fn check_response(
    idx: usize,
    a: &Py,
    citations: Option<&Py>,
    refs: &Refs,
    out: &mut Vec<FindingKind>,
) -> Result<(), Crash> {
    if !matches!(a, Py::Dict(_)) {
        out.push(FindingKind::ResponseNotObject(idx));
        return Ok(());
    }
    if !matches!(a.get("text"), Some(Py::Str(_))) {
        out.push(FindingKind::ResponseText(idx));
    }
    if a.get("citations").is_none() {
        out.push(FindingKind::CitationsMissing(idx));
    }
    if a.get("ptkb_provenance").is_none() {
        out.push(FindingKind::PtkbProvenanceMissing(idx));
        return Ok(());
    }
    let Some(citations) = citations else {
        return Err("KeyError: 'citations'".into());
    };
    let ids = match dict_keys(Some(citations)) {
        Ok(ids) => ids,
        Err(exception) => {
            out.push(FindingKind::CitationsNotDict {
                response: idx,
                exception,
            });
            return Ok(());
        }
    };
    for id in ids {
        let found = match refs {
            Refs::Ids(r) => r.contains(&id),
            Refs::Value(Some(Py::List(v))) => v.contains(&Py::Str(id.clone())),
            Refs::Value(Some(Py::Dict(items))) => items.iter().any(|(k, _)| *k == id),
            Refs::Value(Some(Py::Str(s))) => s.contains(&id),
            Refs::Value(other) => {
                return Err(format!(
                    "TypeError: argument of type '{}' is not iterable",
                    other.as_ref().map_or("NoneType", Py::type_name)
                ))
            }
        };
        if !found {
            out.push(FindingKind::CitationNotInReferences { response: idx, id });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<FindingKind> {
        check_text(text, &[]).into_iter().map(|f| f.kind).collect()
    }

    const OK: &str = r#"{"metadata": {"team_id": "t", "run_id": "r", "run_type": "automatic"}, "turn_id": "1_1", "references": {"clueweb22-en0000-00-00000:0": 1.0}, "responses": [{"text": "Yes.", "citations": {"clueweb22-en0000-00-00000:0": 1.0}, "ptkb_provenance": []}]}"#;

    #[test]
    fn a_good_line_has_only_the_turn_outside_the_topics() {
        assert_eq!(kinds(OK), vec![FindingKind::AdditionalTurn("1_1".into())]);
    }

    #[test]
    fn python_lines_split_like_text_mode() {
        let lines: Vec<&str> = python_lines("a\r\nb\rc\n\nd").collect();
        assert_eq!(lines, ["a", "b", "c", "", "d"]);
    }

    #[test]
    fn repeated_keys_keep_their_first_place_and_last_value() {
        let v: Py = serde_json::from_str(r#"{"a": 1, "b": 2, "a": 3}"#).unwrap();
        assert_eq!(
            v,
            Py::Dict(vec![
                ("a".into(), Py::Num(3.into())),
                ("b".into(), Py::Num(2.into()))
            ])
        );
    }

    #[test]
    fn mixed_scores_cannot_be_sorted_but_one_score_needs_no_comparison() {
        let two = vec![
            ("a".to_string(), Py::Str("x".into())),
            ("b".to_string(), Py::Num(1.into())),
        ];
        assert!(sorted_keys(&two).is_err());
        assert_eq!(sorted_keys(&two[..1]).unwrap(), ["a"]);
    }

    #[test]
    fn a_trailing_newline_still_matches_the_pattern_as_in_python() {
        let p = Regex::new(r"^clueweb22-en\d{4}-\d{2}-\d{5}:\d+\n?\z").unwrap();
        assert!(p.is_match("clueweb22-en0000-00-00000:0\n"));
        assert!(!p.is_match("clueweb22-en0000-00-00000:0 "));
    }
}
