//! TREC CAsT topics in iKAT's shape. CAsT has no PTKB.
//!
//! - 2019/2020: `number` + `turn[].number` (integers) + `raw_utterance`;
//!   `manual_rewritten_utterance` is the manual rewrite; no response text.
//! - 2022 (the `*_tree_*` topics): `turn[]` holds User and System turns (`participant`), each with
//!   a `number` such as `2-3` (branch-turn) and a `parent`; User turns carry `utterance` and
//!   `manual_rewritten_utterance`, System turns the canonical `response`. The topic is a tree:
//!   each branch leaves the conversation at an earlier turn. It is read as one conversation per
//!   root-to-leaf path, so the paths share their opening turns
//!   ([`super::ikat::distinct_turns`] visits each turn once).

use std::collections::{HashMap, HashSet};
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
        let number = t.get("number").and_then(number_text).ok_or_else(|| {
            FormatError::parse(path, line, format!("topic #{}: missing `number`", i + 1))
        })?;
        let turns = t.get("turn").and_then(Value::as_array).ok_or_else(|| {
            FormatError::parse(
                path,
                line,
                format!("topic {number}: `turn` must be an array"),
            )
        })?;
        let lines: Vec<usize> = turns
            .iter()
            .map(|_| line_at.next().unwrap_or(line))
            .collect();
        let title = t
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let topic = |turns: Vec<IkatTurn>| IkatTopic {
            line,
            number: number.clone(),
            title: title.clone(),
            ptkb: Vec::new(),
            turns,
        };
        if turns.iter().any(|turn| turn.get("participant").is_some()) {
            let nodes = turns
                .iter()
                .zip(&lines)
                .enumerate()
                .map(|(j, (turn, &l))| read_node(path, l, &number, j, turn))
                .collect::<Result<Vec<_>>>()?;
            out.extend(tree_paths(path, &number, &nodes)?.into_iter().map(topic));
        } else {
            let mut linear = Vec::new();
            for (j, (turn, &l)) in turns.iter().zip(&lines).enumerate() {
                linear.push(read_turn(path, l, &number, j, turn)?);
            }
            out.push(topic(linear));
        }
    }
    Ok(out)
}

/// A topic or turn `number`: an integer, or a string such as CAsT 2022's `1-2`.
fn number_text(n: &Value) -> Option<String> {
    n.as_u64()
        .map(|n| n.to_string())
        .or(n.as_str().map(String::from))
}

/// Turn `index` (0-based) of 2019/2020 topic `number`, found at `line`.
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
        turn_id: turn_id.to_string(),
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

/// Who speaks a CAsT 2022 turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Participant {
    User,
    System,
}

/// One turn of a CAsT 2022 topic tree.
#[derive(Debug)]
struct Node {
    line: usize,
    number: String,
    parent: Option<String>,
    participant: Participant,
    /// The utterance (User) or the response (System).
    text: String,
    manual_rewrite: Option<String>,
    provenance: Vec<String>,
}

/// Turn `index` (0-based) of 2022 topic `number`, found at `line`.
fn read_node(path: &Path, line: usize, number: &str, index: usize, turn: &Value) -> Result<Node> {
    let err = |m: String| {
        FormatError::parse(
            path,
            line,
            format!("topic {number} turn #{}: {m}", index + 1),
        )
    };
    let id = turn
        .get("number")
        .and_then(Value::as_str)
        .ok_or_else(|| err("missing `number` string (such as \"1-1\")".into()))?;
    let participant = match turn.get("participant").and_then(Value::as_str) {
        Some("User") => Participant::User,
        Some("System") => Participant::System,
        other => {
            return Err(err(format!(
                "turn {id}: `participant` must be \"User\" or \"System\", not {other:?}"
            )))
        }
    };
    let field = match participant {
        Participant::User => "utterance",
        Participant::System => "response",
    };
    let text = turn
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| err(format!("turn {id}: missing `{field}`")))?;
    Ok(Node {
        line,
        number: id.to_string(),
        parent: turn.get("parent").and_then(Value::as_str).map(String::from),
        participant,
        text: text.to_string(),
        manual_rewrite: turn
            .get("manual_rewritten_utterance")
            .and_then(Value::as_str)
            .map(String::from),
        provenance: turn
            .get("provenance")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str().map(String::from))
            .collect(),
    })
}

