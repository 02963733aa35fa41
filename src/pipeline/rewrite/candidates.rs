//! Term candidates: every content term of the history that the utterance lacks, with the
//! features the learned selector ([`super::selection::TermSelector`]) scores.
//!
//! A candidate's `weight` is the sum, over the earlier turns whose utterance has it, of
//! `decay^(distance-1)` (the previous turn has distance 1), with the first utterance, which
//! usually states the topic of the conversation, weighted at least `first`; an earlier response
//! adds `response` × the decayed weight to a term the utterances already have (a response
//! confirms a term, it never introduces one: responses are long and would drown the query).
//! Terms of responses alone are still candidates, with weight 0, for the learned selector.

use std::collections::{HashMap, HashSet};

use super::{lexicon, terms};
use crate::pipeline::context::ConversationContext;

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

/// One history term the rewrite may carry, with its features.
#[derive(Debug, Clone)]
pub struct TermCandidate {
    pub surface: String,
    pub stem: String,
    /// The `decay`/`first`/`response` weight (the decayed selection).
    pub weight: f32,
    /// (turn index, position) of the last occurrence: the output order.
    pub at: (usize, usize),
    /// Said only in responses, never by the user.
    pub response_only: bool,
    pub features: Vec<f64>,
}

/// How earlier turns weigh a candidate (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CandidateWeights {
    pub decay: f32,
    pub first: f32,
    pub response: f32,
}

/// Whether the utterance has a word that reliably refers back (*it*, *they*, *those*, ...).
pub fn refers_back(utterance: &str) -> bool {
    terms::words(utterance)
        .iter()
        .any(|w| lexicon::RELIABLE_REFERENCES.contains(&w.as_str()))
}

/// Whether the utterance speaks of the user (*I*, *me*, *my*, ...).
pub fn first_person(utterance: &str) -> bool {
    terms::words(utterance)
        .iter()
        .any(|w| lexicon::FIRST_PERSON.contains(&w.as_str()))
}

/// Endings of verbs and adverbs ("experiencing", "related", "usually"), which rewrites rarely
/// carry, unlike the nouns around them.
fn verb_like(word: &str) -> bool {
    word.len() > 5 && (word.ends_with("ing") || word.ends_with("ed") || word.ends_with("ly"))
}

/// Positions of terms of a response come after those of the same turn's utterance.
const RESPONSE_POSITION: usize = 1 << 20;

/// Whether a history word may be carried at all: not already said, not a word that refers back
/// or manages the conversation.
fn carriable(t: &terms::Term, have: &HashSet<String>) -> bool {
    !(have.contains(&t.stem)
        || terms::is_anaphor(&t.surface)
        || terms::is_dialogue_word(&t.surface))
}

/// stem -> (turns whose utterance has it, last such turn, relative position there).
type UtteranceSeen = HashMap<String, (usize, usize, f64)>;
/// stem -> (responses containing it, last such response, occurrences in responses).
type ResponseSeen = HashMap<String, (usize, usize, usize)>;

/// Candidates from the earlier utterances, with where they were said.
fn from_utterances(
    w: CandidateWeights,
    ctx: &ConversationContext,
    have: &HashSet<String>,
) -> (HashMap<String, TermCandidate>, UtteranceSeen) {
    let n = ctx.history.len();
    let mut cands: HashMap<String, TermCandidate> = HashMap::new();
    let mut seen: UtteranceSeen = HashMap::new();
    for (i, turn) in ctx.history.iter().enumerate() {
        let mut weight = w.decay.powi((n - i) as i32 - 1);
        if i == 0 {
            weight = weight.max(w.first);
        }
        let mut seen_here = HashSet::new();
        let terms_here = terms::content_terms(&turn.utterance);
        let len = terms_here.len().max(1) as f64;
        for (pos, t) in terms_here.into_iter().enumerate() {
            if !carriable(&t, have) {
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
                c.weight += weight;
                s.0 += 1;
            }
            s.1 = i;
            s.2 = pos as f64 / len;
            c.surface = t.surface;
            c.at = (i, pos);
        }
    }
    (cands, seen)
}

