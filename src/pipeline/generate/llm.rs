//! Cited answers from an OpenAI-compatible chat model, with an extractive fallback.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::BoxFuture;
use futures_util::StreamExt;

use super::assemble::{Assembled, SentenceAssembler};
use super::extractive::ExtractiveGenerator;
use super::prompt::PromptTemplate;
use super::{
    announce_sentences, Diagnostics, Fallback, FallbackKind, Generation, GenerationEvent,
    GenerationRequest, Generator, GeneratorId, LlmCall, Result,
};
use crate::llm::{ChatMessage, ChatModel, ChatRequest, LlmError, StreamItem};
use crate::pipeline::terms::content_stems;
use crate::text::sentences::split_sentences;

const SYSTEM_PROMPT: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/prompts/generate.system.md"
));
const USER_PROMPT: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/prompts/generate.user.md"
));

/// Longest raw output kept in the diagnostics.
const MAX_RAW_OUTPUT_CHARS: usize = 4000;

/// Settings of the LLM generator.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmGeneratorConfig {
    /// Passages numbered in the prompt (from the top); citations beyond are dropped.
    pub max_passages: usize,
    /// Each passage is cut to this many words in the prompt (small context windows).
    pub max_passage_words: usize,
    /// Earlier exchanges shown in the prompt. Default 0: the query is already a self-contained
    /// rewrite, and small models (SmolLM2-135M) echo a shown history instead of answering.
    pub max_context_turns: usize,
    pub max_tokens: u32,
    pub temperature: f64,
    pub seed: Option<u64>,
}

impl Default for LlmGeneratorConfig {
    fn default() -> Self {
        Self {
            max_passages: 5,
            max_passage_words: 120,
            max_context_turns: 0,
            max_tokens: 512,
            temperature: 0.0,
            seed: Some(42),
        }
    }
}

/// Generates with a chat model; falls back to `fallback` (extractive) when the model fails or
/// gives no sentence with a valid citation.
pub struct LlmGenerator {
    model: Arc<dyn ChatModel>,
    config: LlmGeneratorConfig,
    system: PromptTemplate,
    user: PromptTemplate,
    /// Content stems of the templates' own words (see [`LlmGenerator::prompt_echoes`]).
    prompt_terms: HashSet<String>,
    fallback: ExtractiveGenerator,
}

/// How an LLM attempt ended when it produced no usable answer.
struct Failure {
    kind: FallbackKind,
    reason: String,
    call: Option<Box<LlmCall>>,
    dropped: Vec<u32>,
}

/// Content stems of two templates' own words.
fn template_terms(system: &PromptTemplate, user: &PromptTemplate) -> HashSet<String> {
    let fixed = format!("{} {}", system.fixed_text(), user.fixed_text());
    content_stems(&fixed).into_iter().collect()
}

impl LlmGenerator {
    pub fn new(model: Arc<dyn ChatModel>, config: LlmGeneratorConfig) -> Self {
        let system = PromptTemplate::new("prompts/generate.system.md", SYSTEM_PROMPT);
        let user = PromptTemplate::new("prompts/generate.user.md", USER_PROMPT);
        Self {
            model,
            config,
            prompt_terms: template_terms(&system, &user),
            system,
            user,
            fallback: ExtractiveGenerator::default(),
        }
    }

    /// Replaces the prompt templates (same placeholders as `prompts/generate.*.md`).
    pub fn with_prompts(mut self, system: PromptTemplate, user: PromptTemplate) -> Self {
        self.prompt_terms = template_terms(&system, &user);
        self.system = system;
        self.user = user;
        self
    }

    pub fn with_fallback(mut self, fallback: ExtractiveGenerator) -> Self {
        self.fallback = fallback;
        self
    }

    fn label(&self) -> GeneratorId {
        GeneratorId::Llm {
            model: self.model.model().to_string(),
        }
    }

    fn shown(&self, request: &GenerationRequest) -> usize {
        request.passages.len().min(self.config.max_passages)
    }

