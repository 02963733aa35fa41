//! Stage 2: query rewriting without an LLM.
//!
//! A [`Rewriter`] turns the current utterance into a self-contained query from the conversation
//! context (earlier utterances and, for automatic runs, earlier canonical responses; never a
//! reference rewrite nor anything of later turns) and the selected PTKB statements.
//!
//! [`HistoryRewriter`] (the default) keeps the utterance as said and appends a few context terms:
//! 1. Candidates are the content terms (stopwords removed, Porter stems for matching) of earlier
//!    utterances that the utterance does not already contain. A candidate's weight is the sum,
//!    over the earlier turns it occurs in, of `decay^(distance-1)` (the previous turn has
//!    distance 1), with the first utterance, which usually states the topic of the conversation,
//!    weighted at least `first`. Terms repeated through the conversation are its topic; terms
//!    of the last turns are what pronouns and ellipsis most likely point to.
//! 2. Earlier canonical responses (default `response` 0.3) add `response` × the decayed weight to candidates that already
//!    come from utterances (a response confirms a term, it never introduces one: responses are
//!    long and would drown the query).
//! 3. By default ([`TermSelection::Learned`]) a logistic model over each candidate's features
//!    ([`TERM_FEATURES`]; candidates then include terms of earlier responses) keeps the
//!    candidates whose probability of appearing in a manual rewrite is at least the tuned
//!    threshold, at most `max_terms` of them, then up to `answer_terms` more that only earlier
//!    answers said ([`TermSelector`], fitted by `convrag tune rewrite` on training topics only,
//!    the setting chosen by cross-validated ROUGE-1 F2). A term of a
//!    multi-word name brings the rest of the name ("University of British Columbia"). With [`TermSelection::Decayed`]:
//!    the budget is `base_terms`, plus `anaphora_terms` when the utterance refers back (a pronoun
//!    such as *it*, *they*, *those*) or has fewer than three content terms (ellipsis: "What about
//!    the DASH diet?"). The best candidates within the budget are appended in conversation order,
//!    in the surface form last used.
//! 4. Up to `ptkb_terms` content terms of the selected PTKB statements are appended, best
//!    statement first (default 0: the manual rewrites rarely spell the persona out, and appended
//!    statement words cost ROUGE-1 F1 0.025 per term on iKAT 2023), or `ptkb_terms_first_person`
//!    (chosen by `convrag tune rewrite`; 0 on the committed training data) when the utterance
//!    speaks of the user (*I*, *my*, ...); up to
//!    `ptkb_query_terms` of them go into the weighted retrieval terms only.
//!
//! The rewrite also carries weighted stems for retrieval: the utterance's at 1, context terms at
//! `context_weight` × their normalized weight, PTKB terms at `ptkb_weight`.
//!
//! [`ManualRewriter`] uses a supplied rewrite (iKAT `resolved_utterance` in manual runs) and falls
//! back to another rewriter when there is none.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use serde::Serialize;

use super::context::ConversationContext;
use super::learned::LogisticModel;
use super::Result;
use super::{accepted_offer, list_references, terms};

/// A rewritten query.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rewrite {
    pub text: String,
    /// Weighted Porter stems for retrieval, utterance terms first.
    pub terms: Vec<(String, f32)>,
    /// Which method produced it.
    pub method: RewriteMethod,
}

/// Which method wrote a turn's query (stored in the turn's diagnostics as its snake_case name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RewriteMethod {
    /// History-aware term carry-over ([`HistoryRewriter`]).
    History,
    /// A rewrite supplied with the turn.
    Manual,
    /// The chat model's rewrite (`prompts/rewrite.*.md`).
    Llm,
}

impl RewriteMethod {
    /// The name stored and shown (`history`, `manual`, `llm`).
    pub fn as_str(self) -> &'static str {
        match self {
            RewriteMethod::History => "history",
            RewriteMethod::Manual => "manual",
            RewriteMethod::Llm => "llm",
        }
    }
}

/// Rewrites the current utterance into a self-contained query.
pub trait Rewriter: Send + Sync {
    /// `selected_ptkb`: texts of the selected PTKB statements, best first.
    fn rewrite(&self, ctx: &ConversationContext, selected_ptkb: &[&str]) -> Result<Rewrite>;
}

/// The history-aware rewriter (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistoryRewriter {
    pub base_terms: usize,
    pub anaphora_terms: usize,
    pub decay: f32,
    pub first: f32,
    pub response: f32,
    /// Content terms of the selected statements written into the rewrite text.
    pub ptkb_terms: usize,
    /// As `ptkb_terms`, but only when the utterance speaks of the user (*I*, *me*, *my*,
    /// *mine*, *myself*): "what should I cook?" is about the person the PTKB describes.
    pub ptkb_terms_first_person: usize,
    /// Content terms of the selected statements added to the weighted retrieval terms only
    /// (at least `ptkb_terms`): personalization without changing the text a human reads.
    pub ptkb_query_terms: usize,
    pub context_weight: f32,
    pub ptkb_weight: f32,
    /// Utterances with fewer content terms than this count as elliptic.
    pub short_below: usize,
    /// Write the context terms in place of the first pronoun (*it*, *they*, *them*, *its*,
    /// *their*) instead of appending them.
    pub replace_pronoun: bool,
    /// How the context terms are chosen.
    pub selection: TermSelection,
}

