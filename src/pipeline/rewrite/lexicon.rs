//! The English words the rewriter's rules look for, each list once. Lists that overlap differ on
//! purpose, and their names say how: [`REFERRING_WORDS`] are never carried into a rewrite,
//! [`RELIABLE_REFERENCES`] (a subset) are the ones that ask for resolution, [`REPLACEABLE_PRONOUNS`]
//! (a smaller subset) are the ones a phrase may be written in place of.
//!
//! Stopwords live with the other stopword lists in [`crate::text::stopwords`]; [`STOPWORDS`] is
//! the one the rewriter uses. Other languages are left alone ([`super::language`]), so every list
//! here is English.

use crate::text::stopwords;

/// Function words and conversational filler that carry no topic.
pub const STOPWORDS: &[&str] = stopwords::CONVERSATIONAL_ENGLISH;

/// Words that point back to something said earlier: never a term carried into another turn,
/// and not counted as the utterance's own content when an LLM rewrite is checked.
pub const REFERRING_WORDS: &[&str] = &[
    "it",
    "its",
    "itself",
    "they",
    "them",
    "their",
    "theirs",
    "this",
    "that",
    "these",
    "those",
    "he",
    "she",
    "him",
    "her",
    "his",
    "hers",
    "one",
    "ones",
    "there",
    "such",
    "aforementioned",
    "mentioned",
    "above",
    "former",
    "latter",
    "same",
    "both",
];

/// The [`REFERRING_WORDS`] that reliably refer back (unlike *this*, *that*, *one*, which are as
/// often determiners or numerals): they trigger resolution.
pub const RELIABLE_REFERENCES: &[&str] = &[
    "it",
    "they",
    "them",
    "its",
    "their",
    "those",
    "these",
    "aforementioned",
    "mentioned",
    "he",
    "she",
    "him",
    "his",
    "her",
    "former",
    "latter",
];

/// Pronouns the carried-over terms may be written in place of ("Is it safe?" → "Is X safe?").
/// *this* only where a clause ends (see `realization::replace_first_pronoun`).
pub const REPLACEABLE_PRONOUNS: &[&str] = &["it", "they", "them", "its", "their"];

/// Possessive pronouns before a noun phrase: "its price" is written "the price of X".
pub const POSSESSIVE_PRONOUNS: &[&str] = &["its", "their"];

/// Words by which the user speaks of themself.
pub const FIRST_PERSON: &[&str] = &["i", "me", "my", "mine", "myself"];

/// Words by which an utterance asks for advice or a choice, where what suits the user matters
/// ("Which laptop *should* I buy?", "*Recommend* a film"), unlike a question of general knowledge.
pub const REQUEST_WORDS: &[&str] = &[
    "recommend",
    "recommends",
    "recommended",
    "recommendation",
    "recommendations",
    "suggest",
    "suggests",
    "suggested",
    "suggestion",
    "suggestions",
    "should",
    "advice",
    "advise",
    "help",
    "idea",
    "ideas",
    "best",
    "good",
    "better",
    "suitable",
    "suit",
    "suits",
    "fit",
    "fits",
    "prefer",
    "preferred",
    "preference",
    "preferences",
    "option",
    "options",
    "which",
];

/// Words by which a PTKB statement relates the user to what it is about ("I *run* PostgreSQL",
/// "I *live* in Lisbon"): content words, but they say nothing about the thing, so they never
/// enter a query from the PTKB. Surface forms: "running" or "runner" may be the topic.
pub const PTKB_FRAME_WORDS: &[&str] = &[
    "run",
    "runs",
    "use",
    "uses",
    "using",
    "like",
    "likes",
    "love",
    "loves",
    "enjoy",
    "enjoys",
    "prefer",
    "prefers",
    "want",
    "wants",
    "need",
    "needs",
    "have",
    "has",
    "own",
    "owns",
    "work",
    "works",
    "live",
    "lives",
    "currently",
    "usually",
    "really",
    "recently",
    "just",
    "get",
    "gets",
    "got",
    "plan",
    "plans",
    "planning",
    "try",
    "trying",
    "started",
    "keep",
];

/// Words by which a reply addresses the user.
pub const SECOND_PERSON: &[&str] = &["you", "your", "yours", "yourself"];

/// Words that manage the conversation rather than say what it is about: greetings, thanks,
/// reactions ("Hello! …", "Wow, that sounds intriguing!", "Thanks for that suggestion").
pub const DIALOGUE: &[&str] = &[
    "hello",
    "hi",
    "hey",
    "thanks",
    "thank",
    "sorry",
    "please",
    "wow",
    "ok",
    "okay",
    "yes",
    "yeah",
    "sure",
    "great",
    "awesome",
    "cool",
    "nice",
    "excited",
    "intriguing",
    "interesting",
    "helpful",
    "valuable",
    "curious",
    "wondering",
    "sounds",
    "really",
    "potentially",
    "meant",
    "guidance",
    "suggestion",
    "suggestions",
    "appreciate",
];