    /// The chat request for `request` (public so the prompt can be inspected and benchmarked).
    pub fn chat_request(&self, request: &GenerationRequest) -> Result<ChatRequest> {
        let mut passages = String::new();
        for (i, p) in request
            .passages
            .iter()
            .take(self.shown(request))
            .enumerate()
        {
            let text: Vec<&str> = p.text.split_whitespace().collect();
            let mut body = text
                .iter()
                .take(self.config.max_passage_words)
                .copied()
                .collect::<Vec<_>>()
                .join(" ");
            if text.len() > self.config.max_passage_words {
                body.push_str(" ...");
            }
            match p.title.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
                Some(title) => passages.push_str(&format!("[{}] {title}: {body}\n\n", i + 1)),
                None => passages.push_str(&format!("[{}] {body}\n\n", i + 1)),
            }
        }
        let mut context = String::new();
        let skip = request
            .context
            .len()
            .saturating_sub(self.config.max_context_turns);
        for turn in request
            .context
            .iter()
            .skip(skip)
            .take(self.config.max_context_turns)
        {
            context.push_str(&format!("User: {}\n", turn.user.trim()));
            if let Some(r) = turn.response.as_deref().filter(|r| !r.trim().is_empty()) {
                let words: Vec<&str> = r.split_whitespace().take(60).collect();
                context.push_str(&format!("Assistant: {}\n", words.join(" ")));
            }
        }
        if !context.is_empty() {
            context = format!("Conversation so far:\n{context}\n");
        }
        let mut values: HashMap<&str, String> = HashMap::new();
        values.insert("passages", passages.trim_end().to_string() + "\n");
        values.insert("context", context);
        values.insert("query", request.query.trim().to_string());
        values.insert("max_words", request.limit.max_words.to_string());
        values.insert(
            "instructions",
            instructions_block(request.instructions.as_deref()),
        );
        let mut chat = ChatRequest::new(vec![
            ChatMessage::system(self.system.render(&values)?.trim().to_string()),
            ChatMessage::user(self.user.render(&values)?.trim().to_string()),
        ]);
        let sampling = &request.sampling;
        chat.max_tokens = Some(
            sampling
                .max_tokens
                .map_or(self.config.max_tokens, |m| m.min(self.config.max_tokens)),
        );
        chat.temperature = Some(sampling.temperature.unwrap_or(self.config.temperature));
        chat.top_p = sampling.top_p;
        chat.stop = sampling.stop.clone();
        chat.seed = self.config.seed;
        Ok(chat)
    }

    /// Sentences that only repeat the prompt's own words (a small model copying the citation
    /// example): every content word is in the templates, and some is in no shown passage.
    fn prompt_echoes(&self, assembled: &Assembled, request: &GenerationRequest) -> Vec<usize> {
        let passages: HashSet<String> = request
            .passages
            .iter()
            .take(self.shown(request))
            .flat_map(|p| content_stems(&p.text))
            .collect();
        assembled
            .sentences
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                let terms = content_stems(&s.text);
                terms.len() >= 2
                    && terms.iter().all(|t| self.prompt_terms.contains(t))
                    && terms.iter().any(|t| !passages.contains(t))
            })
            .map(|(i, _)| i)
            .collect()
    }

    fn finish_llm(
        &self,
        assembled: Assembled,
        call: LlmCall,
        request: &GenerationRequest,
    ) -> std::result::Result<Generation, Failure> {
        let echoes = self.prompt_echoes(&assembled, request);
        let cites = assembled
            .sentences
            .iter()
            .enumerate()
            .any(|(i, s)| !s.citations.is_empty() && !echoes.contains(&i));
        if !cites {
            let (kind, reason) = if assembled.sentences.is_empty() {
                (
                    FallbackKind::Empty,
                    "the model's answer contained no sentence".to_string(),
                )
            } else if echoes.is_empty() {
                (
                    FallbackKind::NoCitedSentence,
                    format!(
                        "none of the model's {} sentences cites a given passage",
                        assembled.sentences.len()
                    ),
                )
            } else {
                (
                    FallbackKind::NoCitedSentence,
                    format!(
                        "none of the model's {} sentences cites a given passage: {} only repeated \
                         the prompt's own example",
                        assembled.sentences.len(),
                        echoes.len()
                    ),
                )
            };
            return Err(Failure {
                kind,
                reason,
                call: Some(Box::new(call)),
                dropped: assembled.dropped_citations,
            });
        }
        let words = request
            .limit
            .count(assembled.sentences.iter().map(|s| s.text.as_str()));
        Ok(Generation {
            sentences: assembled.sentences,
            generator: self.label(),
            diagnostics: Diagnostics {
                words,
                limit: Some(request.limit),
                dropped_citations: assembled.dropped_citations,
                uncited_sentences: assembled.uncited_sentences,
                sentences_cut_for_limit: assembled.sentences_cut_for_limit,
                verified_citations: assembled.verified_citations,
                llm: Some(call),
                ..Diagnostics::default()
            },
        })
    }

    fn call_record(
        &self,
        chat: &ChatRequest,
        streamed: bool,
        started: Instant,
        raw: &str,
        shown: usize,
    ) -> LlmCall {
        LlmCall {
            model: self.model.model().to_string(),
            endpoint: self.model.name(),
            streamed,
            latency_ms: started.elapsed().as_millis() as u64,
            raw_output: raw.chars().take(MAX_RAW_OUTPUT_CHARS).collect(),
            passages_shown: shown,
            request: Some(chat.clone()),
            ..LlmCall::default()
        }
    }

    /// The chat request for `request` and how many passages it shows, or a prompt failure.
    fn prompt(
        &self,
        request: &GenerationRequest,
    ) -> std::result::Result<(ChatRequest, usize), Failure> {
        let chat = self.chat_request(request).map_err(|e| Failure {
            kind: FallbackKind::Prompt,
            reason: e.to_string(),
            call: None,
            dropped: vec![],
        })?;
        Ok((chat, self.shown(request)))
    }

    async fn attempt(
        &self,
        request: &GenerationRequest,
    ) -> std::result::Result<Generation, Failure> {
        let (chat, shown) = self.prompt(request)?;
        let started = Instant::now();
        let response = self.model.chat(&chat).await.map_err(failure_of)?;
        let mut call = self.call_record(&chat, false, started, &response.content, shown);
        call.prompt_tokens = response.usage.map(|u| u.prompt_tokens);
        call.completion_tokens = response.usage.map(|u| u.completion_tokens);
        call.finish_reason = response.finish_reason.clone();
        let mut assembler = SentenceAssembler::new(shown, request.limit)
            .with_support(request.passages.iter().map(|p| p.text.as_str()));
        for raw in split_sentences(&response.content) {
            assembler.push(&raw);
        }
        let (_, assembled) = assembler.finish();
        self.finish_llm(assembled, call, request)
    }

    async fn attempt_streaming(
        &self,
        request: &GenerationRequest,
        on_event: &mut (dyn FnMut(GenerationEvent) + Send),
        emitted: &mut usize,
    ) -> std::result::Result<Generation, Failure> {
        let (chat, shown) = self.prompt(request)?;
        let started = Instant::now();
        let mut stream = self.model.chat_stream(&chat).await.map_err(failure_of)?;
        let mut buffer = String::new();
        let mut first_token_ms = None;
        let mut chunks = 0u32;
        let mut consumed = 0; // raw sentences of `buffer` already given to the assembler
        let mut assembler = SentenceAssembler::new(shown, request.limit)
            .with_support(request.passages.iter().map(|p| p.text.as_str()));
        let mut emit = |released: Option<(usize, super::GeneratedSentence)>,
                        on_event: &mut (dyn FnMut(GenerationEvent) + Send)| {
            if let Some((index, sentence)) = released {
                on_event(GenerationEvent::Sentence { index, sentence });
                *emitted += 1;
            }
        };
        let mut finish_reason = Some("stop".to_string());
        let mut usage = None;
        while let Some(item) = stream.next().await {
            let delta = match item {
                Ok(StreamItem::Content(delta)) => delta,
                Ok(StreamItem::Usage(u)) => {
                    usage = Some(u);
                    continue;
                }
                Err(e) => {
                    let mut failure = failure_of(e);
                    let mut call = self.call_record(&chat, true, started, &buffer, shown);
                    call.first_token_ms = first_token_ms;
                    call.stream_chunks = Some(chunks);
                    failure.call = Some(Box::new(call));
                    return Err(failure);
                }
            };
            chunks += 1;
            first_token_ms.get_or_insert(started.elapsed().as_millis() as u64);
            buffer.push_str(&delta);
            // Every sentence but the last is complete (the last may still grow).
            let sentences = split_sentences(&buffer);
            while consumed + 1 < sentences.len() {
                emit(assembler.push(&sentences[consumed]), on_event);
                consumed += 1;
            }
            if assembler.is_full() {
                // The word limit is reached: the rest of the answer would be cut anyway. The
                // server's token counts, which come last, are not waited for.
                finish_reason = Some("word_limit".to_string());
                break;
            }
        }
        drop(stream);
        let sentences = split_sentences(&buffer);
        for raw in sentences.iter().skip(consumed) {
            emit(assembler.push(raw), on_event);
        }
        let (last, assembled) = assembler.finish();
        emit(last, on_event);
        let mut call = self.call_record(&chat, true, started, &buffer, shown);
        call.first_token_ms = first_token_ms;
        call.stream_chunks = Some(chunks);
        call.finish_reason = finish_reason;
        call.prompt_tokens = usage.map(|u| u.prompt_tokens);
        call.completion_tokens = usage.map(|u| u.completion_tokens);
        self.finish_llm(assembled, call, request)
    }

    fn fall_back(&self, request: &GenerationRequest, failure: Failure) -> Result<Generation> {
        tracing::warn!(kind = failure.kind.as_str(), reason = %failure.reason, "LLM generation failed; answering extractively");
        let mut generation = self.fallback.generate_sync(request)?;
        generation.diagnostics.fallback = Some(Fallback {
            from: self.label(),
            kind: failure.kind,
            reason: failure.reason,
        });
        generation.diagnostics.llm = failure.call.map(|c| *c);
        generation.diagnostics.dropped_citations = failure.dropped;
        Ok(generation)
    }
}

