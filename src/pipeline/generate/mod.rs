//! Response generation with citations: a list of sentences, each citing the passages it rests
//! on (iKAT `passage_provenance` with `used`; TREC RAG `answer[{text, citations}]`).
//!
//! * [`ExtractiveGenerator`]: selects and orders sentences of the top passages (default without
//!   an LLM). Deterministic.
//! * [`LlmGenerator`]: any OpenAI-compatible chat endpoint with the prompt in `prompts/`; falls
//!   back to extractive when the endpoint fails, times out or returns nothing usable, and says why
//!   in [`Diagnostics::fallback`].

pub mod assemble;
mod extractive;
mod llm;
mod prompt;
pub mod stopping;
mod table_rows;

pub use assemble::SentenceAssembler;
pub use extractive::{ExtractiveConfig, ExtractiveGenerator, READER_MEANING_WEIGHT};
pub use llm::{LlmGenerator, LlmGeneratorConfig};
pub use prompt::PromptTemplate;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::Passage;
use crate::formats::words;

/// Errors of the generation stage (LLM failures are not errors: they fall back to extractive).
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("invalid generation request: {0}")]
    InvalidRequest(String),
    #[error(transparent)]
    Llm(#[from] crate::llm::LlmError),
    #[error("invalid prompt template {name}: {message}")]
    Prompt { name: String, message: String },
}

pub type Result<T, E = GenerateError> = std::result::Result<T, E>;

/// The generator `config` asks for: the LLM (with its extractive fallback, and two retries of
/// transient failures) when `llm.base_url` is set, else extractive.
pub fn generator_from_config(config: &crate::config::LlmConfig) -> Result<Box<dyn Generator>> {
    match crate::llm::OpenAiClient::from_config(config)? {
        Some(client) => Ok(Box::new(llm_generator(client))),
        None => Ok(Box::new(ExtractiveGenerator::default())),
    }
}

fn llm_generator(client: crate::llm::OpenAiClient) -> LlmGenerator {
    LlmGenerator::new(retrying(client), LlmGeneratorConfig::default())
}

/// Two retries of transient failures (connection refused, 5xx) around the endpoint.
fn retrying(client: crate::llm::OpenAiClient) -> std::sync::Arc<dyn crate::llm::ChatModel> {
    let model = crate::llm::Retry::new(client, 3, std::time::Duration::from_millis(200));
    std::sync::Arc::new(model)
}

/// The chat model `config` describes (with two retries of transient failures), or `None` when
/// no endpoint is configured (`rewrite_llm::llm_stages_from_config` builds the stages on it).
pub fn chat_model_from_config(
    config: &crate::config::LlmConfig,
) -> Result<Option<std::sync::Arc<dyn crate::llm::ChatModel>>> {
    Ok(crate::llm::OpenAiClient::from_config(config)?.map(retrying))
}

/// How words are counted for the limit (see `formats::words`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WordMeasure {
    /// iKAT: spaCy whitespace tokens of the response text (sentences joined by one space).
    Ikat,
    /// TREC RAG: sum over sentences of `len(NFKC(text.strip()).split())`.
    TrecRag,
}

/// The response length limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WordLimit {
    pub max_words: usize,
    pub measure: WordMeasure,
}

impl WordLimit {
    /// iKAT 2024/2025: at most 250 words.
    pub const IKAT: WordLimit = WordLimit {
        max_words: crate::formats::ikat::MAX_RESPONSE_WORDS,
        measure: WordMeasure::Ikat,
    };
    /// TREC RAG 2024/2025: at most 400 words.
    pub const TREC_RAG: WordLimit = WordLimit {
        max_words: crate::formats::trec_rag::MAX_WORDS,
        measure: WordMeasure::TrecRag,
    };

    /// Words of a response made of `sentences`, as the track counts them.
    pub fn count<'a>(&self, sentences: impl IntoIterator<Item = &'a str>) -> usize {
        match self.measure {
            WordMeasure::Ikat => {
                let joined: Vec<&str> = sentences.into_iter().collect();
                words::spacy_whitespace_tokens(&joined.join(" "))
            }
            WordMeasure::TrecRag => words::trec_rag_response_length(sentences),
        }
    }
}

