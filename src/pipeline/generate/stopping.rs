//! Where the extractive answer stops: the marginal-relevance threshold below which the next
//! sentence is left out ([`ExtractiveConfig::min_marginal`]), fitted offline by
//! `convrag tune extractive` (`crate::tune::answers`), and whether sentences come with their context.

use serde::{Deserialize, Serialize};

#[cfg(test)]
use super::ExtractiveConfig;

/// The committed stopping rule (`src/pipeline/weights/extractive_stop.json`), the output of the
/// command in `src/cli/tune.rs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopRule {
    /// Stop before a sentence whose marginal relevance is below this; `None` fills the limit.
    pub min_marginal: Option<f64>,
    /// Whether sentences come with their context ([`ExtractiveConfig::keep_context`]); chosen
    /// by the same cross-validation.
    #[serde(default)]
    pub keep_context: bool,
    /// What the cross-validation maximized, and on how many turns (documentation only).
    pub objective: String,
    pub training_turns: usize,
}

impl StopRule {
    pub fn committed() -> StopRule {
        serde_json::from_str(include_str!("../weights/extractive_stop.json"))
            .expect("the committed extractive_stop.json parses (unit-tested)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_rule_parses() {
        let rule = StopRule::committed();
        assert_eq!(rule.objective, "rouge1_f1");
        assert_eq!(
            ExtractiveConfig::default().min_marginal,
            rule.min_marginal,
            "the default is the committed rule"
        );
        assert_eq!(ExtractiveConfig::default().keep_context, rule.keep_context);
    }
}