/// The `{{instructions}}` of the system prompt: the conversation's instructions under a line
/// that keeps the citation rules first, or nothing.
fn instructions_block(instructions: Option<&str>) -> String {
    match instructions.map(str::trim).filter(|i| !i.is_empty()) {
        Some(text) => format!(
            "\nThe user's instructions for this conversation (follow them, and still cite every sentence):\n{text}\n"
        ),
        None => String::new(),
    }
}

fn failure_of(e: LlmError) -> Failure {
    let kind = match &e {
        LlmError::Connect { .. } => FallbackKind::Unreachable,
        LlmError::Timeout { .. } => FallbackKind::Timeout,
        LlmError::Status { .. } => FallbackKind::HttpStatus,
        LlmError::Malformed { .. } => FallbackKind::Malformed,
        LlmError::Request { .. } => FallbackKind::Request,
        LlmError::Config(_) => FallbackKind::Config,
    };
    Failure {
        kind,
        reason: e.to_string(),
        call: None,
        dropped: vec![],
    }
}

impl Generator for LlmGenerator {
    fn id(&self) -> GeneratorId {
        self.label()
    }

    fn generate<'a>(&'a self, request: &'a GenerationRequest) -> BoxFuture<'a, Result<Generation>> {
        Box::pin(async move {
            request.validate()?;
            match self.attempt(request).await {
                Ok(generation) => Ok(generation),
                Err(failure) => self.fall_back(request, failure),
            }
        })
    }