/// One earlier exchange of the conversation.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ContextTurn {
    pub user: String,
    pub response: Option<String>,
}

/// A client's sampling parameters for the LLM (an OpenAI chat request's): each one given
/// replaces the generator's configured value; the extractive generator has none to replace.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Sampling {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// An upper bound on the LLM's tokens (never above the configured `max_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
}

impl Sampling {
    pub fn is_empty(&self) -> bool {
        *self == Sampling::default()
    }
}

/// What a generator gets.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GenerationRequest {
    /// The self-contained (rewritten) query.
    pub query: String,
    /// Earlier exchanges, oldest first (the LLM prompt shows the last few).
    pub context: Vec<ContextTurn>,
    /// Ranked passages, best first; citations are indices into this list.
    pub passages: Vec<Passage>,
    pub limit: WordLimit,
    /// Overrides [`ExtractiveConfig::keep_context`] (chat answers ask for it).
    #[serde(default)]
    pub keep_context: Option<bool>,
    #[serde(default, skip_serializing_if = "Sampling::is_empty")]
    pub sampling: Sampling,
    /// The conversation's instructions: the LLM's prompt carries them; the extractive generator
    /// selects sentences and cannot follow them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// For a reader's answer: how close each candidate sentence is in meaning to the query (the
    /// cosine of their bi-encoder vectors), by sentence text; the extractive generator blends it
    /// into a sentence's lexical relevance ([`ExtractiveConfig::meaning_weight`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentence_meaning: Option<SentenceMeaning>,
}

/// Cosine of each sentence's vector with the query's, by sentence text.
pub type SentenceMeaning = std::collections::BTreeMap<String, f32>;

impl GenerationRequest {
    pub fn new(query: impl Into<String>, passages: Vec<Passage>, limit: WordLimit) -> Self {
        Self {
            query: query.into(),
            context: Vec::new(),
            passages,
            limit,
            keep_context: None,
            sampling: Sampling::default(),
            instructions: None,
            sentence_meaning: None,
        }
    }

    fn validate(&self) -> Result<()> {
        if self.limit.max_words == 0 {
            return Err(GenerateError::InvalidRequest(
                "the word limit must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// One response sentence with the passages it cites (0-based indices into the request's
/// passages, in the order cited).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GeneratedSentence {
    pub text: String,
    pub citations: Vec<usize>,
}

/// What went wrong with an LLM answer (stored as its snake_case name).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FallbackKind {
    /// The endpoint could not be reached.
    Unreachable,
    Timeout,
    /// The endpoint answered with an error status.
    HttpStatus,
    /// The endpoint's reply was not the protocol's.
    Malformed,
    /// The request could not be sent.
    Request,
    /// The LLM configuration is unusable.
    Config,
    /// The prompt could not be built (template or passages).
    Prompt,
    /// The answer held no sentence.
    Empty,
    /// No sentence cited a given passage.
    NoCitedSentence,
}

impl FallbackKind {
    pub const ALL: [FallbackKind; 9] = [
        FallbackKind::Unreachable,
        FallbackKind::Timeout,
        FallbackKind::HttpStatus,
        FallbackKind::Malformed,
        FallbackKind::Request,
        FallbackKind::Config,
        FallbackKind::Prompt,
        FallbackKind::Empty,
        FallbackKind::NoCitedSentence,
    ];

    /// The stored name (`no_cited_sentence`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackKind::Unreachable => "unreachable",
            FallbackKind::Timeout => "timeout",
            FallbackKind::HttpStatus => "http_status",
            FallbackKind::Malformed => "malformed",
            FallbackKind::Request => "request",
            FallbackKind::Config => "config",
            FallbackKind::Prompt => "prompt",
            FallbackKind::Empty => "empty",
            FallbackKind::NoCitedSentence => "no_cited_sentence",
        }
    }
}

/// Why an LLM answer was replaced by the extractive one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Fallback {
    /// The generator that failed, e.g. `llm:smollm2-135m-instruct`.
    pub from: GeneratorId,
    pub kind: FallbackKind,
    /// Human-readable reason (the endpoint's error message included).
    pub reason: String,
}

