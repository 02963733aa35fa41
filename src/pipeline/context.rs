//! The conversation context of one turn: what a stage may read to answer it.
//!
//! Built from an iKAT topic through [`IkatTopic::visible_context`], which encodes the run-type
//! rules: earlier utterances and their canonical responses, the PTKB, and (manual runs only) the
//! manually resolved utterance. The ground-truth `ptkb_provenance` a manual run may see is *not*
//! carried: it is the answer key of PTKB ranking, and convrag's rankings never read it.

use crate::formats::ikat::{IkatTopic, RunType};

/// One PTKB statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtkbStatement {
    pub id: String,
    pub text: String,
}

/// One earlier turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryTurn {
    pub utterance: String,
    /// The canonical (or convrag's own) response of that turn, when the run may use it.
    pub response: Option<String>,
}

/// Everything a stage may read for the current turn.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConversationContext {
    /// The current user utterance as said.
    pub utterance: String,
    /// Earlier turns, oldest first. Never the current turn's response nor later turns.
    pub history: Vec<HistoryTurn>,
    /// The user's PTKB.
    pub ptkb: Vec<PtkbStatement>,
    /// Manual runs: a human rewrite of the current utterance (iKAT `resolved_utterance`).
    pub manual_rewrite: Option<String>,
    /// What the conversation asks of every answer (a chat client's system message); only the
    /// LLM generator reads them.
    pub instructions: Option<String>,
}

impl ConversationContext {
    /// A context without history or PTKB.
    pub fn new(utterance: impl Into<String>) -> Self {
        ConversationContext {
            utterance: utterance.into(),
            ..Default::default()
        }
    }

    /// The context of turn `index` of `topic` under `run_type`'s rules (`None` past the last turn).
    pub fn from_ikat(topic: &IkatTopic, index: usize, run_type: RunType) -> Option<Self> {
        let visible = topic.visible_context(index, run_type)?;
        Some(ConversationContext {
            utterance: visible.utterance.to_string(),
            history: visible
                .history
                .iter()
                .map(|(u, r)| HistoryTurn {
                    utterance: u.to_string(),
                    response: r.map(str::to_string),
                })
                .collect(),
            ptkb: visible
                .ptkb
                .iter()
                .map(|(id, text)| PtkbStatement {
                    id: id.clone(),
                    text: text.clone(),
                })
                .collect(),
            manual_rewrite: visible.resolved_utterance.map(str::to_string),
            instructions: None,
        })
    }

    /// The utterance a manual run works from: the manual rewrite when there is one.
    pub fn effective_utterance(&self) -> &str {
        self.manual_rewrite
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or(&self.utterance)
    }
}

/// A context of `utterance` after earlier turns (utterance, response) with a PTKB of `ptkb`
/// (ids "1", "2", …), for unit tests.
#[cfg(test)]
pub(crate) fn with_turns(
    utterance: &str,
    history: &[(&str, Option<&str>)],
    ptkb: &[&str],
) -> ConversationContext {
    ConversationContext {
        utterance: utterance.into(),
        history: history
            .iter()
            .map(|(u, r)| HistoryTurn {
                utterance: u.to_string(),
                response: r.map(str::to_string),
            })
            .collect(),
        ptkb: ptkb
            .iter()
            .enumerate()
            .map(|(i, t)| PtkbStatement {
                id: (i + 1).to_string(),
                text: t.to_string(),
            })
            .collect(),
        ..Default::default()
    }
}

/// [`with_turns`] after earlier utterances that had no response, for unit tests.
#[cfg(test)]
pub(crate) fn with_ptkb(utterance: &str, history: &[&str], ptkb: &[&str]) -> ConversationContext {
    let history: Vec<(&str, Option<&str>)> = history.iter().map(|u| (*u, None)).collect();
    with_turns(utterance, &history, ptkb)
}

/// [`with_ptkb`] without a PTKB, for unit tests.
#[cfg(test)]
pub(crate) fn with_history(utterance: &str, history: &[&str]) -> ConversationContext {
    with_ptkb(utterance, history, &[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::ikat::IkatTurn;

    fn topic() -> IkatTopic {
        let turn = |id: u32, u: &str| IkatTurn {
            line: 0,
            turn_id: id.to_string(),
            utterance: u.into(),
            resolved_utterance: Some(format!("resolved {u}")),
            response: Some(format!("response {id}")),
            ptkb_provenance: vec!["1".into()],
            response_provenance: vec![],
        };
        IkatTopic {
            line: 1,
            number: "1-1".into(),
            title: "t".into(),
            ptkb: vec![("1".into(), "I am vegan.".into())],
            turns: vec![turn(1, "first"), turn(2, "second"), turn(3, "third")],
        }
    }

    #[test]
    fn automatic_sees_earlier_turns_only_and_no_resolution() {
        let c = ConversationContext::from_ikat(&topic(), 1, RunType::Automatic).unwrap();
        assert_eq!(c.utterance, "second");
        assert_eq!(c.history.len(), 1);
        assert_eq!(c.history[0].response.as_deref(), Some("response 1"));
        assert_eq!(c.manual_rewrite, None);
        assert_eq!(c.effective_utterance(), "second");
    }

    #[test]
    fn manual_sees_the_resolved_utterance() {
        let c = ConversationContext::from_ikat(&topic(), 2, RunType::Manual).unwrap();
        assert_eq!(c.effective_utterance(), "resolved third");
        assert_eq!(c.history.len(), 2);
    }

    #[test]
    fn past_the_last_turn_is_none() {
        assert!(ConversationContext::from_ikat(&topic(), 3, RunType::Automatic).is_none());
    }
}