/// Adds what the earlier responses say to `cands` (see the module documentation).
fn add_responses(
    w: CandidateWeights,
    ctx: &ConversationContext,
    have: &HashSet<String>,
    cands: &mut HashMap<String, TermCandidate>,
    seen: &UtteranceSeen,
) -> ResponseSeen {
    let n = ctx.history.len();
    let mut in_responses: ResponseSeen = HashMap::new();
    let responses = ctx.history.iter().enumerate().filter(|_| w.response > 0.0);
    for (i, turn) in responses {
        let Some(r) = &turn.response else { continue };
        let weight = w.response * w.decay.powi((n - i) as i32 - 1);
        let mut seen_here = HashSet::new();
        for (pos, t) in terms::content_terms(r).into_iter().enumerate() {
            if !carriable(&t, have) {
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
                Some(c) if first_time_in_turn && seen.contains_key(&t.stem) => c.weight += weight,
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
    in_responses
}

/// What the current utterance and the conversation say about every candidate alike.
struct TurnCues {
    n: usize,
    refers_back: bool,
    first_person: bool,
    elliptic: f64,
    first_stems: HashSet<String>,
    previous_stems: HashSet<String>,
    written: terms::WordCues,
    /// Stems of the previous answer's first sentence, which names what it is about.
    opening_stems: HashSet<String>,
}

impl TurnCues {
    fn new(ctx: &ConversationContext, have: &HashSet<String>) -> Self {
        let utterance_stems =
            |t: Option<&crate::pipeline::context::HistoryTurn>| -> HashSet<String> {
                t.map(|t| terms::content_stems(&t.utterance).into_iter().collect())
                    .unwrap_or_default()
            };
        let mut written = terms::WordCues::default();
        for t in &ctx.history {
            written.add(&t.utterance);
            if let Some(r) = &t.response {
                written.add(r);
            }
        }
        let opening_stems = ctx
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
        TurnCues {
            n: ctx.history.len(),
            refers_back: refers_back(&ctx.utterance),
            first_person: first_person(&ctx.utterance),
            elliptic: 1.0 / (1.0 + have.len() as f64),
            first_stems: utterance_stems(ctx.history.first()),
            previous_stems: utterance_stems(ctx.history.last()),
            written,
            opening_stems,
        }
    }

    /// The features of `c`, in [`TERM_FEATURES`] order.
    fn features(
        &self,
        c: &TermCandidate,
        seen: &UtteranceSeen,
        in_responses: &ResponseSeen,
    ) -> Vec<f64> {
        let n = self.n;
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        let (turns, last, rel) = seen.get(&c.stem).copied().unwrap_or((0, 0, 0.0));
        let response_only = turns == 0;
        let (r_turns, r_last, r_count) = in_responses.get(&c.stem).copied().unwrap_or((0, 0, 0));
        let in_previous_response = r_turns > 0 && r_last + 1 == n;
        let in_first = self.first_stems.contains(&c.stem);
        let in_previous = self.previous_stems.contains(&c.stem);
        let refers_back = self.refers_back;
        let capitalized = self.written.capitalized.contains(&c.surface);
        let opening = self.opening_stems.contains(&c.stem);
        vec![
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
            self.elliptic,
            flag(refers_back && in_previous),
            flag(refers_back && in_first),
            (1.0 + n as f64).ln(),
            flag(self.first_person),
            rel,
            flag(capitalized),
            flag(self.written.acronyms.contains(&c.surface)),
            flag(opening),
            flag(self.written.after_determiner.contains(&c.surface)),
            flag(verb_like(&c.surface)),
            flag(response_only && capitalized),
            flag(response_only && refers_back),
            flag(in_previous_response) * self.elliptic,
            flag(opening && refers_back),
        ]
    }
}

/// Every history term the utterance does not already contain (`have`: its stems), with
/// features, heaviest first. Terms of earlier utterances, and, with `response` > 0, of earlier
/// responses.
pub fn term_candidates(
    w: CandidateWeights,
    ctx: &ConversationContext,
    have: &HashSet<String>,
) -> Vec<TermCandidate> {
    let (mut cands, seen) = from_utterances(w, ctx, have);
    let in_responses = add_responses(w, ctx, have, &mut cands, &seen);
    let cues = TurnCues::new(ctx, have);
    let mut v: Vec<TermCandidate> = cands.into_values().collect();
    for c in &mut v {
        c.response_only = seen.get(&c.stem).is_none_or(|s| s.0 == 0);
        c.features = cues.features(c, &seen, &in_responses);
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