    fn generate_streaming<'a>(
        &'a self,
        request: &'a GenerationRequest,
        on_event: &'a mut (dyn FnMut(GenerationEvent) + Send),
    ) -> BoxFuture<'a, Result<Generation>> {
        Box::pin(async move {
            request.validate()?;
            let mut emitted = 0;
            let failure = match self
                .attempt_streaming(request, on_event, &mut emitted)
                .await
            {
                Ok(generation) => return Ok(generation),
                Err(failure) => failure,
            };
            if emitted > 0 {
                on_event(GenerationEvent::Restart {
                    reason: failure.reason.clone(),
                });
            }
            let generation = self.fall_back(request, failure)?;
            announce_sentences(&generation, on_event);
            Ok(generation)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::OpenAiClient;
    use crate::pipeline::generate::{ContextTurn, GeneratedSentence, WordLimit};
    use crate::pipeline::Passage;

    /// A generator whose endpoint is never called (the tests inspect prompts and answers).
    fn offline_generator(config: LlmGeneratorConfig) -> LlmGenerator {
        let client = OpenAiClient::new(
            "http://127.0.0.1:9/v1",
            "m",
            None,
            std::time::Duration::from_secs(1),
        )
        .unwrap();
        LlmGenerator::new(Arc::new(client), config)
    }

    #[test]
    fn prompt_numbers_the_shown_passages_and_fills_every_placeholder() {
        let config = LlmGeneratorConfig {
            max_passages: 2,
            max_passage_words: 3,
            max_context_turns: 1,
            ..LlmGeneratorConfig::default()
        };
        let g = offline_generator(config);
        let passages = (1..=3)
            .map(|i| Passage {
                id: format!("p{i}"),
                title: (i == 1).then(|| "Title one".to_string()),
                text: format!("passage {i} text goes on"),
                ..Passage::default()
            })
            .collect();
        let mut request = GenerationRequest::new("the query", passages, WordLimit::IKAT);
        request.context = vec![
            ContextTurn {
                user: "old question".into(),
                response: None,
            },
            ContextTurn {
                user: "last question".into(),
                response: Some("last answer".into()),
            },
        ];
        let chat = g.chat_request(&request).unwrap();
        assert_eq!(chat.messages.len(), 2);
        assert!(chat.messages[0].content.contains("at most 250 words"));
        let user = &chat.messages[1].content;
        assert!(user.contains("[1] Title one: passage 1 text ..."), "{user}");
        assert!(user.contains("[2] passage 2 text ..."), "{user}");
        assert!(!user.contains("[3]"), "{user}");
        assert!(
            user.contains("User: last question\nAssistant: last answer"),
            "{user}"
        );
        assert!(!user.contains("old question"), "{user}");
        assert!(user.contains("Question: the query"), "{user}");
        assert!(!user.contains("{{"), "{user}");
        let system = &chat.messages[0].content;
        assert!(
            !system.contains("{{") && !system.contains("instructions"),
            "{system}"
        );
        assert_eq!(chat.temperature, Some(0.0));
        assert_eq!(chat.top_p, None);
        assert!(chat.stop.is_empty());

        // A client's sampling parameters replace the configured ones; max_tokens only lowers.
        request.sampling = super::super::Sampling {
            temperature: Some(0.5),
            top_p: Some(0.9),
            max_tokens: Some(100_000),
            stop: vec!["\n\n".into()],
        };
        let chat = g.chat_request(&request).unwrap();
        assert_eq!(chat.temperature, Some(0.5));
        assert_eq!(chat.top_p, Some(0.9));
        assert_eq!(chat.max_tokens, Some(g.config.max_tokens));
        assert_eq!(chat.stop, ["\n\n"]);
        request.sampling.max_tokens = Some(7);
        assert_eq!(g.chat_request(&request).unwrap().max_tokens, Some(7));

        // The conversation's instructions close the system message.
        request.instructions = Some("  Answer like a pirate.\n".into());
        let chat = g.chat_request(&request).unwrap();
        let system = &chat.messages[0].content;
        assert!(
            system.ends_with("still cite every sentence):\nAnswer like a pirate."),
            "{system}"
        );
        assert!(!chat.messages[1].content.contains("pirate"));
    }

    #[test]
    fn a_copy_of_the_prompts_example_is_no_cited_answer() {
        let g = offline_generator(LlmGeneratorConfig::default());
        let passage = |text: &str| Passage {
            id: "p1".into(),
            text: text.into(),
            ..Passage::default()
        };
        let sentence = |text: &str| GeneratedSentence {
            text: text.into(),
            citations: vec![0],
        };
        let assembled = |texts: &[&str]| Assembled {
            sentences: texts.iter().map(|t| sentence(t)).collect(),
            dropped_citations: vec![],
            uncited_sentences: vec![],
            sentences_cut_for_limit: 0,
            verified_citations: vec![],
        };
        let vacuum = GenerationRequest::new(
            "How do I reclaim space?",
            vec![passage("VACUUM reclaims storage occupied by dead tuples.")],
            WordLimit::IKAT,
        );
        let echo = "The tower is 330 metres tall.";
        let answer = assembled(&[echo, "VACUUM reclaims the storage of dead tuples."]);
        assert_eq!(g.prompt_echoes(&answer, &vacuum), vec![0]);
        match g.finish_llm(assembled(&[echo]), LlmCall::default(), &vacuum) {
            Err(f) => {
                assert_eq!(f.kind, FallbackKind::NoCitedSentence);
                assert!(
                    f.reason.ends_with("repeated the prompt's own example"),
                    "{}",
                    f.reason
                );
            }
            Ok(g) => panic!("the copied example was taken as an answer: {g:?}"),
        }
        // The same words are an answer when the passage says them.
        let tower = GenerationRequest::new(
            "How tall is the tower?",
            vec![passage("The tower is 330 metres tall and stands in Paris.")],
            WordLimit::IKAT,
        );
        assert!(g.prompt_echoes(&assembled(&[echo]), &tower).is_empty());
        assert!(g
            .finish_llm(assembled(&[echo]), LlmCall::default(), &tower)
            .is_ok());
    }
}