/// How [`HistoryRewriter`] chooses the history terms it carries into the rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermSelection {
    /// The `decay`/`first`/`response` weight with the `base_terms`/`anaphora_terms` budget.
    Decayed,
    /// The learned [`TermSelector`] committed in `src/pipeline/weights/rewrite_terms.json`
    /// (written by `convrag tune rewrite` from training topics only).
    Learned,
}

/// Names of the features of a history term, in [`TermCandidate::features`] order.
pub const TERM_FEATURES: &[&str] = &[
    "decayed_weight",
    "inverse_distance",
    "in_first_utterance",
    "in_previous_utterance",
    "utterance_share",
    "in_previous_response",
    "response_only",
    "response_inverse_distance",
    "response_share",
    "response_occurrences",
    "term_length",
    "numeric",
    "refers_back",
    "elliptic",
    "refers_back_x_previous",
    "refers_back_x_first",
    "history_turns",
    "first_person",
    "relative_position",
    "capitalized",
    "acronym",
    "in_previous_response_opening",
    "after_determiner",
    "verb_like_suffix",
    "answer_only_x_capitalized",
    "answer_only_x_refers_back",
    "previous_response_x_elliptic",
    "opening_x_refers_back",
];

/// A learned choice of history terms: the terms whose probability of appearing in a manual
/// rewrite is at least `threshold`, at most `max_terms` of them, most probable first, then up
/// to `answer_terms` more that only earlier answers said.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct TermSelector {
    pub model: LogisticModel,
    pub threshold: f64,
    pub max_terms: usize,
    /// Slots beyond `max_terms` for words of earlier answers: the words a rewrite most often
    /// lacks in conversations with answers (iKAT 2023, CAsT 2022; BENCHMARKS.md "Rewriting:
    /// CAsT 2022 as training data; slots for answer words").
    pub answer_terms: usize,
    /// [`HistoryRewriter::ptkb_terms_first_person`], chosen with the selector.
    pub ptkb_terms_first_person: usize,
}

impl TermSelector {
    /// Each candidate with its probability under the model, most probable first (ties keep
    /// the candidates' order).
    pub fn score(&self, candidates: Vec<TermCandidate>) -> Vec<(f64, TermCandidate)> {
        let mut scored: Vec<(f64, TermCandidate)> = candidates
            .into_iter()
            .map(|c| (self.model.probability(&c.features), c))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored
    }

    /// The terms to add, from candidates as [`Self::score`] orders them, in conversation order:
    /// those at or above the threshold, at most `max_terms`, then up to `answer_terms` of the
    /// rest that only answers said. A chosen term's weight is its probability.
    pub fn choose(&self, scored: &[(f64, TermCandidate)]) -> Vec<TermCandidate> {
        let mut out: Vec<TermCandidate> = Vec::new();
        let mut answer_slots = self.answer_terms;
        for (p, c) in scored.iter().take_while(|(p, _)| *p >= self.threshold) {
            let take = if out.len() < self.max_terms {
                true
            } else if answer_slots == 0 {
                break;
            } else if c.response_only {
                answer_slots -= 1;
                true
            } else {
                false
            };
            if take {
                out.push(TermCandidate {
                    weight: *p as f32,
                    ..c.clone()
                });
            }
        }
        out.sort_by_key(|c| c.at);
        out
    }
}

static LEARNED_SELECTOR: LazyLock<TermSelector> = LazyLock::new(|| {
    let selector: TermSelector = serde_json::from_str(include_str!("weights/rewrite_terms.json"))
        .expect("the committed rewrite_terms.json parses (unit-tested)");
    selector
        .model
        .check_features(TERM_FEATURES)
        .expect("the committed rewrite_terms.json matches TERM_FEATURES (unit-tested)");
    selector
});

/// The committed learned term selector.
pub fn learned_term_selector() -> &'static TermSelector {
    &LEARNED_SELECTOR
}

/// One history term the rewrite may carry, with its features.
#[derive(Debug, Clone)]
pub struct TermCandidate {
    pub surface: String,
    pub stem: String,
    /// The `decay`/`first`/`response` weight ([`TermSelection::Decayed`]).
    pub weight: f32,
    /// (turn index, position) of the last occurrence: the output order.
    pub at: (usize, usize),
    /// Said only in responses, never by the user.
    pub response_only: bool,
    pub features: Vec<f64>,
}