/// Facts about one LLM call, for the turn's diagnostics and for benchmarks.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LlmCall {
    pub model: String,
    pub endpoint: String,
    pub streamed: bool,
    pub latency_ms: u64,
    /// Streaming only: time to the first content delta.
    pub first_token_ms: Option<u64>,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    /// Streaming: number of content deltas received (llama.cpp sends one token per delta).
    pub stream_chunks: Option<u32>,
    pub finish_reason: Option<String>,
    /// The model's raw answer (shortened), so a bad parse can be inspected later.
    pub raw_output: String,
    /// How many passages the prompt numbered (citations beyond are dropped).
    pub passages_shown: usize,
    /// The request as sent (prompt and sampling parameters), so the call can be replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<crate::llm::ChatRequest>,
}

/// Everything worth keeping about how the answer came about (stored with the turn).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Diagnostics {
    /// Words of the final response, counted per `limit`.
    pub words: usize,
    pub limit: Option<WordLimit>,
    /// Cited numbers (1-based, as written) that named no shown passage.
    pub dropped_citations: Vec<u32>,
    /// Indices (into the final sentences) of sentences that cite nothing.
    pub uncited_sentences: Vec<usize>,
    /// Sentences left out because the word limit was reached.
    pub sentences_cut_for_limit: usize,
    /// LLM: indices of sentences the model wrote without a citation and convrag cited after
    /// verifying that one shown passage supports them (`generate::assemble`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verified_citations: Vec<usize>,
    pub fallback: Option<Fallback>,
    pub llm: Option<LlmCall>,
    /// Extractive: candidate sentences considered, and near-duplicates merged into a citation.
    pub candidates: Option<usize>,
    pub duplicates_merged: Option<usize>,
    /// Extractive, for a reader: the distinct candidate sentences whose closeness in meaning to
    /// the query was weighed ([`GenerationRequest::sentence_meaning`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weighed_by_meaning: Option<usize>,
    /// Of those, the sentences the model encoded for this turn; the others' vectors were
    /// cached from an earlier turn over the same collection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meaning_encoded: Option<usize>,
}

/// Which generator wrote a response. Stored and sent as `extractive` or `llm:<model>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GeneratorId {
    Extractive,
    /// A chat model, by the name the endpoint serves it under.
    Llm {
        model: String,
    },
}

impl std::fmt::Display for GeneratorId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GeneratorId::Extractive => f.write_str("extractive"),
            GeneratorId::Llm { model } => write!(f, "llm:{model}"),
        }
    }
}

impl std::str::FromStr for GeneratorId {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.split_once(':') {
            None if s == "extractive" => Ok(GeneratorId::Extractive),
            Some(("llm", model)) if !model.is_empty() => Ok(GeneratorId::Llm {
                model: model.to_string(),
            }),
            _ => Err(format!(
                "unknown generator {s:?} (expected extractive or llm:<model>)"
            )),
        }
    }
}

impl Serialize for GeneratorId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for GeneratorId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A generated response.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Generation {
    pub sentences: Vec<GeneratedSentence>,
    pub generator: GeneratorId,
    pub diagnostics: Diagnostics,
}

impl Generation {
    /// The response as one Markdown text (sentences joined by a space, code blocks on lines of
    /// their own), as iKAT's `text`.
    pub fn response_text(&self) -> String {
        crate::text::sentences::join_sentences(self.sentences.iter().map(|s| s.text.as_str()))
    }

    /// Sorted indices of the passages some sentence cites (iKAT `used`).
    pub fn used_passages(&self) -> Vec<usize> {
        let mut used: Vec<usize> = self
            .sentences
            .iter()
            .flat_map(|s| s.citations.iter().copied())
            .collect();
        used.sort_unstable();
        used.dedup();
        used
    }

    /// `used` flag for each of `n_passages` passages.
    pub fn used_flags(&self, n_passages: usize) -> Vec<bool> {
        let mut flags = vec![false; n_passages];
        for i in self.used_passages() {
            if i < n_passages {
                flags[i] = true;
            }
        }
        flags
    }
}

