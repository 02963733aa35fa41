//! The place a conversation is set in: manual rewrites keep the place the user named
//! ("restaurants in Doha", "hotels in Rome") although the utterance no longer says it.

use std::sync::LazyLock;

use super::{lexicon, terms};
use crate::pipeline::context::ConversationContext;

/// A place the user said they are in or going to: "I am going to Rome", "visiting Doha",
/// "restaurants in Kansas City" (capitalized, up to three words; not a month or a day).
static PLACE: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        r"(?:\bin|\bgoing to|\btravell?ing to|\btrip to|\bvisit|\bvisiting|\bflying to|\bmoving to)\s+([A-Z][a-z]+(?:\s+[A-Z][a-z]+){0,2})",
    )
    .expect("a valid pattern")
});

/// The place the conversation is set in: the last one the user's earlier utterances named
/// (responses name many places the user never chose).
pub fn conversation_place(ctx: &ConversationContext) -> Option<String> {
    ctx.history
        .iter()
        .flat_map(|t| PLACE.captures_iter(&t.utterance))
        .filter_map(|c| c.get(1))
        .map(|m| m.as_str())
        .filter(|p| !lexicon::MONTHS_AND_DAYS.iter().any(|n| p.starts_with(n)))
        .last()
        .map(str::to_string)
}

/// `text` set in `place`: "in {place}" where the text already carries the place's name, else
/// appended; `None` when the utterance names it itself.
pub fn in_place(utterance: &str, text: &str, place: &str) -> Option<String> {
    let named = |t: &str| {
        let words = terms::words(t).join(" ");
        format!(" {words} ").contains(&format!(" {} ", place.to_lowercase()))
    };
    if named(utterance) {
        return None;
    }
    if let Some(i) = text.find(place) {
        let before = &text[..i];
        let whole = !before.ends_with(|c: char| c.is_alphanumeric())
            && !text[i + place.len()..].starts_with(|c: char| c.is_alphanumeric());
        if whole {
            // Already "in Rome"; or the place opens a sentence of the rewritten utterance, where
            // it begins a phrase standing in for a pronoun ("Doha Souk Waqif sounds
            // wonderful"), not a location to mark.
            let appended = text.starts_with(utterance) && i >= utterance.len();
            let opens = !appended
                && (before.trim_end().is_empty() || before.trim_end().ends_with(['.', '!', '?']));
            if before.to_lowercase().ends_with("in ") || opens {
                return None;
            }
            return Some(format!("{before}in {}", &text[i..]));
        }
    }
    Some(format!("{text} in {place}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::context::with_history as ctx;
    use crate::pipeline::rewrite::{HistoryRewriter, Rewriter};

    #[test]
    fn the_place_the_user_named_is_kept() {
        let c = ctx(
            "Any with breakfast?",
            &[
                "I am going to Rome in December and need a hotel.",
                "Something near the Spanish Steps, please.",
            ],
        );
        // The last place an utterance named; months are not places.
        assert_eq!(conversation_place(&c).as_deref(), Some("Rome"));
        assert_eq!(
            in_place("Any with breakfast?", "Any with breakfast? hotel", "Rome").as_deref(),
            Some("Any with breakfast? hotel in Rome")
        );
        // Already carried: "in" is written before it, once.
        assert_eq!(
            in_place(
                "Any with breakfast?",
                "Any with breakfast? Rome hotel",
                "Rome"
            )
            .as_deref(),
            Some("Any with breakfast? in Rome hotel")
        );
        assert_eq!(in_place("Any?", "Any? hotel in Rome", "Rome"), None);
        // A phrase standing in for a pronoun at a sentence start is not marked as a location.
        assert_eq!(
            in_place(
                "It sounds wonderful. Any shops?",
                "Doha Souk Waqif sounds wonderful. Any shops?",
                "Doha"
            ),
            None
        );
        assert_eq!(
            in_place("Thanks! It is open?", "Thanks! Doha Souk is open?", "Doha"),
            None
        );
        // The utterance names it itself, or names a longer word that contains it.
        assert_eq!(in_place("Hotels in Rome?", "Hotels in Rome?", "Rome"), None);
        assert_eq!(
            in_place("Any with a view?", "Any with a view? Romero", "Rome").as_deref(),
            Some("Any with a view? Romero in Rome")
        );
        let r = HistoryRewriter::default().rewrite(&c, &[]).unwrap();
        assert!(r.text.contains(" in Rome"), "{}", r.text);
        assert_eq!(r.text.matches("Rome").count(), 1, "{}", r.text);
        assert!(r.terms.iter().any(|(t, _)| t == "rome"), "{:?}", r.terms);
        // Nothing named: nothing added.
        assert_eq!(
            conversation_place(&ctx("Is it safe?", &["What is a VPN?"])),
            None
        );
    }
}