/// Words that reliably refer back (unlike *this*, *that*, *one*, which are as often determiners
/// or numerals): they trigger resolution.
const TRIGGERS: &[&str] = &[
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

/// Words by which the user speaks of themself.
const FIRST_PERSON: &[&str] = &["i", "me", "my", "mine", "myself"];

/// Pronouns the context terms may stand in for.
const REPLACEABLE: &[&str] = &["it", "they", "them", "its", "their"];

/// `utterance` with the first replaceable pronoun (a whole word, any case) replaced by
/// `replacement`, keeping the surrounding punctuation; `None` when there is none.
fn replace_first_pronoun(utterance: &str, replacement: &str) -> Option<String> {
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
                && (REPLACEABLE.contains(&word.as_str()) || (word == "this" && closing))
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
    regex::Regex::new(r"(?i)\b(?:its|their)((?: [A-Za-z0-9\-]+){1,4})").expect("a valid pattern")
});
/// Most content words of the noun phrase after a possessive.
const POSSESSED_WORDS: usize = 3;

/// Function words a phrase copied from the history may keep between two selected terms.
const PHRASE_GAP_WORDS: &[&str] = &[
    "of", "for", "at", "in", "the", "and", "on", "to", "with", "from", "a", "an",
];
/// Most function words in a row inside a copied phrase.
const PHRASE_MAX_GAP: usize = 2;

static WORD: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"[A-Za-z0-9]+").expect("a valid pattern"));

/// The selected history terms (lower-case surfaces, most wanted first) written as the phrases
/// they came in: "interview software engineering position google" → "interview for a software
/// engineering position at Google". Runs of selected terms, joined by at most
/// [`PHRASE_MAX_GAP`] function words and nothing but spaces or hyphens, are copied as written,
/// searching the latest utterances first, then the responses; terms found in no run follow.
/// Chosen on iKAT 2023 train (BENCHMARKS.md "Rewriting: references to the previous answer").
/// With `articles`, a phrase keeps the "the" it came with ("the University of Toronto"): for a
/// phrase written in place of a pronoun, not for one appended.
fn as_phrases(selected: &[String], ctx: &ConversationContext, articles: bool) -> Vec<String> {
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
                } else if PHRASE_GAP_WORDS.contains(&wk.as_str()) && gap < PHRASE_MAX_GAP {
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
    regex::Regex::new(r"\b[A-Z][A-Za-z0-9\-]*(?:\s+(?:of\s+|de\s+|di\s+)?[A-Z][A-Za-z0-9\-]*)+")
        .expect("a valid pattern")
});

