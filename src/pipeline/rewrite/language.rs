//! Whether a conversation is in English, the only language the rewriter's rules and word lists
//! know. Deterministic and cheap: the words of the utterance and the earlier utterances are
//! looked up in the English and Polish stopword lists ([`crate::text::stopwords`]); words that
//! are stopwords in both ("a", "to", "do") say nothing, and a word with a Polish letter (ą, ć,
//! ę, ł, ń, ó, ś, ź, ż) counts as Polish. A conversation is taken for English unless it has
//! more Polish evidence than English: a short English question about "Łódź" stays English, and
//! a conversation without any evidence (names alone) is rewritten as before.

use crate::pipeline::context::ConversationContext;
use crate::text::stopwords;

/// The language the rewriter sees a conversation in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConversationLanguage {
    English,
    /// Any other language: the English rules leave it alone.
    Other,
}

/// Letters of Polish that English words do not have.
const POLISH_LETTERS: &[char] = &['ą', 'ć', 'ę', 'ł', 'ń', 'ó', 'ś', 'ź', 'ż'];

/// (English evidence, other-language evidence) of `text`.
fn evidence(text: &str) -> (usize, usize) {
    let (mut english, mut other) = (0, 0);
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let w = word.to_lowercase();
        let in_english = stopwords::CONVERSATIONAL_ENGLISH.contains(&w.as_str());
        let in_polish = stopwords::POLISH.contains(&w.as_str());
        if in_english && !in_polish {
            english += 1;
        } else if (in_polish && !in_english) || w.contains(POLISH_LETTERS) {
            other += 1;
        }
    }
    (english, other)
}

/// The language of the conversation: its current and earlier utterances (see the module
/// documentation).
pub fn conversation_language(ctx: &ConversationContext) -> ConversationLanguage {
    let (mut english, mut other) = evidence(&ctx.utterance);
    for turn in &ctx.history {
        let (e, o) = evidence(&turn.utterance);
        english += e;
        other += o;
    }
    if other > english {
        ConversationLanguage::Other
    } else {
        ConversationLanguage::English
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::context::with_history as ctx;

    #[test]
    fn polish_conversations_are_told_from_english_ones() {
        use ConversationLanguage::{English, Other};
        let polish = ctx(
            "Czy jest tam dużo turystów?",
            &["Chcę pojechać na wakacje do Zakopanego."],
        );
        assert_eq!(conversation_language(&polish), Other);
        // Without diacritics, by the stopwords alone.
        assert_eq!(
            conversation_language(&ctx("a czy to jest drogie", &[])),
            Other
        );
        assert_eq!(
            conversation_language(&ctx("Is it safe?", &["Tell me about throat cancer."])),
            English
        );
        // Polish names in an English question.
        assert_eq!(
            conversation_language(&ctx(
                "What about Łódź?",
                &["Which Polish cities have a zoo?"]
            )),
            English
        );
        // A Polish name alone follows the conversation; no evidence at all is English.
        assert_eq!(
            conversation_language(&ctx("Kraków?", &["Which Polish cities have a zoo?"])),
            English
        );
        assert_eq!(conversation_language(&ctx("Kraków?", &[])), Other);
        assert_eq!(conversation_language(&ctx("Barcelona?", &[])), English);
        assert_eq!(conversation_language(&ctx("", &[])), English);
    }
}
