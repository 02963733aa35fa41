//! TREC CAsT 2019/2020 topics (`number` + `turn[].number` + `raw_utterance`;
//! `manual_rewritten_utterance` is the manual rewrite) in iKAT's shape. CAsT has no canonical
//! response text and no PTKB.

use std::path::Path;

use serde_json::Value;

use super::ikat::{IkatTopic, IkatTurn};
use super::{key_lines, FormatError, Result};

/// Whether a parsed JSON document is CAsT topics (its topics have `turn`, not iKAT's `turns`).
pub fn is_cast_topics(value: &Value) -> bool {
    value
        .as_array()
        .and_then(|a| a.first())
        .is_some_and(|t| t.get("turn").is_some())
}

/// The topics of a CAsT topics file: `text` is its content, `value` that content parsed.
pub fn read_cast_topics(path: &Path, text: &str, value: &Value) -> Result<Vec<IkatTopic>> {
    // `number` keys in document order: each topic's, then its turns'.
    let mut line_at = key_lines(text, "number").into_iter();
    let mut out = Vec::new();
    for (i, t) in value.as_array().into_iter().flatten().enumerate() {
        let line = line_at.next().unwrap_or(1);
        let number = t
            .get("number")
            .and_then(|n| {
                n.as_u64()
                    .map(|n| n.to_string())
                    .or(n.as_str().map(String::from))
            })
            .ok_or_else(|| {
                FormatError::parse(path, line, format!("topic #{}: missing `number`", i + 1))
            })?;
        let turns = t.get("turn").and_then(Value::as_array).ok_or_else(|| {
            FormatError::parse(
                path,
                line,
                format!("topic {number}: `turn` must be an array"),
            )
        })?;
        let mut topic_turns = Vec::new();
        for (j, turn) in turns.iter().enumerate() {
            let turn_line = line_at.next().unwrap_or(line);
            topic_turns.push(read_turn(path, turn_line, &number, j, turn)?);
        }
        out.push(IkatTopic {
            line,
            number,
            title: t
                .get("title")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            ptkb: Vec::new(),
            turns: topic_turns,
        });
    }
    Ok(out)
}

/// Turn `index` (0-based) of topic `number`, found at `line`.
fn read_turn(
    path: &Path,
    line: usize,
    number: &str,
    index: usize,
    turn: &Value,
) -> Result<IkatTurn> {
    let turn_id = turn
        .get("number")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| {
            FormatError::parse(
                path,
                line,
                format!("topic {number} turn #{}: missing `number`", index + 1),
            )
        })?;
    let utterance = turn
        .get("raw_utterance")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            FormatError::parse(
                path,
                line,
                format!("topic {number} turn {turn_id}: missing `raw_utterance`"),
            )
        })?;
    Ok(IkatTurn {
        line,
        turn_id,
        utterance: utterance.to_string(),
        resolved_utterance: turn
            .get("manual_rewritten_utterance")
            .and_then(Value::as_str)
            .map(String::from),
        response: None,
        ptkb_provenance: Vec::new(),
        response_provenance: Vec::new(),
    })
}