/// Openings of a model's reply that talks back to the user instead of rewriting the question.
/// Phrases, not words, unlike [`DIALOGUE`]: "sure" opens an answer, "thanks" never does.
pub const TALKING_BACK: &[&str] = &[
    "sorry",
    "i'm sorry",
    "i am sorry",
    "as an ai",
    "i cannot",
    "i can't",
    "could you",
    "can you clarify",
    "please provide",
    "please clarify",
    "what do you mean",
    "sure",
    "certainly",
];

/// Labels models put before the query although told not to.
pub const REPLY_LABELS: &[&str] = &[
    "rewritten question",
    "rewritten query",
    "rewritten utterance",
    "rewrite",
    "query",
    "search query",
    "question",
];

/// Words after which a noun phrase starts.
pub const DETERMINERS: &[&str] = &[
    "the", "a", "an", "my", "your", "our", "their", "its", "of", "about", "for", "in", "on",
    "with", "from", "at", "some", "any", "these", "those", "this", "that",
];

/// Function words a phrase copied from the history may keep between two selected terms
/// ("interview for a job at the bakery").
pub const PHRASE_GAP_WORDS: &[&str] = &[
    "of", "for", "at", "in", "the", "and", "on", "to", "with", "from", "a", "an",
];

/// Lower-case words inside a name or a list item although they are stopwords ("Bank of
/// America", "Lago di Garda").
pub const NAME_PARTICLES: &[&str] = &["of", "de", "di"];

/// Capitalized words that name a time, not a place ("going to Rome in December").
pub const MONTHS_AND_DAYS: &[&str] = &[
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Nouns that may name the items of any list ("which ones", "the last two options"), plural
/// first. Not "place": "in the first place" is an idiom.
pub const LIST_ITEM_NOUNS: &[&str] = &[
    "ones",
    "one",
    "options",
    "option",
    "types",
    "type",
    "items",
    "item",
    "choices",
    "choice",
    "suggestions",
    "suggestion",
];

/// Nouns that name the items of a numbered list only ("the third step"): a comma list in prose
/// is rarely a sequence of steps. Plural first.
pub const STEP_NOUNS: &[&str] = &[
    "steps",
    "step",
    "tips",
    "tip",
    "points",
    "point",
    "ways",
    "way",
    "methods",
    "method",
    "ideas",
    "idea",
    "stages",
    "stage",
    "factors",
    "factor",
    "recommendations",
    "recommendation",
    "strategies",
    "strategy",
    "approaches",
    "approach",
    "techniques",
    "technique",
];

/// Nouns by which "the other …" names the items of a list the utterance does not name ("the
/// other options", "the other places").
pub const OTHER_ITEM_NOUNS: &[&str] = &[
    "ones",
    "options",
    "choices",
    "items",
    "suggestions",
    "places",
];

/// Nouns before the number of an item of a numbered list ("step 3", "option 2").
pub const NUMBERED_ITEM_NOUNS: &[&str] = &["number", "step", "option", "item", "point", "tip"];

/// Ordinal words and the list position they pick (-1: the last item).
pub const ORDINALS: &[(&str, isize)] = &[
    ("first", 0),
    ("second", 1),
    ("third", 2),
    ("fourth", 3),
    ("fifth", 4),
    ("sixth", 5),
    ("seventh", 6),
    ("last", -1),
];

/// `words` as a regex alternation (`a|b|c`), for patterns built from these lists.
pub fn alternation(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| regex::escape(w))
        .collect::<Vec<_>>()
        .join("|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_narrower_reference_lists_are_subsets_of_the_broader_ones() {
        for w in RELIABLE_REFERENCES {
            assert!(REFERRING_WORDS.contains(w), "{w}");
        }
        for w in REPLACEABLE_PRONOUNS.iter().chain(POSSESSIVE_PRONOUNS) {
            assert!(RELIABLE_REFERENCES.contains(w), "{w}");
        }
    }

    #[test]
    fn every_list_is_lower_case_and_free_of_duplicates() {
        for list in [
            REFERRING_WORDS,
            RELIABLE_REFERENCES,
            REPLACEABLE_PRONOUNS,
            FIRST_PERSON,
            REQUEST_WORDS,
            SECOND_PERSON,
            DIALOGUE,
            TALKING_BACK,
            REPLY_LABELS,
            DETERMINERS,
            PHRASE_GAP_WORDS,
            NAME_PARTICLES,
            LIST_ITEM_NOUNS,
            STEP_NOUNS,
            OTHER_ITEM_NOUNS,
            NUMBERED_ITEM_NOUNS,
        ] {
            let mut seen = std::collections::HashSet::new();
            for w in list {
                assert_eq!(w.to_lowercase(), *w);
                assert!(seen.insert(w), "{w} twice");
            }
        }
    }

    #[test]
    fn alternation_escapes_and_joins() {
        assert_eq!(alternation(&["its", "their"]), "its|their");
        assert_eq!(alternation(&["e.g."]), r"e\.g\.");
    }
}