/// The selected history terms (lower-case surfaces) with the rest of the one name each belongs
/// to: "columbia" → also "university", "british" when the history names the "University of
/// British Columbia" and no other name with "columbia". Manual rewrites carry names whole.
/// A name's first word counts only when it is capitalized somewhere other than at a sentence
/// start ("Visit Souk Waqif" names "Souk Waqif"). Chosen on iKAT 2023 train and CAsT 2019
/// (BENCHMARKS.md "Rewriting: whole names").
fn with_whole_names(selected: &[String], ctx: &ConversationContext) -> Vec<String> {
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

/// "What is their size and type?" → "What is the size and type of `terms`?": a possessive
/// pronoun before a content word becomes "the W of …", as manual rewrites write it (chosen on
/// iKAT 2023 train; BENCHMARKS.md "Rewriting: references to the previous answer").
fn possessive_phrase(utterance: &str, terms: &str) -> Option<String> {
    let c = POSSESSIVE.captures(utterance)?;
    let after = c.get(1)?;
    let words: Vec<&str> = after
        .as_str()
        .split(' ')
        .filter(|w| !w.is_empty())
        .collect();
    let content = |w: &str| !terms::is_stopword(&w.to_lowercase());
    // The noun phrase: the content words right after the pronoun ("its computer science
    // program"), then "and" with one more ("their size and type").
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

/// A place the user said they are in or going to: "I am going to Rome", "visiting Doha",
/// "restaurants in Kansas City" (capitalized, up to three words; not a month or a day).
static PLACE: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        r"(?:\bin|\bgoing to|\btravell?ing to|\btrip to|\bvisit|\bvisiting|\bflying to|\bmoving to)\s+([A-Z][a-z]+(?:\s+[A-Z][a-z]+){0,2})",
    )
    .expect("a valid pattern")
});
const NOT_PLACES: &[&str] = &[
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

/// The place the conversation is set in: the last one the user's earlier utterances named
/// (responses name many places the user never chose). Manual rewrites keep it ("restaurants in
/// Doha", "hotels in Rome"; chosen on iKAT 2023 train, BENCHMARKS.md "Rewriting: the place").
fn conversation_place(ctx: &ConversationContext) -> Option<String> {
    ctx.history
        .iter()
        .flat_map(|t| PLACE.captures_iter(&t.utterance))
        .filter_map(|c| c.get(1))
        .map(|m| m.as_str())
        .filter(|p| !NOT_PLACES.iter().any(|n| p.starts_with(n)))
        .last()
        .map(str::to_string)
}

/// `text` set in `place`: "in {place}" where the text already carries the place's name, else
/// appended; `None` when the utterance names it itself.
fn in_place(utterance: &str, text: &str, place: &str) -> Option<String> {
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

impl Default for HistoryRewriter {
    /// Measured on iKAT 2023 and CAsT 2019/2020 (ROUGE-1 F1 against the manual rewrites).
    fn default() -> Self {
        HistoryRewriter {
            base_terms: 0,
            anaphora_terms: 3,
            decay: 0.5,
            first: 0.6,
            response: 0.3,
            ptkb_terms: 0,
            // Chosen by `convrag tune rewrite` on training topics (cross-validated).
            ptkb_terms_first_person: learned_term_selector().ptkb_terms_first_person,
            ptkb_query_terms: 6,
            context_weight: 0.5,
            ptkb_weight: 0.3,
            short_below: 0,
            replace_pronoun: true,
            selection: TermSelection::Learned,
        }
    }
}

/// Endings of verbs and adverbs ("experiencing", "related", "usually"), which rewrites rarely
/// carry, unlike the nouns around them.
fn verb_like(word: &str) -> bool {
    word.len() > 5 && (word.ends_with("ing") || word.ends_with("ed") || word.ends_with("ly"))
}

/// Positions of terms of a response come after those of the same turn's utterance.
const RESPONSE_POSITION: usize = 1 << 20;

impl HistoryRewriter {
    /// Every history term the utterance does not already contain (`have`: its stems), with
    /// features. Terms of earlier utterances, and, with `response` > 0, of the previous response.
    pub fn term_candidates(
        &self,
        ctx: &ConversationContext,
        have: &HashSet<String>,
    ) -> Vec<TermCandidate> {
        let n = ctx.history.len();
        let mut cands: HashMap<String, TermCandidate> = HashMap::new();
        // stem -> (turns containing it, last turn index, relative position there)
        let mut seen: HashMap<String, (usize, usize, f64)> = HashMap::new();
        for (i, turn) in ctx.history.iter().enumerate() {
            let mut w = self.decay.powi((n - i) as i32 - 1);
            if i == 0 {
                w = w.max(self.first);
            }
            let mut seen_here = HashSet::new();
            let terms_here = terms::content_terms(&turn.utterance);
            let len = terms_here.len().max(1) as f64;
            for (pos, t) in terms_here.into_iter().enumerate() {
                if have.contains(&t.stem)
                    || terms::is_anaphor(&t.surface)
                    || terms::is_dialogue_word(&t.surface)
                {
                    continue;
                }
                let first_time_in_turn = seen_here.insert(t.stem.clone());
                let c = cands
                    .entry(t.stem.clone())
                    .or_insert_with(|| TermCandidate {
                        surface: String::new(),
                        stem: t.stem.clone(),
                        weight: 0.0,
                        at: (0, 0),
                        response_only: false,
                        features: Vec::new(),
                    });
                let s = seen.entry(t.stem).or_insert((0, 0, 0.0));
                if first_time_in_turn {
                    c.weight += w;
                    s.0 += 1;
                }
                s.1 = i;
                s.2 = pos as f64 / len;
                c.surface = t.surface;
                c.at = (i, pos);
            }
        }
        // stem -> (responses containing it, last response index, occurrences in responses)
        let mut in_responses: HashMap<String, (usize, usize, usize)> = HashMap::new();
        if self.response > 0.0 {
            for (i, turn) in ctx.history.iter().enumerate() {
                let Some(r) = &turn.response else { continue };
                let w = self.response * self.decay.powi((n - i) as i32 - 1);
                let mut seen_here = HashSet::new();
                for (pos, t) in terms::content_terms(r).into_iter().enumerate() {
                    if have.contains(&t.stem)
                        || terms::is_anaphor(&t.surface)
                        || terms::is_dialogue_word(&t.surface)
                    {
                        continue;
                    }
                    let first_time_in_turn = seen_here.insert(t.stem.clone());
                    let e = in_responses.entry(t.stem.clone()).or_insert((0, 0, 0));
                    e.2 += 1;
                    e.1 = i;
                    if first_time_in_turn {
                        e.0 += 1;
                    }
                    match cands.get_mut(&t.stem) {
                        // A response confirms a term of the utterances (decayed weights).
                        Some(c) if first_time_in_turn && seen.contains_key(&t.stem) => {
                            c.weight += w
                        }
                        Some(c) if !seen.contains_key(&t.stem) => {
                            c.surface = t.surface;
                            c.at = (i, RESPONSE_POSITION + pos);
                        }
                        Some(_) => {}
                        None => {
                            cands.insert(
                                t.stem.clone(),
                                TermCandidate {
                                    surface: t.surface,
                                    stem: t.stem,
                                    weight: 0.0,
                                    at: (i, RESPONSE_POSITION + pos),
                                    response_only: false,
                                    features: Vec::new(),
                                },
                            );
                        }
                    }
                }
            }
        }
        let words = terms::words(&ctx.utterance);
        let refers_back = words.iter().any(|w| TRIGGERS.contains(&w.as_str()));
        let first_person = words.iter().any(|w| FIRST_PERSON.contains(&w.as_str()));
        let elliptic = 1.0 / (1.0 + have.len() as f64);
        let first_stems: HashSet<String> = ctx
            .history
            .first()
            .map(|t| terms::content_stems(&t.utterance).into_iter().collect())
            .unwrap_or_default();
        let previous_stems: HashSet<String> = ctx
            .history
            .last()
            .map(|t| terms::content_stems(&t.utterance).into_iter().collect())
            .unwrap_or_default();
        let mut written = terms::WordCues::default();
        for t in &ctx.history {
            written.add(&t.utterance);
            if let Some(r) = &t.response {
                written.add(r);
            }
        }
        // The previous answer's first sentence names what it is about.
        let opening_stems: HashSet<String> = ctx
            .history
            .last()
            .and_then(|t| t.response.as_deref())
            .map(|r| {
                crate::text::sentences::split_sentences(r)
                    .first()
                    .map(|s| terms::content_stems(s).into_iter().collect())
                    .unwrap_or_default()
            })
            .unwrap_or_default();
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        let mut v: Vec<TermCandidate> = cands.into_values().collect();
        for c in &mut v {
            let (turns, last, rel) = seen.get(&c.stem).copied().unwrap_or((0, 0, 0.0));
            let response_only = turns == 0;
            let (r_turns, r_last, r_count) =
                in_responses.get(&c.stem).copied().unwrap_or((0, 0, 0));
            let in_previous_response = r_turns > 0 && r_last + 1 == n;
            let in_first = first_stems.contains(&c.stem);
            let in_previous = previous_stems.contains(&c.stem);
            c.response_only = response_only;
            c.features = vec![
                c.weight as f64,
                if response_only {
                    0.0
                } else {
                    1.0 / (n - last) as f64
                },
                flag(in_first),
                flag(in_previous),
                turns as f64 / n.max(1) as f64,
                flag(in_previous_response),
                flag(response_only),
                if r_turns > 0 {
                    1.0 / (n - r_last) as f64
                } else {
                    0.0
                },
                r_turns as f64 / n.max(1) as f64,
                (1.0 + r_count as f64).ln(),
                c.surface.chars().count() as f64,
                flag(c.surface.chars().all(|ch| ch.is_ascii_digit())),
                flag(refers_back),
                elliptic,
                flag(refers_back && in_previous),
                flag(refers_back && in_first),
                (1.0 + n as f64).ln(),
                flag(first_person),
                rel,
                flag(written.capitalized.contains(&c.surface)),
                flag(written.acronyms.contains(&c.surface)),
                flag(opening_stems.contains(&c.stem)),
                flag(written.after_determiner.contains(&c.surface)),
                flag(verb_like(&c.surface)),
                flag(response_only && written.capitalized.contains(&c.surface)),
                flag(response_only && refers_back),
                flag(in_previous_response) * elliptic,
                flag(opening_stems.contains(&c.stem) && refers_back),
            ];
        }
        // Deterministic order before selection: heaviest first, ties to the most recent.
        v.sort_by(|a, b| {
            b.weight
                .total_cmp(&a.weight)
                .then(b.at.cmp(&a.at))
                .then(a.stem.cmp(&b.stem))
        });
        v
    }

    /// Context terms to append, in conversation order.
    fn context_terms(
        &self,
        ctx: &ConversationContext,
        have: &HashSet<String>,
        selector: Option<&TermSelector>,
    ) -> Vec<TermCandidate> {
        let mut v = self.term_candidates(ctx, have);
        if let Some(sel) = selector {
            return sel.choose(&sel.score(v));
        }
        v.retain(|c| c.weight > 0.0);
        let refers_back = terms::words(&ctx.utterance)
            .iter()
            .any(|w| TRIGGERS.contains(&w.as_str()))
            || have.len() < self.short_below;
        let budget = self.base_terms + if refers_back { self.anaphora_terms } else { 0 };
        v.truncate(budget);
        v.sort_by_key(|c| c.at);
        v
    }

    /// The rewrite with an explicit term selector (`None`: the decayed weights), for tuning.
    pub fn rewrite_with(
        &self,
        ctx: &ConversationContext,
        selected_ptkb: &[&str],
        selector: Option<&TermSelector>,
    ) -> Result<Rewrite> {
        self.rewrite_choosing(ctx, selected_ptkb, &mut |have| {
            self.context_terms(ctx, have, selector)
        })
    }

    /// The rewrite with the context terms `choose` returns, in conversation order, given the
    /// utterance's own stems. Tuning scores each turn's candidates once and tries many choices.
    pub fn rewrite_choosing(
        &self,
        ctx: &ConversationContext,
        selected_ptkb: &[&str],
        choose: &mut dyn FnMut(&HashSet<String>) -> Vec<TermCandidate>,
    ) -> Result<Rewrite> {
        let utterance = ctx.utterance.trim();
        if utterance.is_empty() {
            // Nothing was asked: an empty query, not one made of history alone.
            return Ok(Rewrite {
                text: String::new(),
                terms: Vec::new(),
                method: RewriteMethod::History,
            });
        }
        let mut terms_out: Vec<(String, f32)> = Vec::new();
        let mut have: HashSet<String> = HashSet::new();
        for s in terms::content_stems(utterance) {
            if have.insert(s.clone()) {
                terms_out.push((s, 1.0));
            }
        }
        // A reference to a list of the previous answer is written out with its items, and an
        // accepted offer with its subject, in place of carried-over terms.
        let listed = ctx
            .history
            .last()
            .and_then(|t| t.response.as_deref())
            .and_then(|r| {
                list_references::resolve(utterance, r)
                    .or_else(|| accepted_offer::resolve(utterance, r))
            });
        let mut added: Vec<String> = Vec::new();
        if let Some(listed) = &listed {
            for s in terms::content_stems(listed) {
                if have.insert(s.clone()) {
                    terms_out.push((s, self.context_weight));
                }
            }
        } else {
            let context = choose(&have);
            let top = context.iter().map(|c| c.weight).fold(0.0, f32::max);
            for c in &context {
                let stem = terms::stem(&c.surface);
                if have.insert(stem.clone()) {
                    terms_out.push((stem, self.context_weight * c.weight / top.max(1e-6)));
                    added.push(c.surface.clone());
                }
            }
            for w in with_whole_names(&added, ctx).split_off(added.len()) {
                let stem = terms::stem(&w);
                if have.insert(stem.clone()) {
                    terms_out.push((stem, self.context_weight));
                    added.push(w);
                }
            }
        }
        let mut ptkb_surface: Vec<String> = Vec::new();
        let first_person = terms::words(utterance)
            .iter()
            .any(|w| FIRST_PERSON.contains(&w.as_str()));
        let ptkb_text_terms = if first_person {
            self.ptkb_terms.max(self.ptkb_terms_first_person)
        } else {
            self.ptkb_terms
        };
        let ptkb_limit = self.ptkb_query_terms.max(ptkb_text_terms);
        let mut ptkb_added = 0;
        'statements: for st in selected_ptkb {
            for t in terms::content_terms(st) {
                if ptkb_added == ptkb_limit {
                    break 'statements;
                }
                if have.insert(t.stem.clone()) {
                    terms_out.push((t.stem, self.ptkb_weight));
                    if ptkb_added < ptkb_text_terms {
                        ptkb_surface.push(t.surface);
                    }
                    ptkb_added += 1;
                }
            }
        }
        let mut text = match listed {
            Some(listed) => listed,
            None if added.is_empty() => utterance.to_string(),
            None => {
                let replaced = if self.replace_pronoun {
                    let phrases = as_phrases(&added, ctx, true).join(" ");
                    possessive_phrase(utterance, &phrases)
                        .or_else(|| replace_first_pronoun(utterance, &phrases))
                } else {
                    None
                };
                replaced.unwrap_or_else(|| {
                    format!("{utterance} {}", as_phrases(&added, ctx, false).join(" "))
                })
            }
        };
        if let Some(place) = conversation_place(ctx) {
            if let Some(set) = in_place(utterance, &text, &place) {
                text = set;
                for s in terms::content_stems(&place) {
                    if have.insert(s.clone()) {
                        terms_out.push((s, self.context_weight));
                    }
                }
            }
        }
        if !ptkb_surface.is_empty() {
            text.push(' ');
            text.push_str(&ptkb_surface.join(" "));
        }
        Ok(Rewrite {
            text,
            terms: terms_out,
            method: RewriteMethod::History,
        })
    }
}

impl Rewriter for HistoryRewriter {
    fn rewrite(&self, ctx: &ConversationContext, selected_ptkb: &[&str]) -> Result<Rewrite> {
        let selector = match self.selection {
            TermSelection::Decayed => None,
            TermSelection::Learned => Some(learned_term_selector()),
        };
        self.rewrite_with(ctx, selected_ptkb, selector)
    }
}

/// Uses the context's supplied rewrite; without one, the fallback rewriter.
pub struct ManualRewriter<R> {
    pub fallback: R,
}

impl<R: Rewriter> Rewriter for ManualRewriter<R> {
    fn rewrite(&self, ctx: &ConversationContext, selected_ptkb: &[&str]) -> Result<Rewrite> {
        match ctx.manual_rewrite.as_deref().map(str::trim) {
            Some(m) if !m.is_empty() => {
                let mut seen = HashSet::new();
                let terms = terms::content_stems(m)
                    .into_iter()
                    .filter(|s| seen.insert(s.clone()))
                    .map(|s| (s, 1.0))
                    .collect();
                Ok(Rewrite {
                    text: m.to_string(),
                    terms,
                    method: RewriteMethod::Manual,
                })
            }
            _ => self.fallback.rewrite(ctx, selected_ptkb),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::context::HistoryTurn;

    fn ctx(utterance: &str, history: &[&str]) -> ConversationContext {
        ConversationContext {
            utterance: utterance.into(),
            history: history
                .iter()
                .map(|u| HistoryTurn {
                    utterance: u.to_string(),
                    response: None,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn committed_selector_matches_the_features() {
        let sel = learned_term_selector();
        sel.model.check_features(TERM_FEATURES).unwrap();
        assert!(sel.max_terms > 0 && sel.threshold > 0.0 && sel.threshold < 1.0);
    }

    /// A candidate whose only feature is its probability's logit, for [`TermSelector::choose`].
    fn scored(list: &[(&str, f64, bool)]) -> (TermSelector, Vec<(f64, TermCandidate)>) {
        let sel = TermSelector {
            model: LogisticModel {
                features: vec!["logit".into()],
                mean: vec![0.0],
                scale: vec![1.0],
                weights: vec![1.0],
                bias: 0.0,
            },
            threshold: 0.5,
            max_terms: 2,
            answer_terms: 1,
            ptkb_terms_first_person: 1,
        };
        let candidates = list
            .iter()
            .enumerate()
            .map(|(i, &(w, p, response_only))| TermCandidate {
                surface: w.into(),
                stem: w.into(),
                weight: 0.0,
                at: (0, i),
                response_only,
                features: vec![(p / (1.0 - p)).ln()],
            })
            .collect();
        let scored = sel.score(candidates);
        (sel, scored)
    }

    #[test]
    fn answer_slots_take_only_answer_words_beyond_the_term_limit() {
        let (sel, scored) = scored(&[
            ("said", 0.7, false),
            ("top", 0.9, true),
            ("second", 0.8, false),
            ("user", 0.65, false),
            ("answer", 0.6, true),
            ("low", 0.4, true),
        ]);
        let stems = |v: Vec<TermCandidate>| v.into_iter().map(|c| c.stem).collect::<Vec<_>>();
        // Two by probability, one more that only an answer said, above the threshold; in
        // conversation order, each weighted by its probability.
        let chosen = sel.choose(&scored);
        assert!((chosen[0].weight - 0.9).abs() < 1e-6);
        assert_eq!(stems(chosen), ["top", "second", "answer"]);
        let none = TermSelector {
            answer_terms: 0,
            ..sel.clone()
        };
        assert_eq!(stems(none.choose(&scored)), ["top", "second"]);
        let strict = TermSelector {
            threshold: 0.62,
            ..sel
        };
        assert_eq!(stems(strict.choose(&scored)), ["top", "second"]);
    }

    #[test]
    fn learned_selection_carries_the_topic_into_a_pronoun_question() {
        let rw = HistoryRewriter::default();
        assert_eq!(rw.selection, TermSelection::Learned);
        let r = rw
            .rewrite(
                &ctx("What are its symptoms?", &["Tell me about throat cancer."]),
                &[],
            )
            .unwrap();
        assert!(r.text.contains("cancer"), "{}", r.text);
        let decayed = HistoryRewriter {
            selection: TermSelection::Decayed,
            ..rw
        };
        let d = decayed
            .rewrite(
                &ctx("What are its symptoms?", &["Tell me about throat cancer."]),
                &[],
            )
            .unwrap();
        assert!(d.text.contains("cancer"), "{}", d.text);
    }

    #[test]
    fn first_turn_is_kept_as_said() {
        let r = HistoryRewriter::default()
            .rewrite(&ctx("What is throat cancer?", &[]), &[])
            .unwrap();
        assert_eq!(r.text, "What is throat cancer?");
        assert_eq!(
            r.terms,
            vec![("throat".into(), 1.0), ("cancer".into(), 1.0)]
        );
    }

    #[test]
    fn pronoun_is_resolved_from_history() {
        let r = HistoryRewriter::default()
            .rewrite(&ctx("Is it treatable?", &["What is throat cancer?"]), &[])
            .unwrap();
        assert_eq!(r.text, "Is throat cancer treatable?");
        assert!(r
            .terms
            .iter()
            .any(|(t, w)| t == "cancer" && *w > 0.0 && *w < 1.0));
    }

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
    fn possessives_become_the_x_of_the_topic() {
        assert_eq!(
            possessive_phrase("What is their size and type?", "cars").as_deref(),
            Some("What is the size and type of cars?")
        );
        assert_eq!(
            possessive_phrase("What is its price?", "iPhone 14").as_deref(),
            Some("What is the price of iPhone 14?")
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
        let r = HistoryRewriter::default()
            .rewrite(
                &ctx("What are its symptoms?", &["Tell me about throat cancer."]),
                &[],
            )
            .unwrap();
        assert!(
            r.text.starts_with("What are the symptoms of "),
            "{}",
            r.text
        );
        assert!(r.text.contains("cancer"), "{}", r.text);
    }

    #[test]
    fn selected_terms_are_written_as_the_phrases_they_came_in() {
        let c = ctx(
            "Can I crack it?",
            &["I have an interview for a software engineering position at Google."],
        );
        let selected: Vec<String> = ["interview", "software", "engineering", "position", "google"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            as_phrases(&selected, &c, false),
            vec!["interview for a software engineering position at Google"]
        );
        // Phrases in the order of their best-ranked term, then the terms found in no phrase.
        let selected: Vec<String> = ["budget", "google", "interview"].map(String::from).to_vec();
        assert_eq!(
            as_phrases(&selected, &c, false),
            vec!["Google", "interview", "budget"]
        );
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

    #[test]
    fn names_and_acronyms_of_the_history_are_features() {
        let mut c = ctx(
            "Are there any medications available?",
            &["Tell me about digestion."],
        );
        c.history[0].response = Some(
            "Irritable bowel syndrome (IBS) affects digestion. Many people in Doha have IBS."
                .into(),
        );
        let cands = HistoryRewriter::default().term_candidates(&c, &HashSet::new());
        let feature = |stem: &str, name: &str| {
            let k = TERM_FEATURES.iter().position(|f| *f == name).unwrap();
            cands.iter().find(|c| c.stem == stem).unwrap().features[k]
        };
        assert_eq!(feature("ibs", "acronym"), 1.0);
        assert_eq!(feature("digest", "acronym"), 0.0);
        assert_eq!(feature("ibs", "in_previous_response_opening"), 1.0);
        assert_eq!(feature("peopl", "in_previous_response_opening"), 0.0);
        assert_eq!(feature("doha", "capitalized"), 1.0);
        assert_eq!(feature("bowel", "capitalized"), 0.0);
    }

    #[test]
    fn a_list_in_the_previous_answer_is_written_out() {
        let mut c = ctx(
            "Which one is the cheapest?",
            &["What phones have the best cameras?"],
        );
        c.history[0].response =
            Some("Good choices are the Pixel 8, Galaxy S23, iPhone 15 and Xperia 1.".into());
        let r = HistoryRewriter::default().rewrite(&c, &[]).unwrap();
        assert_eq!(
            r.text,
            "Which of the Pixel 8, Galaxy S23, iPhone 15, and Xperia 1 is the cheapest?"
        );
        assert!(
            r.terms.iter().any(|(t, w)| t == "xperia" && *w == 0.5),
            "{:?}",
            r.terms
        );
    }

    #[test]
    fn an_accepted_offer_is_written_with_its_subject() {
        let mut c = ctx("Yes please!", &["Hello! I have IBS. What can I eat?"]);
        c.history[0].response = Some(
            "Many people with IBS avoid fried food. Would you like me to tell you about the low FODMAP diet?"
                .into(),
        );
        let r = HistoryRewriter::default().rewrite(&c, &[]).unwrap();
        assert_eq!(r.text, "Yes please! the low FODMAP diet");
        assert!(r.terms.iter().any(|(t, _)| t == "fodmap"), "{:?}", r.terms);
    }

    #[test]
    fn greetings_and_thanks_are_not_carried_over() {
        let rw = HistoryRewriter::default();
        let c = ctx(
            "Is it treatable?",
            &["Hello there, thanks! I am curious about throat cancer."],
        );
        let have: HashSet<String> = terms::content_stems(&c.utterance).into_iter().collect();
        let stems: Vec<String> = rw
            .term_candidates(&c, &have)
            .into_iter()
            .map(|t| t.stem)
            .collect();
        assert!(stems.contains(&"throat".to_string()), "{stems:?}");
        for dialogue in ["hello", "thank", "curiou"] {
            assert!(!stems.iter().any(|s| s.starts_with(dialogue)), "{stems:?}");
        }
    }

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

    #[test]
    fn terms_already_said_are_not_repeated() {
        let r = HistoryRewriter::default()
            .rewrite(
                &ctx("How is lung cancer treated?", &["What is throat cancer?"]),
                &[],
            )
            .unwrap();
        assert_eq!(r.text.matches("cancer").count(), 1, "{}", r.text);
    }

    #[test]
    fn ptkb_terms_are_appended_when_asked() {
        let rw = HistoryRewriter {
            ptkb_terms: 1,
            ..Default::default()
        };
        let r = rw
            .rewrite(&ctx("Suggest a diet.", &[]), &["I'm vegetarian."])
            .unwrap();
        assert_eq!(r.text, "Suggest a diet. vegetarian");
    }

    #[test]
    fn ptkb_terms_reach_retrieval_terms_without_changing_the_text() {
        let r = HistoryRewriter::default()
            .rewrite(&ctx("Suggest a diet.", &[]), &["I'm vegetarian."])
            .unwrap();
        assert_eq!(r.text, "Suggest a diet.");
        assert!(r.terms.contains(&("vegetarian".to_string(), 0.3)));
    }

    #[test]
    fn empty_utterance_gives_an_empty_query() {
        let r = HistoryRewriter::default()
            .rewrite(&ctx("  ", &["What is throat cancer?"]), &[])
            .unwrap();
        assert_eq!(r.text, "");
        assert!(r.terms.is_empty());
    }

    #[test]
    fn manual_uses_the_supplied_rewrite_or_falls_back() {
        let rw = ManualRewriter {
            fallback: HistoryRewriter::default(),
        };
        let mut c = ctx("Is it treatable?", &["What is throat cancer?"]);
        c.manual_rewrite = Some("Is throat cancer treatable?".into());
        let r = rw.rewrite(&c, &[]).unwrap();
        assert_eq!(r.text, "Is throat cancer treatable?");
        assert_eq!(r.method, RewriteMethod::Manual);
        c.manual_rewrite = Some(" ".into());
        assert_eq!(rw.rewrite(&c, &[]).unwrap().method, RewriteMethod::History);
    }
}
