//! Extractive answers: sentences of the top passages, scored against the query, picked with
//! maximal marginal relevance, ordered by source, within the word limit.
//!
//! Relevance of a sentence is
//! `(1 - rank_weight) * bm25 / max_bm25 + rank_weight / sqrt(1 + rank) + lead_bonus / (1 + position)`,
//! where BM25 uses IDF over all candidate sentences (so terms
//! that every passage repeats weigh little), query terms weigh 1 and terms of earlier user
//! utterances `context_weight`. MMR: `lambda * relevance - (1 - lambda) * max cosine` to the
//! sentences already chosen (TF-IDF vectors); a candidate at least `duplicate_similarity` close
//! to a chosen sentence is merged into it as an extra citation instead. Selection stops before
//! the first sentence whose *marginal* relevance is below `min_marginal` (fitted on training
//! conversations by `convrag tune extractive`, see [`super::stopping`]): its MMR with the BM25
//! of only the query terms no chosen sentence contains yet, so a sentence answering another
//! facet of the question still counts and a restatement does not. An answer is as long as its
//! relevant sentences, not as the word limit.

use std::collections::{HashMap, HashSet};

use futures_util::future::BoxFuture;

use super::table_rows::row_statements;
use super::{
    Diagnostics, GeneratedSentence, Generation, GenerationRequest, Generator, GeneratorId, Result,
    WordLimit,
};
use crate::text::citations::parse_cited_sentence;
use crate::text::porter_nltk::stem;
use crate::text::sentences::{split_units, UnitKind};
use crate::text::terms::terms;

/// A text's terms as sentences are scored: for a reader also stemmed, so "backing up" answers
/// "back up" and "generates" "generate" (the batch formats keep the light folding their stopping
/// rule was fitted with).
fn sentence_terms(text: &str, reading: bool) -> Vec<String> {
    let folded = terms(text);
    if reading {
        folded.into_iter().map(|w| stem(&w)).collect()
    } else {
        folded
    }
}

/// Tuning of the extractive generator (defaults are what the tests and benchmarks use).
#[derive(Debug, Clone, PartialEq)]
pub struct ExtractiveConfig {
    /// Passages (from the top) whose sentences are candidates.
    pub max_passages: usize,
    /// Sentences shorter or longer than this (in words) are not candidates.
    pub min_sentence_words: usize,
    pub max_sentence_words: usize,
    pub lambda: f64,
    pub duplicate_similarity: f64,
    pub rank_weight: f64,
    pub lead_bonus: f64,
    pub context_weight: f64,
    /// Sentences whose BM25 is below this fraction of the best sentence's are not candidates
    /// (keeps a short answer focused instead of filling the limit with passing mentions).
    pub min_lexical: f64,
    /// Stop before the first sentence whose marginal relevance (MMR over the query terms not yet
    /// covered) is below this; `None` fills the word limit. The first sentence is always taken.
    pub min_marginal: Option<f64>,
    /// A sentence that leans on the one before it ("Thus …", "This form …") comes with that
    /// sentence, or is left out when it has none; one that introduces an example (ends with
    /// `:`) comes with the code block after it, or is left out when none follows. A request's
    /// `keep_context` overrides it.
    pub keep_context: bool,
    /// For a reader's answer with [`GenerationRequest::sentence_meaning`]: the share of a
    /// sentence's lexical relevance given to its closeness in meaning to the query (over the
    /// closest candidate's), so "adds a new publication" can answer "publish".
    pub meaning_weight: f64,
    pub k1: f64,
    pub b: f64,
}

impl Default for ExtractiveConfig {
    fn default() -> Self {
        Self {
            max_passages: 10,
            min_sentence_words: 4,
            max_sentence_words: 80,
            lambda: 0.7,
            duplicate_similarity: 0.8,
            rank_weight: 0.3,
            lead_bonus: 0.05,
            context_weight: 0.3,
            min_lexical: 0.15,
            min_marginal: super::stopping::StopRule::committed().min_marginal,
            keep_context: super::stopping::StopRule::committed().keep_context,
            meaning_weight: READER_MEANING_WEIGHT,
            k1: 1.2,
            b: 0.75,
        }
    }
}

/// The extractive generator (no model, deterministic).
#[derive(Debug, Clone, Default)]
pub struct ExtractiveGenerator {
    pub config: ExtractiveConfig,
}

/// A unit of a passage: a sentence (a candidate when `scored`), a heading, a code block or a
/// table (never candidates themselves; a code block follows the sentence introducing it).
struct Candidate {
    passage: usize,
    position: usize,
    kind: UnitKind,
    text: String,
    /// Within the sentence length bounds: scored, and selectable when lexical enough.
    scored: bool,
    selectable: bool,
    terms: Vec<String>,
    relevance: f64,
    bm25: f64,
    /// BM25 per query term (weighted), for the stopping rule's novelty.
    contributions: Vec<(String, f64)>,
    vector: HashMap<String, f64>,
    /// A code block short enough to come with it follows in its passage; its words count as
    /// the sentence's.
    code_after: bool,
    /// A table row read as a sentence (kind `Table`: nothing leans on it).
    row: bool,
    /// For a reader, the IDF-weighted share of the query's terms that its code (its code spans
    /// and the code block after it) holds.
    code_match: f64,
    /// For a reader, its closeness in meaning to the query over the closest candidate's (see
    /// [`GenerationRequest::sentence_meaning`]); `None` without it.
    meaning: Option<f64>,
}

/// [`ExtractiveConfig::meaning_weight`] of the chat: chosen by topic-level cross-validation on
/// iKAT 2023 train in the chat's mode (BENCHMARKS.md, "Sentences by meaning", re-chosen in "A
/// term's description with its term").
pub const READER_MEANING_WEIGHT: f64 = 0.6;

/// Relevance added, in answers for a reader, to a sentence that shows code in a code span.
const READER_CODE_SPAN_BONUS: f64 = 0.15;
/// Relevance added, in answers for a reader, to a sentence that brings a code block (the one it
/// introduces or that follows it): the command to run, whole, rather than a name in passing.
/// Chosen on the first 42 manual questions (BENCHMARKS.md, "Answers").
const READER_CODE_BLOCK_BONUS: f64 = 0.3;
/// Relevance added, in answers for a reader, per share of the query's terms the sentence's code
/// holds ([`Candidate::code_match`]). The first 42 manual questions tie from 0 to 0.45
/// (BENCHMARKS.md, "Answers").
const READER_CODE_MATCH_BONUS: f64 = 0.3;