/// The user turns of every root-to-leaf path of a 2022 topic tree, leaves in document order;
/// a System turn is the response of the User turn it answers (its parent).
fn tree_paths(path: &Path, number: &str, nodes: &[Node]) -> Result<Vec<Vec<IkatTurn>>> {
    let mut index = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        if index.insert(n.number.as_str(), i).is_some() {
            return Err(FormatError::parse(
                path,
                n.line,
                format!("topic {number}: turn {} appears twice", n.number),
            ));
        }
    }
    let mut parents = HashSet::new();
    for n in nodes {
        if let Some(p) = &n.parent {
            if !index.contains_key(p.as_str()) {
                return Err(FormatError::parse(
                    path,
                    n.line,
                    format!(
                        "topic {number} turn {}: parent {p} is not a turn of the topic",
                        n.number
                    ),
                ));
            }
            parents.insert(p.as_str());
        }
    }
    let mut out = Vec::new();
    for leaf in nodes
        .iter()
        .filter(|n| !parents.contains(n.number.as_str()))
    {
        // Walk up to the root; a parent chain longer than the topic is a cycle.
        let mut chain = vec![leaf];
        while let Some(p) = &chain[chain.len() - 1].parent {
            if chain.len() > nodes.len() {
                return Err(FormatError::parse(
                    path,
                    leaf.line,
                    format!(
                        "topic {number} turn {}: its parents form a cycle",
                        leaf.number
                    ),
                ));
            }
            chain.push(&nodes[index[p.as_str()]]);
        }
        chain.reverse();
        let mut turns: Vec<IkatTurn> = Vec::new();
        for n in chain {
            match n.participant {
                Participant::User => turns.push(IkatTurn {
                    line: n.line,
                    turn_id: n.number.clone(),
                    utterance: n.text.clone(),
                    resolved_utterance: n.manual_rewrite.clone(),
                    response: None,
                    ptkb_provenance: Vec::new(),
                    response_provenance: Vec::new(),
                }),
                Participant::System => match turns.last_mut() {
                    Some(t) if t.response.is_none() => {
                        t.response = Some(n.text.clone());
                        t.response_provenance = n.provenance.clone();
                    }
                    _ => {
                        return Err(FormatError::parse(
                            path,
                            n.line,
                            format!(
                                "topic {number} turn {}: a System turn must answer a User turn",
                                n.number
                            ),
                        ))
                    }
                },
            }
        }
        out.push(turns);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::ikat::distinct_turns;

    fn read(json: &str) -> Result<Vec<IkatTopic>> {
        let value: Value = serde_json::from_str(json).unwrap();
        assert!(is_cast_topics(&value));
        read_cast_topics(Path::new("t.json"), json, &value)
    }

    const TREE: &str = r#"[{"number": 132, "turn": [
        {"number": "1-1", "participant": "User", "utterance": "What was COP26 about?",
         "manual_rewritten_utterance": "What was COP26 about?"},
        {"number": "1-2", "parent": "1-1", "participant": "System", "response": "A climate summit.",
         "provenance": ["MARCO_1-1"]},
        {"number": "1-3", "parent": "1-2", "participant": "User", "utterance": "Effects?",
         "manual_rewritten_utterance": "Effects of climate change?"},
        {"number": "1-4", "parent": "1-3", "participant": "System", "response": "Rising seas."},
        {"number": "2-1", "parent": "1-2", "participant": "User", "utterance": "Tell me more.",
         "manual_rewritten_utterance": "Tell me more about COP26."}
    ]}]"#;

    #[test]
    fn a_2022_tree_is_one_conversation_per_branch_sharing_the_opening_turns() {
        let topics = read(TREE).unwrap();
        assert_eq!(topics.len(), 2);
        let ids = |t: &IkatTopic| {
            t.turns
                .iter()
                .map(|t| t.turn_id.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&topics[0]), ["1-1", "1-3"]);
        assert_eq!(ids(&topics[1]), ["1-1", "2-1"]);
        assert_eq!(topics[1].number, "132");
        // The branch's history carries the response its opening turn got.
        assert_eq!(
            topics[1].turns[0].response.as_deref(),
            Some("A climate summit.")
        );
        assert_eq!(topics[1].turns[0].response_provenance, ["MARCO_1-1"]);
        assert_eq!(topics[0].turns[1].response.as_deref(), Some("Rising seas."));
        assert_eq!(topics[1].turns[1].response, None);
        assert_eq!(
            topics[1].turns[1].resolved_utterance.as_deref(),
            Some("Tell me more about COP26.")
        );
        let keys: Vec<String> = distinct_turns(&topics)
            .map(|(t, i)| t.turn_key(&t.turns[i]))
            .collect();
        assert_eq!(keys, ["132_1-1", "132_1-3", "132_2-1"]);
    }

    #[test]
    fn a_tree_turn_with_an_unknown_parent_names_topic_turn_and_line() {
        let json = TREE.replace(
            r#""parent": "1-2", "participant": "User", "utterance": "Tell"#,
            r#""parent": "9-9", "participant": "User", "utterance": "Tell"#,
        );
        let e = read(&json).unwrap_err().to_string();
        assert!(e.contains("topic 132 turn 2-1: parent 9-9"), "{e}");
        assert!(e.contains("t.json:9"), "{e}");
    }

    #[test]
    fn a_tree_turn_must_say_who_speaks() {
        let json = TREE.replace(
            r#""participant": "System", "response": "Rising"#,
            r#""participant": "Bot", "response": "Rising"#,
        );
        let e = read(&json).unwrap_err().to_string();
        assert!(e.contains("turn 1-4: `participant` must be"), "{e}");
    }

    #[test]
    fn parents_that_form_a_cycle_and_a_system_turn_that_answers_nothing_are_errors() {
        let cycle = r#"[{"number": 140, "turn": [
            {"number": "1-1", "parent": "1-2", "participant": "User", "utterance": "a"},
            {"number": "1-2", "parent": "1-1", "participant": "System", "response": "b"},
            {"number": "1-3", "parent": "1-2", "participant": "User", "utterance": "c"}
        ]}]"#;
        let e = read(cycle).unwrap_err().to_string();
        assert!(
            e.contains("topic 140 turn 1-3: its parents form a cycle"),
            "{e}"
        );
        let stray = r#"[{"number": 141, "turn": [
            {"number": "1-1", "participant": "System", "response": "Hello."},
            {"number": "1-2", "parent": "1-1", "participant": "User", "utterance": "Hi"}
        ]}]"#;
        let e = read(stray).unwrap_err().to_string();
        assert!(
            e.contains("turn 1-1: a System turn must answer a User turn"),
            "{e}"
        );
        assert!(e.contains("t.json:2"), "{e}");
    }

    #[test]
    fn linear_topics_keep_integer_turn_numbers() {
        let topics = read(
            r#"[{"number": 31, "turn": [{"number": 1, "raw_utterance": "a"},
                {"number": 2, "raw_utterance": "b", "manual_rewritten_utterance": "b a"}]}]"#,
        )
        .unwrap();
        assert_eq!(topics.len(), 1);
        assert_eq!(topics[0].turn_key(&topics[0].turns[1]), "31_2");
        assert_eq!(
            topics[0].turns[1].resolved_utterance.as_deref(),
            Some("b a")
        );
    }
}
