//! A bare "Yes, please!" answering the assistant's offer ("… would you like me to give you more
//! information on alternative therapies?"). Manual rewrites spell out what was accepted ("Yes,
//! please tell me about alternative therapies …"); carried-over terms cannot, because the offer
//! is the last thing the answer says, not what the conversation was about. [`resolve`] appends
//! the subject of the offer to the utterance.

use std::sync::LazyLock;

use regex::Regex;

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a valid pattern (unit-tested)")
}

/// An utterance that only accepts: "Yes please!", "Sure.", "Yes, of course, thanks".
static ACCEPTANCE: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)^\s*(?:yes|yeah|yep|sure|ok|okay|definitely|absolutely|of course|please)(?:[\s,.!]*(?:please|sure|of course|thanks|thank you|go ahead|that would be (?:great|nice|helpful)))*[\s.!]*$",
    )
});

/// An offer and its subject: "would you like me to tell you more about X?", "do you want to know
/// about X?", "shall I give you tips on X?".
static OFFER: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)\b(?:would you like|do you want|shall i|should i|can i)\b[^?]*?\b(?:about|on|regarding|for)\s+([^?]{2,120})\?\s*$",
    )
});

/// Most words of an offer's subject kept.
const MAX_SUBJECT_WORDS: usize = 12;

/// The utterance with the subject of the offer in `previous_response` appended, when the
/// utterance only accepts it and the response ends with one.
pub fn resolve(utterance: &str, previous_response: &str) -> Option<String> {
    if !ACCEPTANCE.is_match(utterance) {
        return None;
    }
    // The offer is the response's last question.
    let last_question = previous_response
        .trim_end()
        .rsplit_terminator(['.', '!'])
        .next()?
        .trim();
    let subject = OFFER.captures(last_question)?.get(1)?.as_str();
    let words: Vec<&str> = subject.split_whitespace().take(MAX_SUBJECT_WORDS).collect();
    if words.is_empty() {
        return None;
    }
    Some(format!("{} {}", utterance.trim(), words.join(" ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const IBS: &str = "A doctor can help you with a plan that addresses your needs. However, as you are open to alternative therapies, would you like me to give you more information on alternative therapies?";

    #[test]
    fn an_accepted_offer_names_its_subject() {
        assert_eq!(
            resolve("Yes please!", IBS).as_deref(),
            Some("Yes please! alternative therapies")
        );
        assert_eq!(
            resolve(
                "Sure, thanks.",
                "Do you want to know about hotels near the Spanish Steps?"
            )
            .as_deref(),
            Some("Sure, thanks. hotels near the Spanish Steps")
        );
    }

    #[test]
    fn anything_but_a_bare_acceptance_or_an_offer_is_left_alone() {
        // The utterance says more than yes: the history rewriter handles it.
        assert_eq!(resolve("Yes, and what about the price?", IBS), None);
        assert_eq!(resolve("No thanks.", IBS), None);
        // The response ends without an offer.
        assert_eq!(
            resolve(
                "Yes please!",
                "Alternative therapies include yoga and acupuncture."
            ),
            None
        );
        // The offer is not the response's last sentence.
        assert_eq!(
            resolve(
                "Sure.",
                "Would you like to hear about yoga? It helps many people. Acupuncture is another option."
            ),
            None
        );
        assert_eq!(resolve("Yes.", ""), None);
    }
}