/// Words that open a sentence leaning on the one before it (lower case; a phrase matches whole
/// words at the start).
const DEPENDENT_OPENERS: &[&str] = &[
    "this",
    "these",
    "that",
    "those",
    "thus",
    "it",
    "its",
    "they",
    "them",
    "their",
    "such",
    "hence",
    "therefore",
    "however",
    "also",
    "otherwise",
    "then",
    "so",
    "but",
    "and",
    "or",
    "instead",
    "similarly",
    "likewise",
    "consequently",
    "furthermore",
    "moreover",
    "nevertheless",
    "alternatively",
    "again",
    "here",
    "each step",
    "each of these",
    "each of them",
    "in this case",
    "in that case",
    "in addition",
    "in particular",
    "in other words",
    "in this way",
    "to do this",
    "accordingly",
    "conversely",
    "as a result",
    "for this reason",
    "on the other hand",
    "the former",
    "the latter",
];

/// Whether `sentence` continues the unit before it: it opens with a lower-case word, as the
/// "where `t` is a table …" after a code block does. Alone it reads as a fragment.
fn is_continuation(sentence: &str) -> bool {
    let first = sentence.split_whitespace().next().unwrap_or("");
    first.chars().next().is_some_and(|c| c.is_lowercase()) && !is_identifier(first)
}

