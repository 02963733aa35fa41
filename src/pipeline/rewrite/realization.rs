//! Realization: writing the chosen history terms into the utterance. Terms are written as the
//! phrases they came in ([`as_phrases`]), a name whole ([`with_whole_names`]), and in place of
//! a possessive ([`possessive_phrase`]) or a pronoun ([`replace_first_pronoun`]) where the
//! utterance has one, as manual rewrites write them; else appended.

use std::collections::HashSet;
use std::sync::LazyLock;

use super::lexicon::{self, alternation};
use super::terms;
use crate::pipeline::context::ConversationContext;

/// `utterance` with the first replaceable pronoun (a whole word, any case) replaced by
/// `replacement`, keeping the surrounding punctuation; `None` when there is none.
pub fn replace_first_pronoun(utterance: &str, replacement: &str) -> Option<String> {
    let mut start = None;
    let mut out = None;
    let bytes: Vec<(usize, char)> = utterance.char_indices().collect();
    for (k, &(i, c)) in bytes.iter().enumerate() {
        let word_char = c.is_alphanumeric();
        if word_char && start.is_none() {
            start = Some(i);
        }
        let end_here = !word_char || k + 1 == bytes.len();
        if let (true, Some(s)) = (end_here, start) {
            let e = if word_char { i + c.len_utf8() } else { i };
            let followed_by_apostrophe = !word_char && c == '\'';
            let word = utterance[s..e].to_lowercase();
            // "this" is a pronoun only where a clause ends ("more about this?"); before a noun
            // it is a determiner ("this day").
            let closing = utterance[e..].starts_with(['?', '.', '!', ',']) || e == utterance.len();
            if !followed_by_apostrophe
                && (lexicon::REPLACEABLE_PRONOUNS.contains(&word.as_str())
                    || (word == "this" && closing))
            {
                out = Some(format!(
                    "{}{}{}",
                    &utterance[..s],
                    replacement,
                    &utterance[e..]
                ));
                break;
            }
            start = None;
        }
    }
    out
}

/// A possessive pronoun and up to four words after it.
static POSSESSIVE: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(&format!(
        r"(?i)\b(?:{})((?: [A-Za-z0-9\-]+){{1,4}})",
        alternation(lexicon::POSSESSIVE_PRONOUNS)
    ))
    .expect("a valid pattern")
});
/// Most content words of the noun phrase after a possessive.
const POSSESSED_WORDS: usize = 3;

/// Most function words in a row inside a copied phrase.
const PHRASE_MAX_GAP: usize = 2;

static WORD: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"[A-Za-z0-9]+").expect("a valid pattern"));

/// The selected history terms (lower-case surfaces, most wanted first) written as the phrases
/// they came in: "interview pastry chef position marzipan" → "interview for a pastry chef
/// position at Marzipan". Runs of selected terms, joined by at most [`PHRASE_MAX_GAP`] function
/// words ([`lexicon::PHRASE_GAP_WORDS`]) and nothing but spaces or hyphens, are copied as
/// written, searching the latest utterances first, then the responses; terms found in no run
/// follow. With `articles`, a phrase keeps the "the" it came with ("the University of Toronto"): for a
/// phrase written in place of a pronoun, not for one appended.
pub fn as_phrases(selected: &[String], ctx: &ConversationContext, articles: bool) -> Vec<String> {
    let wanted: HashSet<&str> = selected.iter().map(String::as_str).collect();
    let mut covered: HashSet<String> = HashSet::new();
    let mut spans: Vec<(usize, String)> = Vec::new();
    let sources = ctx
        .history
        .iter()
        .rev()
        .map(|t| (true, t.utterance.as_str()))
        .chain(
            ctx.history
                .iter()
                .rev()
                .filter_map(|t| t.response.as_deref().map(|r| (false, r))),
        );
    for (is_utterance, src) in sources {
        let words: Vec<regex::Match<'_>> = WORD.find_iter(src).collect();
        let mut i = 0;
        while i < words.len() {
            let w = words[i].as_str().to_lowercase();
            if !wanted.contains(w.as_str()) || covered.contains(&w) {
                i += 1;
                continue;
            }
            let (mut last, mut gap) = (i, 0);
            let mut inside = vec![w];
            for k in i + 1..words.len() {
                let between = &src[words[k - 1].end()..words[k].start()];
                if !between.chars().all(|c| c == ' ' || c == '-') {
                    break;
                }
                let wk = words[k].as_str().to_lowercase();
                if wanted.contains(wk.as_str()) && !covered.contains(&wk) && !inside.contains(&wk) {
                    inside.push(wk);
                    last = k;
                    gap = 0;
                } else if lexicon::PHRASE_GAP_WORDS.contains(&wk.as_str()) && gap < PHRASE_MAX_GAP {
                    gap += 1;
                } else {
                    break;
                }
            }
            let rank = inside
                .iter()
                .filter_map(|t| selected.iter().position(|s| s == t))
                .min()
                .unwrap_or(usize::MAX);
            // The user's "my" stays with what it owns ("my first date"), appended or not.
            let start = match i.checked_sub(1).map(|k| &words[k]) {
                Some(w)
                    if ((articles && w.as_str().eq_ignore_ascii_case("the"))
                        || (is_utterance && w.as_str().eq_ignore_ascii_case("my")))
                        && &src[w.end()..words[i].start()] == " " =>
                {
                    w.start()
                }
                _ => words[i].start(),
            };
            spans.push((rank, src[start..words[last].end()].to_string()));
            covered.extend(inside);
            i = last + 1;
        }
    }
    spans.sort_by_key(|(rank, _)| *rank);
    let mut out: Vec<String> = spans.into_iter().map(|(_, s)| s).collect();
    out.extend(selected.iter().filter(|t| !covered.contains(*t)).cloned());
    out
}