/// Something the streaming variant reports while it works.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum GenerationEvent {
    /// A finished sentence (index into the final answer), citations resolved.
    Sentence {
        index: usize,
        sentence: GeneratedSentence,
    },
    /// Sentences sent so far are void (the LLM failed mid-answer); the fallback's follow.
    Restart { reason: String },
}

/// A response generator.
pub trait Generator: Send + Sync {
    /// Recorded with the turn (`extractive`, `llm:<model>`).
    fn id(&self) -> GeneratorId;

    fn generate<'a>(&'a self, request: &'a GenerationRequest) -> BoxFuture<'a, Result<Generation>>;

    /// The sentences whose closeness in meaning to the query this generator would weigh for
    /// `request` ([`GenerationRequest::sentence_meaning`]); none when it would not.
    fn sentences_to_weigh(&self, _request: &GenerationRequest) -> Vec<String> {
        Vec::new()
    }

    /// As [`Generator::generate`], reporting sentences as they are produced. The returned
    /// generation always equals what the events described (after the last `Restart`).
    fn generate_streaming<'a>(
        &'a self,
        request: &'a GenerationRequest,
        on_event: &'a mut (dyn FnMut(GenerationEvent) + Send),
    ) -> BoxFuture<'a, Result<Generation>> {
        Box::pin(async move {
            let generation = self.generate(request).await?;
            announce_sentences(&generation, on_event);
            Ok(generation)
        })
    }
}

/// Reports each sentence of a generation made whole (not streamed) as its event, in order.
pub(crate) fn announce_sentences(
    generation: &Generation,
    on_event: &mut (dyn FnMut(GenerationEvent) + Send),
) {
    for (index, sentence) in generation.sentences.iter().enumerate() {
        on_event(GenerationEvent::Sentence {
            index,
            sentence: sentence.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_limits_count_like_the_tracks() {
        let s = ["One two three.", "Four ﬁve."];
        assert_eq!(WordLimit::IKAT.count(s), 5);
        assert_eq!(WordLimit::TREC_RAG.count(s), 5);
        assert_eq!(WordLimit::TREC_RAG.count(["a\u{3000}b"]), 2);
        assert_eq!(WordLimit::IKAT.count(Vec::<&str>::new()), 0);
    }

    #[test]
    fn generator_ids_read_back_as_written() {
        for text in [
            "extractive",
            "llm:smollm2-135m-instruct",
            "llm:org/model:q4",
        ] {
            let id: GeneratorId = text.parse().unwrap();
            assert_eq!(id.to_string(), text);
            let json = serde_json::to_string(&id).unwrap();
            assert_eq!(serde_json::from_str::<GeneratorId>(&json).unwrap(), id);
        }
        assert!("llm:".parse::<GeneratorId>().is_err());
        assert!("bm25".parse::<GeneratorId>().is_err());
    }

    #[test]
    fn config_chooses_the_generator() {
        let mut config = crate::config::LlmConfig::default();
        assert_eq!(
            generator_from_config(&config).unwrap().id(),
            GeneratorId::Extractive
        );
        config.base_url = Some("http://127.0.0.1:9/v1".into());
        config.model = "m".into();
        assert_eq!(
            generator_from_config(&config).unwrap().id(),
            GeneratorId::Llm { model: "m".into() }
        );
        config.timeout_secs = 0;
        assert!(generator_from_config(&config).is_err());
    }

    #[test]
    fn used_and_store_views() {
        let g = Generation {
            sentences: vec![
                GeneratedSentence {
                    text: "A.".into(),
                    citations: vec![2, 0],
                },
                GeneratedSentence {
                    text: "B.".into(),
                    citations: vec![],
                },
            ],
            generator: GeneratorId::Extractive,
            diagnostics: Diagnostics::default(),
        };
        assert_eq!(g.used_passages(), vec![0, 2]);
        assert_eq!(g.used_flags(4), vec![true, false, true, false]);
        assert_eq!(g.response_text(), "A. B.");
    }
}