/// A program's or function's name (`pg_dump`, `to_tsvector`) opens a sentence in lower case
/// without continuing another one.
fn is_identifier(word: &str) -> bool {
    let word = word.trim_end_matches(|c: char| !c.is_alphanumeric());
    word.contains('_') && word.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// Whether `sentence` leans on the sentence before it (see [`DEPENDENT_OPENERS`]), or continues
/// it ([`is_continuation`]).
pub fn is_dependent(sentence: &str) -> bool {
    if is_continuation(sentence) {
        return true;
    }
    let words: Vec<String> = sentence
        .split_whitespace()
        .take(4)
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .collect();
    DEPENDENT_OPENERS.iter().any(|opener| {
        let parts: Vec<&str> = opener.split(' ').collect();
        parts.len() <= words.len() && parts.iter().zip(&words).all(|(p, w)| p == w)
    })
}

/// Whether `sentence` is an aside: wholly in parentheses ("(Bear in mind that …)").
/// A question asking how to do something ("How do I …", "how can we …", "How to …").
fn asks_how(question: &str) -> bool {
    let lower = question.trim().to_lowercase();
    let mut words = lower.split_whitespace();
    words.next() == Some("how")
        && matches!(
            words.next(),
            Some("do" | "does" | "can" | "could" | "should" | "would" | "to" | "might")
        )
}

fn is_aside(sentence: &str) -> bool {
    let t = sentence.trim();
    t.starts_with('(') && (t.ends_with(')') || t.ends_with(").") || t.ends_with(".)"))
}

/// Whether `sentence` asks rather than tells ("Now what is a query tree?"), a quoted question
/// at its end included.
fn is_question(sentence: &str) -> bool {
    sentence
        .trim_end()
        .trim_end_matches(['"', '\'', '\u{201d}', '\u{2019}', ')', '*', '_'])
        .ends_with('?')
}

/// Whether `sentence` introduces what follows it ("… use a command like:", "For example:").
pub fn introduces_example(sentence: &str) -> bool {
    sentence.trim_end().ends_with(':')
}

/// Whether `sentence` opens an example of what the sentence before it said ("For example, …").
fn starts_example(sentence: &str) -> bool {
    let lower = sentence.trim_start().to_lowercase();
    ["for example", "for instance", "e.g."]
        .iter()
        .any(|opener| lower.starts_with(opener))
}

/// A heading as the subject of the sentence after it ("`CONCURRENTLY`: When this option is
/// used, …"): its text without a section number, or `None` when it is too long to read as one.
fn heading_as_subject(heading: &str) -> Option<String> {
    let text = heading
        .trim()
        .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.')
        .trim();
    let words = text.split_whitespace().count();
    (words > 0 && words <= MAX_SUBJECT_HEADING_WORDS).then(|| text.to_string())
}

/// Longer headings are titles, not the term a sentence after them describes.
const MAX_SUBJECT_HEADING_WORDS: usize = 12;

impl ExtractiveGenerator {
    pub fn new(config: ExtractiveConfig) -> Self {
        Self { config }
    }

    /// The synchronous core (the trait method only wraps it).
    pub fn generate_sync(&self, request: &GenerationRequest) -> Result<Generation> {
        request.validate()?;
        let cfg = &self.config;
        let limit = request.limit;
        let reading = request.keep_context.unwrap_or(cfg.keep_context);
        let mut candidates = self.candidates(request, limit, reading);
        let n_candidates = candidates.iter().filter(|c| c.scored).count();

        if reading {
            read_code_with_its_sentence(&mut candidates, limit);
        }
        let max_bm25 = self.score(request, &mut candidates, reading);
        if reading {
            add_reader_bonuses(&mut candidates);
        }
        // Only sentences sharing enough with the query, unless none does (then the best-ranked
        // passages' leading sentences are the best we have).
        let max_lexical = candidates
            .iter()
            .filter(|c| c.scored)
            .map(|c| self.lexical(c, c.bm25, max_bm25))
            .fold(0.0, f64::max);
        for c in candidates.iter_mut() {
            let lexical = self.lexical(c, c.bm25, max_bm25);
            c.selectable = c.scored
                && (max_lexical <= 0.0 || (lexical > 0.0 && lexical >= cfg.min_lexical * max_lexical))
                // A reader gets the point, not the passage's asides nor its questions.
                && !(reading && (is_aside(&c.text) || is_question(&c.text)));
        }

        let mut chosen: Vec<(usize, Vec<usize>)> = Vec::new(); // (candidate, citations)
                                                               // Where each step's units start in `chosen`, so a step can be taken back whole.
        let mut steps: Vec<usize> = Vec::new();
        let mut remaining: Vec<usize> = (0..candidates.len())
            .filter(|&i| candidates[i].selectable)
            .collect();
        let mut duplicates = 0;
        let mut covered: HashSet<String> = HashSet::new();
        while !remaining.is_empty() {
            let mut best: Option<(usize, f64, f64, usize)> = None; // (slot, mmr, sim, most similar)
            for (slot, &ci) in remaining.iter().enumerate() {
                let c = &candidates[ci];
                let (sim, similar) = chosen
                    .iter()
                    .enumerate()
                    .map(|(k, (cj, _))| (cosine(&c.vector, &candidates[*cj].vector), k))
                    .fold((0.0, 0), |a, b| if b.0 > a.0 { b } else { a });
                let mmr = cfg.lambda * c.relevance - (1.0 - cfg.lambda) * sim;
                if best.is_none_or(|(_, m, _, _)| mmr > m) {
                    best = Some((slot, mmr, sim, similar));
                }
            }
            let (slot, _, sim, similar) = best.expect("remaining is not empty");
            // A reader's answer fills its (short) limit: the threshold was fitted for long ones.
            let min_marginal = if reading { None } else { cfg.min_marginal };
            if let (Some(min), false) = (min_marginal, chosen.is_empty()) {
                let c = &candidates[remaining[slot]];
                let novel: f64 = c
                    .contributions
                    .iter()
                    .filter(|(t, _)| !covered.contains(t))
                    .map(|(_, v)| v)
                    .sum();
                let relevance = self.relevance(c, novel, max_bm25);
                if cfg.lambda * relevance - (1.0 - cfg.lambda) * sim < min {
                    break; // every remaining sentence adds less than the threshold
                }
            }
            let ci = remaining.remove(slot);
            let c = &candidates[ci];
            if !chosen.is_empty() && sim >= cfg.duplicate_similarity {
                duplicates += 1;
                let cites = &mut chosen[similar].1;
                if !cites.contains(&c.passage) {
                    cites.push(c.passage);
                }
                continue;
            }
            let Some((group, optional)) = self.group_of(&candidates, ci, reading) else {
                continue; // leans on a sentence it cannot bring, or introduces nothing
            };
            let example = group[group.len() - optional..].to_vec();
            let mut added: Vec<usize> = group
                .into_iter()
                .filter(|g| !chosen.iter().any(|(k, _)| k == g))
                .collect();
            let words_with = |added: &[usize]| {
                limit.count(
                    chosen
                        .iter()
                        .map(|(k, _)| candidates[*k].text.as_str())
                        .chain(added.iter().map(|k| candidates[*k].text.as_str())),
                )
            };
            if !example.is_empty() && words_with(&added) > limit.max_words {
                // The sentence still reads without the example after it.
                added.retain(|k| !example.contains(k));
            }
            if words_with(&added) > limit.max_words {
                continue; // too long for what is left; a shorter one may still fit
            }
            steps.push(chosen.len());
            for k in added {
                covered.extend(candidates[k].contributions.iter().map(|(t, _)| t.clone()));
                remaining.retain(|&r| r != k);
                chosen.push((k, vec![candidates[k].passage]));
            }
        }

        if chosen.is_empty() {
            // No sentence could stand with its context: the best one alone beats no answer.
            let best = (0..candidates.len())
                .filter(|&i| candidates[i].selectable)
                .filter(|&i| limit.count([candidates[i].text.as_str()]) <= limit.max_words)
                .max_by(|&a, &b| {
                    candidates[a]
                        .relevance
                        .total_cmp(&candidates[b].relevance)
                        .then(b.cmp(&a))
                });
            chosen.extend(best.map(|i| (i, vec![candidates[i].passage])));
        }
        if reading && asks_how(&request.query) {
            self.show_a_command(&candidates, &mut chosen, &steps, limit);
        }
        // Reading order: by passage rank, then by position within the passage.
        chosen.sort_by_key(|(ci, _)| (candidates[*ci].passage, candidates[*ci].position));
        let sentences = render(&candidates, chosen);
        let words = limit.count(sentences.iter().map(|s| s.text.as_str()));
        Ok(Generation {
            sentences,
            generator: GeneratorId::Extractive,
            diagnostics: Diagnostics {
                words,
                limit: Some(limit),
                candidates: Some(n_candidates),
                duplicates_merged: Some(duplicates),
                weighed_by_meaning: request
                    .sentence_meaning
                    .as_ref()
                    .filter(|_| reading && cfg.meaning_weight > 0.0)
                    .map(|m| m.len()),
                ..Diagnostics::default()
            },
        })
    }

    /// A reader asking how to do something is answered with a command: when the answer shows
    /// no code block, the most relevant sentence bringing one whose code holds the question's
    /// words comes in, with its context, in place of the last steps chosen it needs room for.
    fn show_a_command(
        &self,
        candidates: &[Candidate],
        chosen: &mut Vec<(usize, Vec<usize>)>,
        steps: &[usize],
        limit: WordLimit,
    ) {
        if chosen
            .iter()
            .any(|(k, _)| candidates[*k].kind == UnitKind::Code)
        {
            return;
        }
        let best = (0..candidates.len())
            .filter(|&i| {
                let c = &candidates[i];
                c.selectable && c.code_after && c.code_match > 0.0
            })
            .max_by(|&a, &b| {
                candidates[a]
                    .relevance
                    .total_cmp(&candidates[b].relevance)
                    .then(b.cmp(&a))
            });
        let Some((group, _)) = best.and_then(|ci| self.group_of(candidates, ci, true)) else {
            return;
        };
        let words = |chosen: &[(usize, Vec<usize>)]| {
            limit.count(
                chosen
                    .iter()
                    .map(|(k, _)| candidates[*k].text.as_str())
                    .chain(group.iter().map(|k| candidates[*k].text.as_str())),
            )
        };
        if limit.count(group.iter().map(|k| candidates[*k].text.as_str())) > limit.max_words {
            return;
        }
        let mut kept = chosen.clone();
        for &start in steps.iter().rev() {
            if words(&kept) <= limit.max_words {
                break;
            }
            kept.truncate(start);
        }
        kept.retain(|(k, _)| !group.contains(k));
        kept.extend(group.iter().map(|&k| (k, vec![candidates[k].passage])));
        *chosen = kept;
    }

    /// The units that go into the answer with sentence `ci`, in order: the sentence it leans on
    /// (or the heading it describes), itself, the code block it introduces or that follows it;
    /// `None` when it cannot stand (see [`ExtractiveConfig::keep_context`]). With it, how many
    /// units at the end are an example the sentence can also stand without.
    fn group_of(
        &self,
        candidates: &[Candidate],
        ci: usize,
        keep_context: bool,
    ) -> Option<(Vec<usize>, usize)> {
        let c = &candidates[ci];
        if !keep_context {
            return Some((vec![ci], 0));
        }
        let neighbour = |k: Option<usize>| {
            k.and_then(|k| candidates.get(k))
                .filter(|n| n.passage == c.passage)
                .map(|_| k.expect("found"))
        };
        let mut group = Vec::new();
        let before = neighbour(ci.checked_sub(1));
        // The first sentence under a term describes it ("List all available databases, then
        // exit." under `-l`): without the term it names nothing.
        let describes = before.filter(|&b| {
            candidates[b].kind == UnitKind::Heading
                && heading_as_subject(&candidates[b].text).is_some()
        });
        if let Some(term) = describes {
            group.push(term);
        } else if is_dependent(&c.text) {
            let before = before?;
            let b = &candidates[before];
            // (A heading that can be a subject was taken above.)
            let stands_before = match b.kind {
                UnitKind::Prose => !is_dependent(&b.text) && !introduces_example(&b.text),
                UnitKind::Heading | UnitKind::Code | UnitKind::Table => false,
            };
            if !stands_before {
                return None;
            }
            group.push(before);
        }
        group.push(ci);
        let code_at =
            |k: usize| neighbour(Some(k)).filter(|&k| candidates[k].kind == UnitKind::Code);
        if introduces_example(&c.text) {
            group.push(code_at(ci + 1)?);
            return Some((group, 0));
        }
        let stands = group.len();
        // A paragraph that ends where a code block starts is what the code illustrates.
        if let Some(code) = code_at(ci + 1) {
            group.push(code);
        } else if let Some(example) = neighbour(Some(ci + 1)).filter(|&k| {
            starts_example(&candidates[k].text) && introduces_example(&candidates[k].text)
        }) {
            // "… you can remove it. For example, … the following command:" and its code.
            if let Some(code) = code_at(example + 1) {
                group.extend([example, code]);
            }
        }
        Some((group.clone(), group.len() - stands))
    }

    /// Scores every candidate against the query (BM25 with IDF over the candidate sentences,
    /// TF-IDF vectors, relevance); returns the best BM25.
    fn score(
        &self,
        request: &GenerationRequest,
        candidates: &mut [Candidate],
        reading: bool,
    ) -> f64 {
        let cfg = &self.config;
        // Query weights: the query's terms, then earlier user utterances' terms at a lower weight.
        let mut query: HashMap<String, f64> = HashMap::new();
        for t in sentence_terms(&request.query, reading) {
            query.insert(t, 1.0);
        }
        for turn in &request.context {
            for t in sentence_terms(&turn.user, reading) {
                query.entry(t).or_insert(cfg.context_weight);
            }
        }

        // IDF over the candidate sentences.
        let n = candidates.iter().filter(|c| c.scored).count() as f64;
        let mut df: HashMap<&str, f64> = HashMap::new();
        for c in candidates.iter().filter(|c| c.scored) {
            let mut seen: Vec<&str> = c.terms.iter().map(String::as_str).collect();
            seen.sort_unstable();
            seen.dedup();
            for t in seen {
                *df.entry(t).or_default() += 1.0;
            }
        }
        let idf: HashMap<String, f64> = df
            .into_iter()
            .map(|(t, d)| (t.to_string(), (1.0 + (n - d + 0.5) / (d + 0.5)).ln()))
            .collect();
        let avgdl = if n == 0.0 {
            1.0
        } else {
            candidates
                .iter()
                .filter(|c| c.scored)
                .map(|c| c.terms.len() as f64)
                .sum::<f64>()
                / n
        }
        .max(1.0);

        for c in candidates.iter_mut().filter(|c| c.scored) {
            let mut tf: HashMap<&str, f64> = HashMap::new();
            for t in &c.terms {
                *tf.entry(t.as_str()).or_default() += 1.0;
            }
            let dl = c.terms.len() as f64;
            c.contributions = query
                .iter()
                .filter_map(|(t, w)| {
                    let f = *tf.get(t.as_str())?;
                    let idf = idf.get(t).copied().unwrap_or(0.0);
                    Some((
                        t.clone(),
                        w * idf * f * (cfg.k1 + 1.0)
                            / (f + cfg.k1 * (1.0 - cfg.b + cfg.b * dl / avgdl)),
                    ))
                })
                .collect();
            c.bm25 = c.contributions.iter().map(|(_, v)| v).sum();
            let mut vector: HashMap<String, f64> = tf
                .iter()
                .map(|(t, f)| (t.to_string(), f * idf.get(*t).copied().unwrap_or(0.0)))
                .collect();
            let norm = vector.values().map(|v| v * v).sum::<f64>().sqrt();
            if norm > 0.0 {
                vector.values_mut().for_each(|v| *v /= norm);
            }
            c.vector = vector;
        }
        if reading {
            match_code(candidates, &query, &idf);
            if let Some(meaning) = &request.sentence_meaning {
                add_meaning(candidates, meaning);
            }
        }
        let max_bm25 = candidates.iter().map(|c| c.bm25).fold(0.0, f64::max);
        for c in candidates.iter_mut().filter(|c| c.scored) {
            c.relevance = self.relevance(c, c.bm25, max_bm25);
        }
        max_bm25
    }

    /// How well `c` matches the query when its BM25 is `bm25` (the best candidate's is
    /// `max_bm25`): by its words, and by its meaning when it has one.
    fn lexical(&self, c: &Candidate, bm25: f64, max_bm25: f64) -> f64 {
        let words = if max_bm25 > 0.0 { bm25 / max_bm25 } else { 0.0 };
        match c.meaning {
            Some(meaning) => {
                let w = self.config.meaning_weight;
                (1.0 - w) * words + w * meaning
            }
            None => words,
        }
    }

    /// Relevance of `c` when its lexical match is `bm25` (the best candidate's is `max_bm25`).
    fn relevance(&self, c: &Candidate, bm25: f64, max_bm25: f64) -> f64 {
        let cfg = &self.config;
        let lexical = self.lexical(c, bm25, max_bm25);
        (1.0 - cfg.rank_weight) * lexical
            + cfg.rank_weight / (1.0 + c.passage as f64).sqrt()
            + cfg.lead_bonus / (1.0 + c.position as f64)
    }

    /// Every unit of the top passages, in order; sentences within the length bounds are scored.
    /// For a reader, a table is followed by its rows that name and describe something, read as
    /// sentences ([`row_statements`]).
    fn candidates(
        &self,
        request: &GenerationRequest,
        limit: WordLimit,
        reading: bool,
    ) -> Vec<Candidate> {
        let cfg = &self.config;
        let mut out = Vec::new();
        for (p, passage) in request.passages.iter().enumerate().take(cfg.max_passages) {
            let mut units = Vec::new();
            for unit in split_units(&passage.text) {
                let rows = match unit.kind {
                    UnitKind::Table if reading => row_statements(&unit.text),
                    _ => Vec::new(),
                };
                let text = match unit.kind {
                    // Passage text may carry footnote markers ("[12]" in Wikipedia): strip them.
                    UnitKind::Prose => parse_cited_sentence(&unit.text, 0).text,
                    _ => unit.text,
                };
                units.push((unit.kind, text, false));
                units.extend(rows.into_iter().map(|row| (UnitKind::Table, row, true)));
            }
            for (position, (kind, text, row)) in units.into_iter().enumerate() {
                let n_words = limit.count([text.as_str()]);
                let scored = (kind == UnitKind::Prose || row)
                    && n_words >= cfg.min_sentence_words
                    && n_words <= cfg.max_sentence_words
                    && text.chars().any(char::is_alphabetic);
                let terms = if scored {
                    sentence_terms(&text, reading)
                } else {
                    Vec::new()
                };
                out.push(Candidate {
                    passage: p,
                    position,
                    kind,
                    text,
                    scored,
                    selectable: false,
                    terms,
                    relevance: 0.0,
                    bm25: 0.0,
                    contributions: Vec::new(),
                    vector: HashMap::new(),
                    code_after: false,
                    row,
                    code_match: 0.0,
                    meaning: None,
                });
            }
        }
        out
    }
}

/// Each scored candidate's closeness in meaning to the query over the closest one's (a sentence
/// the map does not hold, or one farther than unrelated, counts 0).
fn add_meaning(candidates: &mut [Candidate], meaning: &super::SentenceMeaning) {
    let of = |c: &Candidate| f64::from(meaning.get(&c.text).copied().unwrap_or(0.0)).max(0.0);
    let closest = candidates
        .iter()
        .filter(|c| c.scored)
        .map(of)
        .fold(0.0, f64::max);
    if closest <= 0.0 {
        return;
    }
    for c in candidates.iter_mut().filter(|c| c.scored) {
        c.meaning = Some(of(c) / closest);
    }
}

/// A reader asking how to do something wants the command: sentences that show code rank
/// higher, most of all those that bring the code block they introduce or that follows it, and
/// those whose code holds the question's words.
fn add_reader_bonuses(candidates: &mut [Candidate]) {
    for i in 0..candidates.len() {
        let brings_block = candidates[i].code_after
            || (introduces_example(&candidates[i].text)
                && candidates.get(i + 1).is_some_and(|n| {
                    n.kind == UnitKind::Code && n.passage == candidates[i].passage
                }));
        if !candidates[i].scored {
            continue;
        }
        candidates[i].relevance += READER_CODE_MATCH_BONUS * candidates[i].code_match;
        if brings_block {
            candidates[i].relevance += READER_CODE_BLOCK_BONUS;
        } else if candidates[i].text.contains('`') {
            candidates[i].relevance += READER_CODE_SPAN_BONUS;
        }
    }
}

/// For a reader, a sentence followed by a code block that fits in half the answer is matched
/// with the code's words too: "… for example" before `ALTER TABLE t OWNER TO r;` answers a
/// question about a table's owner although its own words hardly say so.
fn read_code_with_its_sentence(candidates: &mut [Candidate], limit: WordLimit) {
    for i in 1..candidates.len() {
        let (before, rest) = candidates.split_at_mut(i);
        let (sentence, code) = (&mut before[i - 1], &rest[0]);
        if sentence.scored
            && !sentence.row
            && code.kind == UnitKind::Code
            && code.passage == sentence.passage
            && 2 * limit.count([code.text.as_str()]) <= limit.max_words
        {
            sentence.terms.extend(sentence_terms(&code.text, true));
            sentence.code_after = true;
        }
    }
}

/// The chosen units in reading order as answer sentences; a heading (chosen only with the
/// sentence that describes it) becomes that sentence's subject, so it never stands alone nor
/// runs into the sentence.
fn render(candidates: &[Candidate], chosen: Vec<(usize, Vec<usize>)>) -> Vec<GeneratedSentence> {
    let mut out = Vec::new();
    let mut subject: Option<String> = None;
    for (ci, citations) in chosen {
        let c = &candidates[ci];
        if c.kind == UnitKind::Heading {
            subject = heading_as_subject(&c.text);
            continue;
        }
        let text = match subject.take() {
            Some(subject) => format!("{subject}: {}", c.text),
            None => c.text.clone(),
        };
        out.push(GeneratedSentence { text, citations });
    }
    out
}

/// Sets each scored candidate's [`Candidate::code_match`]: a sentence whose command holds the
/// question's words ("`SET TIME ZONE 'value'` is …" for setting the time zone) answers a "how do
/// I" question better than one using them in prose.
fn match_code(
    candidates: &mut [Candidate],
    query: &HashMap<String, f64>,
    idf: &HashMap<String, f64>,
) {
    let weight = |t: &String, w: &f64| w * idf.get(t).copied().unwrap_or(0.0);
    let mass: f64 = query.iter().map(|(t, w)| weight(t, w)).sum();
    if mass <= 0.0 {
        return;
    }
    for i in 0..candidates.len() {
        if !candidates[i].scored {
            continue;
        }
        let text = &candidates[i].text;
        // Code spans are the odd pieces between backticks.
        let mut code: HashSet<String> = text
            .split('`')
            .skip(1)
            .step_by(2)
            .flat_map(|span| sentence_terms(span, true))
            .collect();
        if let Some(block) = candidates
            .get(i + 1)
            .filter(|n| n.kind == UnitKind::Code && n.passage == candidates[i].passage)
        {
            code.extend(sentence_terms(&block.text, true));
        }
        let held: f64 = query
            .iter()
            .filter(|(t, _)| code.contains(*t))
            .map(|(t, w)| weight(t, w))
            .sum();
        candidates[i].code_match = held / mass;
    }
}

fn cosine(a: &HashMap<String, f64>, b: &HashMap<String, f64>) -> f64 {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    small
        .iter()
        .filter_map(|(t, v)| large.get(t).map(|w| v * w))
        .sum()
}

impl Generator for ExtractiveGenerator {
    /// A reader's candidate sentences, in passage order, when meaning has a share.
    fn sentences_to_weigh(&self, request: &GenerationRequest) -> Vec<String> {
        let reading = request.keep_context.unwrap_or(self.config.keep_context);
        if !reading || self.config.meaning_weight <= 0.0 {
            return Vec::new();
        }
        self.candidates(request, request.limit, true)
            .into_iter()
            .filter(|c| c.scored)
            .map(|c| c.text)
            .collect()
    }

    fn id(&self) -> GeneratorId {
        GeneratorId::Extractive
    }

    fn generate<'a>(&'a self, request: &'a GenerationRequest) -> BoxFuture<'a, Result<Generation>> {
        Box::pin(async move { self.generate_sync(request) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::generate::WordMeasure;
    use crate::pipeline::Passage;

    fn passage(id: &str, text: &str) -> Passage {
        Passage {
            id: id.into(),
            text: text.into(),
            score: 1.0,
            ..Passage::default()
        }
    }

    /// A reader's generator: context kept, the word limit filled.
    fn reader() -> ExtractiveGenerator {
        ExtractiveGenerator::new(ExtractiveConfig {
            keep_context: true,
            min_marginal: None,
            ..ExtractiveConfig::default()
        })
    }

    fn passages() -> Vec<Passage> {
        vec![
            passage(
                "p1",
                "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It is named after the engineer Gustave Eiffel, whose company designed and built the tower. Locally nicknamed La dame de fer, it was constructed from 1887 to 1889.",
            ),
            passage(
                "p2",
                "Paris has many museums. The Eiffel Tower is a wrought-iron lattice tower located in Paris, France. Tickets for the tower can be bought online [3].",
            ),
            passage(
                "p3",
                "The tower is 330 metres tall, about the same height as an 81-storey building. It was the tallest man-made structure in the world until 1930.",
            ),
            passage("p4", "Bananas are rich in potassium and grow in tropical climates."),
        ]
    }

    #[test]
    fn picks_relevant_sentences_cites_sources_and_merges_duplicates() {
        // Filling the limit, so that the near-duplicate sentence is reached and merged.
        let g = ExtractiveGenerator::new(ExtractiveConfig {
            min_marginal: None,
            ..ExtractiveConfig::default()
        });
        let req = GenerationRequest::new(
            "How tall is the Eiffel Tower and when was it built?",
            passages(),
            WordLimit::IKAT,
        );
        let out = g.generate_sync(&req).unwrap();
        assert_eq!(out.generator, GeneratorId::Extractive);
        assert!(!out.sentences.is_empty());
        let texts: Vec<&str> = out.sentences.iter().map(|s| s.text.as_str()).collect();
        assert!(texts.iter().any(|t| t.contains("330 metres")), "{texts:?}");
        assert!(texts.iter().all(|t| !t.contains("Bananas")), "{texts:?}");
        // The near-identical sentence of p2 became a second citation of p1's sentence.
        let lattice: Vec<_> = out
            .sentences
            .iter()
            .filter(|s| s.text.contains("lattice"))
            .collect();
        assert_eq!(lattice.len(), 1, "{texts:?}");
        assert_eq!(lattice[0].citations, vec![0, 1]);
        assert!(out.diagnostics.duplicates_merged.unwrap() >= 1);
        // Footnote markers of the passage text do not leak into the answer.
        assert!(texts.iter().all(|t| !t.contains("[3]")));
        for s in &out.sentences {
            assert!(!s.citations.is_empty());
            assert!(s.citations.iter().all(|&c| c < req.passages.len()));
        }
        // Reading order follows the passages' ranks.
        let firsts: Vec<usize> = out.sentences.iter().map(|s| s.citations[0]).collect();
        assert!(firsts.windows(2).all(|w| w[0] <= w[1]), "{firsts:?}");
        assert!(out.diagnostics.words <= 250);
    }

    #[test]
    fn respects_tight_word_limits_and_is_deterministic() {
        let g = ExtractiveGenerator::default();
        for max_words in [1, 12, 25, 40] {
            for measure in [WordMeasure::Ikat, WordMeasure::TrecRag] {
                let limit = WordLimit { max_words, measure };
                let req = GenerationRequest::new("Eiffel tower height built", passages(), limit);
                let a = g.generate_sync(&req).unwrap();
                let b = g.generate_sync(&req).unwrap();
                assert_eq!(a, b);
                let words = limit.count(a.sentences.iter().map(|s| s.text.as_str()));
                assert!(words <= max_words, "{words} > {max_words}");
                assert_eq!(words, a.diagnostics.words);
            }
        }
    }

    #[test]
    fn no_overlap_falls_back_to_leading_sentences_and_empty_input_is_fine() {
        let g = ExtractiveGenerator::default();
        let req = GenerationRequest::new("zzz qqq", passages(), WordLimit::TREC_RAG);
        let out = g.generate_sync(&req).unwrap();
        assert_eq!(
            out.sentences[0].citations[0], 0,
            "leading sentence of the top passage"
        );
        let empty = GenerationRequest::new("anything", vec![], WordLimit::IKAT);
        let out = g.generate_sync(&empty).unwrap();
        assert!(out.sentences.is_empty());
        let zero = GenerationRequest::new(
            "x",
            passages(),
            WordLimit {
                max_words: 0,
                measure: WordMeasure::Ikat,
            },
        );
        assert!(g.generate_sync(&zero).is_err());
    }

    #[test]
    fn an_introduced_example_comes_whole_and_leaning_sentences_bring_their_antecedent() {
        let manual = passage(
            "ddl-alter.html#changing-a-column-s-data-type:1",
            "#### Changing a Column's Data Type\n\n\
             To convert a column to a different data type, use a command like:\n\n\
             ```\nALTER TABLE products ALTER COLUMN price TYPE numeric(10,2);\n```\n\n\
             This will succeed only if each existing entry in the column can be converted to the new type by an implicit cast.",
        );
        let other = passage(
            "sql-altertable.html#description:1",
            "ALTER TABLE changes the definition of an existing table.\n\n\
             Thus the data type of a column is changed by rewriting the whole table.",
        );
        let g = ExtractiveGenerator::new(ExtractiveConfig {
            keep_context: true,
            ..ExtractiveConfig::default()
        });
        let req = GenerationRequest::new(
            "How do I change the data type of a column?",
            vec![manual, other],
            WordLimit {
                max_words: 100,
                measure: WordMeasure::Ikat,
            },
        );
        let out = g.generate_sync(&req).unwrap();
        let texts: Vec<&str> = out.sentences.iter().map(|s| s.text.as_str()).collect();
        let intro = texts
            .iter()
            .position(|t| t.ends_with("use a command like:"))
            .expect("the introducing sentence");
        assert_eq!(
            texts[intro + 1],
            "```\nALTER TABLE products ALTER COLUMN price TYPE numeric(10,2);\n```",
            "{texts:?}"
        );
        assert_eq!(out.sentences[intro + 1].citations, vec![0]);
        // "Thus …" stands only after its antecedent; the heading never joins a sentence.
        if let Some(thus) = texts.iter().position(|t| t.starts_with("Thus")) {
            assert!(
                thus > 0 && texts[thus - 1].starts_with("ALTER TABLE changes"),
                "{texts:?}"
            );
        }
        assert!(texts.iter().all(|t| !t.contains("Data Type To convert")));
        // Sentences of one passage keep their order.
        let positions: Vec<(usize, usize)> = out
            .sentences
            .iter()
            .map(|s| {
                (
                    s.citations[0],
                    texts.iter().position(|t| *t == s.text).unwrap(),
                )
            })
            .collect();
        assert!(positions.windows(2).all(|w| w[0] <= w[1]), "{positions:?}");
        let md = out.response_text();
        assert!(md.contains("like:\n\n```\nALTER TABLE"), "{md}");

        // Without the rule, the sentence could dangle without its code.
        assert!(is_dependent(
            "Thus the files are not strictly one line per row."
        ));
        assert!(is_dependent("Each step is run in a separate transaction."));
        assert!(is_dependent("This form changes the type of a column."));
        assert!(!is_dependent("Thistle grows here."));
        assert!(!is_dependent("Each table has a name."));
        assert!(is_dependent(
            "In particular, it must have read access to all tables."
        ));
        // A fragment continuing the unit before it (here a code block).
        assert!(is_dependent(
            "where `documents` is a table that has a text field."
        ));
        assert!(!is_dependent("`pg_dump` writes a script."));
        assert!(introduces_example("For example:"));
        assert!(is_aside(
            "(Bear in mind that the first row is not well-defined.)"
        ));
        assert!(is_aside("(See Section 14.1)."));
        assert!(is_question("Now what is a query tree?"));
        assert!(is_question(
            "An administrator often wonders, \u{201c}What is it doing?\u{201d}"
        ));
        assert!(!is_question("The `?` operator tests whether a key exists."));
        assert!(!is_aside("(If you must) use a dump."));
    }

    #[test]
    fn a_leaning_sentence_without_its_antecedent_or_an_introduction_without_code_is_left_out() {
        let only = passage(
            "p",
            "Thus the files are not strictly one line per table row like text-format files.\n\n\
             The rows of a CSV file can be loaded with options like:\n\n\
             - HEADER",
        );
        let copy = passage(
            "q",
            "COPY FROM loads rows from a file into a table, in text or CSV format.",
        );
        let g = ExtractiveGenerator::new(ExtractiveConfig {
            keep_context: true,
            ..ExtractiveConfig::default()
        });
        let req = GenerationRequest::new(
            "How do I load rows from a CSV file into a table?",
            vec![only.clone(), copy],
            WordLimit::IKAT,
        );
        let out = g.generate_sync(&req).unwrap();
        let texts: Vec<&str> = out.sentences.iter().map(|s| s.text.as_str()).collect();
        assert!(
            texts.iter().any(|t| t.starts_with("COPY FROM")),
            "{texts:?}"
        );
        assert!(
            texts
                .iter()
                .all(|t| !t.starts_with("Thus") && !t.ends_with(':')),
            "{texts:?}"
        );
        // When nothing else can stand, the best sentence is answered alone rather than nothing.
        let alone = GenerationRequest::new(
            "How do I load rows from a CSV file into a table?",
            vec![only],
            WordLimit::IKAT,
        );
        assert_eq!(g.generate_sync(&alone).unwrap().sentences.len(), 1);
        let kept = ExtractiveGenerator::new(ExtractiveConfig {
            keep_context: false,
            min_marginal: None,
            ..ExtractiveConfig::default()
        })
        .generate_sync(&req)
        .unwrap();
        assert!(kept.sentences.iter().any(|s| s.text.starts_with("Thus")));
    }

    #[test]
    fn a_reader_gets_the_code_after_a_sentence_and_a_heading_as_its_subject() {
        let owner = passage(
            "ddl-priv.html#owner:1",
            "An object can be assigned to a new owner with an `ALTER` command of the appropriate kind, for example\n\n\
             ```\nALTER TABLE table_name OWNER TO new_owner;\n```\n\n\
             Superusers can always do this.",
        );
        let clause = passage(
            "sql-createtable.html#identity:1",
            "#### `GENERATED ALWAYS AS IDENTITY`\n\n\
             This clause creates the column as an identity column with an owner.",
        );
        let drop = passage(
            "manage-ag-dropdb.html#drop:1",
            "You can remove a database you no longer want to own.\n\n\
             For example, the owner can destroy it using the following command:\n\n\
             ```\n$ dropdb mydb\n```",
        );
        let reader = reader();
        let req = GenerationRequest::new(
            "How do I change the owner of a table?",
            vec![owner, clause, drop],
            WordLimit {
                max_words: 100,
                measure: WordMeasure::Ikat,
            },
        );
        let md = reader.generate_sync(&req).unwrap().response_text();
        assert!(
            md.contains("for example\n\n```\nALTER TABLE table_name OWNER TO new_owner;\n```"),
            "{md}"
        );
        assert!(
            md.contains("`GENERATED ALWAYS AS IDENTITY`: This clause creates"),
            "{md}"
        );
        assert!(
            md.contains("the following command:\n\n```\n$ dropdb mydb\n```"),
            "{md}"
        );
        // Too little room for the example: the sentence comes alone, never half an example.
        let tight = GenerationRequest::new(
            "How do I remove a database I no longer want?",
            req.passages[2..].to_vec(),
            WordLimit {
                max_words: 14,
                measure: WordMeasure::Ikat,
            },
        );
        let md = reader.generate_sync(&tight).unwrap().response_text();
        assert_eq!(md, "You can remove a database you no longer want to own.");
        // Batch answers (no context kept) take sentences alone.
        let batch = ExtractiveGenerator::new(ExtractiveConfig {
            keep_context: false,
            min_marginal: None,
            ..ExtractiveConfig::default()
        });
        let md = batch.generate_sync(&req).unwrap().response_text();
        assert!(!md.contains("```") && !md.contains("IDENTITY`:"), "{md}");
    }

    #[test]
    fn a_terms_description_comes_with_the_term_and_a_later_sentence_without_it() {
        let options = passage(
            "app-psql.html#options:1",
            "#### `-l` `--list`\n\n\
             List all available databases, then exit. Other non-connection options are ignored.",
        );
        let req = GenerationRequest::new(
            "How do I list all available databases?",
            vec![options],
            WordLimit {
                max_words: 100,
                measure: WordMeasure::Ikat,
            },
        );
        let md = reader().generate_sync(&req).unwrap().response_text();
        assert!(
            md.starts_with("`-l` `--list`: List all available databases, then exit."),
            "{md}"
        );
        // Only the first sentence under the term describes it.
        assert!(!md.contains("`--list`: Other"), "{md}");
    }

    #[test]
    fn a_reader_prefers_the_sentence_that_brings_a_code_block_to_a_name_in_passing() {
        let page = passage(
            "textsearch-tables.html#search:1",
            "Search a table by searching the table with `tsvector` search terms.\n\n\
             To search a table, run:\n\n```\nSELECT title FROM pgweb WHERE body @@ 'friend';\n```",
        );
        let reader = reader();
        // Room for one of the two: the example.
        let req = GenerationRequest::new(
            "How do I search a table?",
            vec![page],
            WordLimit {
                max_words: 18,
                measure: WordMeasure::Ikat,
            },
        );
        let answer = reader.generate_sync(&req).unwrap();
        assert_eq!(
            answer.response_text(),
            "To search a table, run:\n\n```\nSELECT title FROM pgweb WHERE body @@ 'friend';\n```"
        );
    }

    #[test]
    fn a_reader_asking_how_gets_a_command_in_place_of_the_last_prose() {
        let prose = passage(
            "ddl-drop.html#d:1",
            "Removing a table removes the table's rows and the table's indexes. \
             A removed table cannot be restored, so remove a table only when the table is unused. \
             Removing a table also removes the views of the table.",
        );
        let example = passage(
            "sql-droptable.html#examples:1",
            "Films are kept for a year.\n\nTo destroy one, films:\n\n```\nDROP TABLE films;\n```",
        );
        let answer = |question: &str| {
            let req = GenerationRequest::new(
                question,
                vec![prose.clone(), example.clone()],
                WordLimit {
                    max_words: 30,
                    measure: WordMeasure::Ikat,
                },
            );
            reader().generate_sync(&req).unwrap()
        };
        // The same words without asking how: prose alone fills the answer.
        let plain = answer("Remove a table?");
        assert!(
            !plain.response_text().contains("```"),
            "{}",
            plain.response_text()
        );
        let how = answer("How do I remove a table?");
        let text = how.response_text();
        assert!(text.contains("```\nDROP TABLE films;\n```"), "{text}");
        assert!(text.starts_with("Removing a table removes"), "{text}");
        assert!(how.diagnostics.words <= 30);
        // Cited to the example's passage (the second).
        assert!(how
            .sentences
            .iter()
            .any(|s| s.text.contains("DROP TABLE") && s.citations == [1]));
        assert!(asks_how("how can we list tables") && asks_how("How to vacuum?"));
        assert!(!asks_how("How many rows are there?") && !asks_how("Show me how"));
    }

    /// The reader's answer to `question` over `text` with room for `expected` only: which of the
    /// sentences that fit alone it prefers.
    fn preferred(question: &str, text: &str, expected: &str) -> String {
        let req = GenerationRequest::new(
            question,
            vec![passage("manual.html#p:1", text)],
            WordLimit {
                max_words: expected.split_whitespace().count(),
                measure: WordMeasure::Ikat,
            },
        );
        reader().generate_sync(&req).unwrap().response_text()
    }

    #[test]
    fn a_reader_answers_from_the_row_of_a_reference_table() {
        let text = "Sizes are reported in bytes by the server for every database object.\n\n\
            | Function Description |\n| --- |\n\
            | `db_size` ( `name` ) → `bigint` Computes the disk space used by the named database. Needs the connect right. |\n\
            | `index_bytes` ( `regclass` ) → `bigint` Computes the space of an index. |";
        let question = "How do I find the disk space a database uses?";
        let row =
            "`db_size` ( `name` ) → `bigint`: Computes the disk space used by the named database.";
        assert_eq!(preferred(question, text, row), row);
        // Batch answers keep to the passage's sentences.
        let req = GenerationRequest::new(
            question,
            vec![passage("manual.html#p:1", text)],
            WordLimit::IKAT,
        );
        let batch = ExtractiveGenerator::default().generate_sync(&req).unwrap();
        assert!(!batch.response_text().contains("db_size"), "{batch:?}");
    }

    #[test]
    fn a_reader_prefers_the_sentence_whose_command_holds_the_question_words() {
        let text = "To set the zone, set the zone named by `LOCAL`.\n\n\
            `SET ZONE 'value'` is an alias for `SET timezone TO 'value'`.";
        let command = "`SET ZONE 'value'` is an alias for `SET timezone TO 'value'`.";
        assert_eq!(preferred("How do I set the zone?", text, command), command);
    }

    #[test]
    fn a_reader_matches_words_by_stem_and_a_program_name_opens_a_sentence() {
        assert!(!is_dependent(
            "pg_dump is a utility for backing up a database."
        ));
        assert!(is_dependent("where `t` is a table."));
        let text = "pg_dump is a utility for backing up a database.\n\n\
            Dumps are files of database commands.";
        let named = "pg_dump is a utility for backing up a database.";
        assert_eq!(
            preferred("How do I back up a database?", text, named),
            named
        );
    }

    #[test]
    fn stops_at_the_marginal_relevance_threshold() {
        let req = GenerationRequest::new(
            "How tall is the Eiffel Tower and when was it built?",
            passages(),
            WordLimit::IKAT,
        );
        let with = |min_marginal| {
            ExtractiveGenerator::new(ExtractiveConfig {
                min_marginal,
                ..ExtractiveConfig::default()
            })
            .generate_sync(&req)
            .unwrap()
        };
        let fill = with(None);
        assert!(fill.sentences.len() >= 3, "{fill:?}");
        // No sentence reaches 2.0 (relevance is at most about 1): only the first is kept, with
        // the sentence it leans on when it starts "It …".
        let first = with(Some(2.0));
        match first.sentences.as_slice() {
            [_] => {}
            [_, second] => assert!(is_dependent(&second.text), "{first:?}"),
            _ => panic!("{first:?}"),
        }
        let some = with(Some(0.3));
        assert!(!some.sentences.is_empty());
        assert!(some.sentences.len() <= fill.sentences.len());
    }

    #[test]
    fn a_readers_answer_weighs_meaning_when_it_has_a_share() {
        // Made up: the sentence that answers shares no word with the question.
        let question = "How do I share my pictures with my relatives?";
        let answers = "The invite command sends an album to everyone you name.";
        let aside = "Pictures of relatives are kept in the archive folder by year.";
        let p = passage("guide", &format!("{aside} {answers}"));
        let limit = WordLimit {
            max_words: 14,
            measure: WordMeasure::Ikat,
        };
        let mut req = GenerationRequest::new(question, vec![p], limit);
        let weighing = |meaning_weight| {
            ExtractiveGenerator::new(ExtractiveConfig {
                meaning_weight,
                ..reader().config
            })
        };
        assert_eq!(
            weighing(0.7).sentences_to_weigh(&req),
            vec![aside.to_string(), answers.to_string()]
        );
        assert!(weighing(0.0).sentences_to_weigh(&req).is_empty());
        req.sentence_meaning = Some(
            [(answers.to_string(), 0.62), (aside.to_string(), 0.21)]
                .into_iter()
                .collect(),
        );
        let text = |g: ExtractiveGenerator, req: &GenerationRequest| {
            g.generate_sync(req).unwrap().response_text()
        };
        assert_eq!(text(weighing(0.0), &req), aside, "words alone");
        let out = weighing(0.7).generate_sync(&req).unwrap();
        assert_eq!(out.response_text(), answers, "meaning");
        assert_eq!(out.diagnostics.weighed_by_meaning, Some(2));
        // Without the map, the weight changes nothing.
        req.sentence_meaning = None;
        assert_eq!(text(weighing(0.7), &req), aside);
    }
}