/// A name of several capitalized words ("University of British Columbia", "Souk Waqif").
static NAME: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(&format!(
        r"\b[A-Z][A-Za-z0-9\-]*(?:\s+(?:(?:{})\s+)?[A-Z][A-Za-z0-9\-]*)+",
        alternation(lexicon::NAME_PARTICLES)
    ))
    .expect("a valid pattern")
});

/// The selected history terms (lower-case surfaces) with the rest of the one name each belongs
/// to: "columbia" → also "university", "british" when the history names the "University of
/// British Columbia" and no other name with "columbia". Manual rewrites carry names whole.
/// A name's first word counts only when it is capitalized somewhere other than at a sentence
/// start ("Visit Souk Waqif" names "Souk Waqif").
pub fn with_whole_names(selected: &[String], ctx: &ConversationContext) -> Vec<String> {
    let mut cues = terms::WordCues::default();
    let mut names: Vec<Vec<String>> = Vec::new();
    for text in ctx
        .history
        .iter()
        .flat_map(|t| std::iter::once(t.utterance.as_str()).chain(t.response.as_deref()))
    {
        cues.add(text);
        for m in NAME.find_iter(text) {
            names.push(
                terms::content_terms(m.as_str())
                    .into_iter()
                    .map(|t| t.surface)
                    .collect(),
            );
        }
    }
    for name in &mut names {
        if name.first().is_some_and(|w| !cues.capitalized.contains(w)) {
            name.remove(0);
        }
    }
    names.retain(|n| n.len() >= 2);
    names.sort();
    names.dedup();
    let mut out: Vec<String> = selected.to_vec();
    for term in selected {
        let mut holding = names.iter().filter(|n| n.contains(term));
        if let (Some(name), None) = (holding.next(), holding.next()) {
            for w in name {
                if !out.contains(w) {
                    out.push(w.clone());
                }
            }
        }
    }
    out
}

/// "What is their height and color?" → "What is the height and color of `terms`?": a possessive
/// pronoun before a content word becomes "the W of …", as manual rewrites write it.
pub fn possessive_phrase(utterance: &str, terms: &str) -> Option<String> {
    let c = POSSESSIVE.captures(utterance)?;
    let after = c.get(1)?;
    let words: Vec<&str> = after
        .as_str()
        .split(' ')
        .filter(|w| !w.is_empty())
        .collect();
    let content = |w: &str| !terms::is_stopword(&w.to_lowercase());
    // The noun phrase: the content words right after the pronoun ("its computer science
    // program"), then "and" with one more ("their height and color").
    let mut n = words
        .iter()
        .take_while(|w| content(w))
        .count()
        .min(POSSESSED_WORDS);
    if n == 0 {
        return None;
    }
    if n == 1 && words.get(1) == Some(&"and") && words.get(2).is_some_and(|w| content(w)) {
        n = 3;
    }
    let phrase = words[..n].join(" ");
    // Where the phrase ends in the utterance: after the pronoun and the first n words.
    let mut end = after.start();
    for w in &words[..n] {
        end = utterance[end..].find(w).map(|i| end + i + w.len())?;
    }
    let start = c.get(0)?.start();
    Some(format!(
        "{}the {phrase} of {terms}{}",
        &utterance[..start],
        &utterance[end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::context::with_history as ctx;

    #[test]
    fn pronoun_replacement_keeps_punctuation_and_skips_other_words() {
        assert_eq!(
            replace_first_pronoun("Is it treatable?", "throat cancer").as_deref(),
            Some("Is throat cancer treatable?")
        );
        assert_eq!(
            replace_first_pronoun("What are Its symptoms", "X").as_deref(),
            Some("What are X symptoms")
        );
        assert_eq!(replace_first_pronoun("Italy, item, bit", "X"), None);
        assert_eq!(replace_first_pronoun("it", "X").as_deref(), Some("X"));
        assert_eq!(replace_first_pronoun("", "X"), None);
    }

    #[test]
    fn this_is_replaced_only_where_a_clause_ends() {
        assert_eq!(
            replace_first_pronoun("Can you tell me more about this?", "GIS").as_deref(),
            Some("Can you tell me more about GIS?")
        );
        assert_eq!(
            replace_first_pronoun("What is the significance of this day?", "X"),
            None
        );
    }

    #[test]
    fn possessives_become_the_x_of_the_topic() {
        assert_eq!(
            possessive_phrase("What is their height and color?", "sunflowers").as_deref(),
            Some("What is the height and color of sunflowers?")
        );
        assert_eq!(
            possessive_phrase("What is its price?", "Vespa Primavera").as_deref(),
            Some("What is the price of Vespa Primavera?")
        );
        assert_eq!(
            possessive_phrase(
                "Tell me more about its computer science program.",
                "Toronto"
            )
            .as_deref(),
            Some("Tell me more about the computer science program of Toronto.")
        );
        // "its own": a stopword follows, the pronoun is replaced as before.
        assert_eq!(possessive_phrase("Does it have its own app?", "x"), None);
    }

    #[test]
    fn selected_terms_are_written_as_the_phrases_they_came_in() {
        let c = ctx(
            "Am I ready for it?",
            &["I have an interview for a pastry chef position at Marzipan."],
        );
        let selected: Vec<String> = ["interview", "pastry", "chef", "position", "marzipan"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            as_phrases(&selected, &c, false),
            vec!["interview for a pastry chef position at Marzipan"]
        );
        // Phrases in the order of their best-ranked term, then the terms found in no phrase.
        let selected: Vec<String> = ["budget", "marzipan", "interview"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            as_phrases(&selected, &c, false),
            vec!["Marzipan", "interview", "budget"]
        );
    }

    #[test]
    fn the_users_my_stays_with_what_it_owns() {
        let c = ctx(
            "Can you give me some good clothing options?",
            &["I am looking for tips for going on my first date."],
        );
        let selected: Vec<String> = ["first", "date"].map(String::from).to_vec();
        assert_eq!(as_phrases(&selected, &c, false), vec!["my first date"]);
        // Not from an answer: "my" there is the assistant's.
        let mut c = ctx("And then?", &["Hi"]);
        c.history[0].response = Some("In my first date advice, be yourself.".into());
        assert_eq!(as_phrases(&selected, &c, false), vec!["first date"]);
    }

    #[test]
    fn a_term_of_one_name_brings_the_whole_name() {
        let mut c = ctx(
            "Am I eligible?",
            &["How about the University of British Columbia?"],
        );
        c.history[0].response = Some("Columbia is a strong choice. Visit Souk Waqif.".into());
        let out = with_whole_names(&["columbia".to_string()], &c);
        assert_eq!(out, vec!["columbia", "university", "british"]);
        // "Visit" opens a sentence: not part of the name.
        let out = with_whole_names(&["waqif".to_string()], &c);
        assert_eq!(out, vec!["waqif", "souk"]);
        // A word of two names picks neither.
        c.history[0].utterance =
            "Compare the University of Toronto and Simon Fraser University.".into();
        assert_eq!(
            with_whole_names(&["university".to_string()], &c),
            vec!["university"]
        );
    }
}
