//! Chat clients' conversations: which stored conversation a resent message history continues,
//! the chat turn (the server's default settings), and the answer rendered as text with `[n]`
//! markers. The OpenAI-compatible endpoint and the MCP `ask` tool are adapters over this.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::{RequestedSettings, ServiceError, SettingLimits, TurnRequest, TurnService};
use crate::index::IndexError;
use crate::llm::{ChatModel, ChatRequest, ChatResponse, LlmError, Usage};
use crate::pipeline::generate::{Fallback, LlmCall, Sampling};
use crate::pipeline::turn::TurnEvent;
use crate::store::{NewTurn, Store, StoreError, Turn, TurnSlot};

/// The generator recorded for turns imported from a chat client's history.
pub const IMPORTED: &str = "imported";

/// Errors of chat requests.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The model names no collection this user sees.
    #[error("model: the model {0:?} does not exist (GET /v1/models lists the collections)")]
    UnknownModel(String),
    /// The conversation the request names is not the user's.
    #[error("conversation_id: no such conversation")]
    UnknownConversation,
    /// The plain-LLM model was asked for, but no LLM is configured.
    #[error("model: no LLM is configured, so {PLAIN_LLM_MODEL:?} is not served")]
    NoLlm,
    /// The LLM failed to answer a plain-LLM request.
    #[error("the LLM failed: {0}")]
    Llm(#[source] LlmError),
    #[error(transparent)]
    Service(#[from] ServiceError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The model name of plain LLM completions: no retrieval, nothing stored. Chat apps point their
/// housekeeping ("task model": titles, tags, follow-up suggestions) at it.
pub const PLAIN_LLM_MODEL: &str = "convrag-llm";

/// One user message of a chat request with the assistant's reply that follows it, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatExchange {
    pub user: String,
    pub assistant: Option<String>,
}

/// What a chat request does in the conversation it continues.
pub enum ChatAction {
    /// Runs a new turn for the last user message.
    Next,
    /// The last user message is already the last stored turn and the request carries an
    /// `Idempotency-Key`: a retry, answered with that turn.
    Replay(Box<Turn>),
    /// The last user message is already the last stored turn and the request carries no key:
    /// the client asks for another answer, stored as a new version of that turn.
    Regenerate { seq: i32 },
}

/// What a chat request says about the conversation it continues.
#[derive(Clone, Copy)]
pub struct ChatTurnRequest<'a> {
    /// The user messages with the assistant's replies; the last one is the turn's.
    pub exchanges: &'a [ChatExchange],
    /// The conversation the request names, if any.
    pub explicit: Option<Uuid>,
    /// The request's system messages, joined: the conversation's instructions from now on.
    pub instructions: Option<&'a str>,
}

/// The conversation a chat request continues.
pub struct ResolvedChat {
    pub conversation_id: Uuid,
    pub action: ChatAction,
    /// Earlier exchanges of the request stored as imported turns (no stored conversation held
    /// them).
    pub imported: usize,
}

/// What a chat client asks of one turn's answer.
#[derive(Debug, Clone, Default)]
pub struct AnswerOptions {
    /// At most this many words (never more than the default limit).
    pub max_words: Option<usize>,
    /// Sampling parameters for the LLM, when it generates.
    pub sampling: Sampling,
}

/// Chat turns over the stored conversations.
#[derive(Clone)]
pub struct ChatService {
    store: Store,
    turns: Arc<TurnService>,
    llm: Option<Arc<dyn ChatModel>>,
}

impl ChatService {
    pub fn new(store: Store, turns: Arc<TurnService>) -> Self {
        Self {
            store,
            turns,
            llm: None,
        }
    }

    /// Serves [`PLAIN_LLM_MODEL`] through `llm`.
    pub fn with_llm(mut self, llm: Arc<dyn ChatModel>) -> Self {
        self.llm = Some(llm);
        self
    }

    /// Whether [`PLAIN_LLM_MODEL`] is served.
    pub fn has_llm(&self) -> bool {
        self.llm.is_some()
    }

    /// A plain completion of `request` by the configured LLM: no retrieval, nothing stored.
    pub async fn plain_completion(&self, request: &ChatRequest) -> Result<ChatResponse, ChatError> {
        let llm = self.llm.as_ref().ok_or(ChatError::NoLlm)?;
        llm.chat(request).await.map_err(ChatError::Llm)
    }

    /// The model must name a collection the user sees. Opens only that collection (kept open by
    /// the registry), not every one as listing them does: this runs on every chat request.
    pub async fn check_model(&self, user_id: i64, model: &str) -> Result<(), ChatError> {
        if model == PLAIN_LLM_MODEL {
            return if self.has_llm() {
                Ok(())
            } else {
                Err(ChatError::NoLlm)
            };
        }
        match self.turns.visible_retriever(Some(user_id), model).await {
            Ok(_) => Ok(()),
            Err(ServiceError::Index(IndexError::NotFound { .. } | IndexError::InvalidName(_))) => {
                Err(ChatError::UnknownModel(model.to_string()))
            }
            Err(other) => Err(other.into()),
        }
    }

    /// Refuses an utterance the store would refuse, before a conversation is looked up or
    /// created for it.
    pub fn check_utterance(&self, utterance: &str) -> Result<(), ServiceError> {
        TurnService::check_utterance(&self.store, utterance)
    }

    /// The conversation the request continues: the one `explicit` names, else the user's chat
    /// conversation with `model` whose current utterances are the earlier user messages (or all
    /// of them, a resent history), else a new one titled by the first message whose turns are
    /// the request's earlier exchanges, imported (an edited or branched history, a history from
    /// another app), so that rewriting and PTKB ranking see them. `instructions` (the request's
    /// system messages) become the conversation's; without them its own are kept.
    pub async fn resolve(
        &self,
        user_id: i64,
        model: &str,
        request: &ChatTurnRequest<'_>,
        keyed: bool,
    ) -> Result<ResolvedChat, ChatError> {
        let ChatTurnRequest {
            exchanges,
            explicit,
            instructions,
        } = *request;
        let utterances: Vec<String> = exchanges.iter().map(|e| e.user.clone()).collect();
        let earlier = &utterances[..utterances.len().saturating_sub(1)];
        let mut imported = 0;
        let (conversation_id, answered) = match explicit {
            Some(id) => {
                let stored =
                    self.store
                        .current_utterances(user_id, id)
                        .await
                        .map_err(|e| match e {
                            StoreError::NotFound { .. } => ChatError::UnknownConversation,
                            other => other.into(),
                        })?;
                (id, stored == utterances)
            }
            None => {
                let store = &self.store;
                if let Some(m) = store
                    .chat_conversation_with_turns(user_id, model, &utterances)
                    .await?
                {
                    (m.conversation_id, true)
                } else if let Some(m) = store
                    .chat_conversation_with_turns(user_id, model, earlier)
                    .await?
                {
                    (m.conversation_id, false)
                } else {
                    let title = title_of(utterances.first().map_or("", String::as_str));
                    let id = store
                        .create_chat_conversation(user_id, model, &title, instructions)
                        .await?;
                    let before_last = &exchanges[..exchanges.len().saturating_sub(1)];
                    imported = self.import(user_id, id, before_last).await?;
                    (id, false)
                }
            }
        };
        if let Some(instructions) = instructions {
            self.store
                .set_instructions(user_id, conversation_id, instructions)
                .await?;
        }
        let action = match answered {
            false => ChatAction::Next,
            true => {
                let turns = self
                    .store
                    .list_turns(user_id, conversation_id, false)
                    .await?;
                match turns.into_iter().last() {
                    None => ChatAction::Next,
                    Some(turn) if keyed => ChatAction::Replay(Box::new(turn)),
                    Some(turn) => ChatAction::Regenerate { seq: turn.seq },
                }
            }
        };
        Ok(ResolvedChat {
            conversation_id,
            action,
            imported,
        })
    }

    /// Stores `exchanges` as the conversation's first turns: the user's text as the utterance,
    /// the assistant's as the response; no stage runs for them.
    async fn import(
        &self,
        user_id: i64,
        conversation_id: Uuid,
        exchanges: &[ChatExchange],
    ) -> Result<usize, ChatError> {
        for exchange in exchanges {
            let turn = NewTurn {
                utterance: exchange.user.clone(),
                response_text: exchange.assistant.clone(),
                generator: Some(IMPORTED.to_string()),
                diagnostics: json!({ "imported": true }),
                ..NewTurn::default()
            };
            self.store
                .insert_turn(user_id, conversation_id, TurnSlot::Next, turn)
                .await?;
        }
        Ok(exchanges.len())
    }

    /// Runs one turn of the conversation with the server's default settings (the LLM when
    /// configured, reranking when a model is loaded) and stores it.
    pub async fn run_turn(
        &self,
        user_id: i64,
        conversation_id: Uuid,
        slot: TurnSlot,
        utterance: &str,
        options: AnswerOptions,
        on_event: &mut (dyn FnMut(TurnEvent<'_>) + Send),
    ) -> Result<Turn, ServiceError> {
        let defaults = self.turns.chat_defaults();
        // A client's bound shortens the answer; it never lengthens it past the default.
        let requested = RequestedSettings {
            max_words: options.max_words.map(|m| m.min(defaults.limit.max_words)),
            ..RequestedSettings::default()
        };
        let mut settings = self
            .turns
            .resolve(&requested, defaults, SettingLimits::API)?;
        settings.sampling = options.sampling;
        let request = TurnRequest::new(Some(utterance.to_string()), settings);
        let turn = self
            .turns
            .begin(&self.store, user_id, conversation_id, slot, request)
            .await?;
        turn.run(on_event).await
    }
}

/// A conversation's title from its first message: its first 80 characters.
pub fn title_of(first: &str) -> String {
    let line = first.lines().next().unwrap_or_default().trim();
    let mut title: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        title.push('…');
    }
    title
}

/// Who counted a chat answer's tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageCounter {
    /// The LLM's server: its own counts, summed over the turn's LLM calls.
    Llm,
    /// convrag, by [`count_tokens`] (extractive answers, and LLM calls whose server reported
    /// no counts).
    Rule,
}

impl UsageCounter {
    pub fn as_str(self) -> &'static str {
        match self {
            UsageCounter::Llm => "llm",
            UsageCounter::Rule => "rule",
        }
    }
}

/// A chat answer's token counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChatUsage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub counted_by: UsageCounter,
}

impl ChatUsage {
    pub fn total_tokens(&self) -> usize {
        self.prompt_tokens + self.completion_tokens
    }
}

/// What a stored turn's diagnostics say about its LLM calls.
#[derive(Deserialize, Default)]
#[serde(default)]
struct LlmCalls {
    llm: Option<LlmCall>,
    fallback: Option<Fallback>,
    rewrite_llm_output: Option<String>,
    rewrite_llm_usage: Option<Usage>,
}

/// The usage of a stored turn's answer: when the LLM wrote it, the LLM's own counts summed over
/// the turn's calls (rewrite and answer); otherwise, or when a call's server reported no counts
/// (a stream cut at the word limit ends before them), [`count_tokens`] of `content` with
/// `prompt_tokens_by_rule` for the request.
pub fn usage(turn: &Turn, content: &str, prompt_tokens_by_rule: usize) -> ChatUsage {
    usage_of(
        turn.generator.as_deref(),
        &turn.diagnostics,
        content,
        prompt_tokens_by_rule,
    )
}

/// [`usage`] from a turn's generator and diagnostics.
fn usage_of(
    generator: Option<&str>,
    diagnostics: &Value,
    content: &str,
    prompt_tokens_by_rule: usize,
) -> ChatUsage {
    let by_rule = ChatUsage {
        prompt_tokens: prompt_tokens_by_rule,
        completion_tokens: count_tokens(content),
        counted_by: UsageCounter::Rule,
    };
    let calls: LlmCalls = serde_json::from_value(diagnostics.clone()).unwrap_or_default();
    let llm_answered = generator.is_some_and(|g| g.starts_with("llm:")) && calls.fallback.is_none();
    let answer = calls.llm.and_then(|call| {
        Some(Usage {
            prompt_tokens: call.prompt_tokens?,
            completion_tokens: call.completion_tokens?,
        })
    });
    let rewrite = match (&calls.rewrite_llm_output, calls.rewrite_llm_usage) {
        (None, _) => Some(Usage::default()),
        (Some(_), counted) => counted,
    };
    match (llm_answered, answer, rewrite) {
        (true, Some(answer), Some(rewrite)) => {
            let sum = answer.plus(rewrite);
            ChatUsage {
                prompt_tokens: sum.prompt_tokens as usize,
                completion_tokens: sum.completion_tokens as usize,
                counted_by: UsageCounter::Llm,
            }
        }
        _ => by_rule,
    }
}

/// Tokens of a text by the rule chat usage counts with, whatever generated the text: each run
/// of letters and digits is one token, and so is each other character that is not white space
/// (`"It's 5 o'clock."` is `It ' s 5 o ' clock .`, 8 tokens).
pub fn count_tokens(text: &str) -> usize {
    let mut tokens = 0;
    let mut in_word = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if !in_word {
                tokens += 1;
                in_word = true;
            }
        } else {
            in_word = false;
            if !c.is_whitespace() {
                tokens += 1;
            }
        }
    }
    tokens
}

/// A sentence with its citation markers, placed before its final punctuation:
/// `"Lentils are quick [1][3]."`.
pub fn render_sentence(text: &str, ranks: &[i32]) -> String {
    let markers: String = ranks.iter().map(|r| format!("[{r}]")).collect();
    if markers.is_empty() {
        return text.to_string();
    }
    let trimmed = text.trim_end();
    match trimmed.char_indices().last() {
        Some((i, '.' | '!' | '?')) => {
            format!("{} {markers}{}", trimmed[..i].trim_end(), &trimmed[i..])
        }
        _ => format!("{trimmed} {markers}"),
    }
}

/// A turn's answer as chat clients receive it.
pub struct Answer {
    /// The sentences with their `[n]` markers.
    pub content: String,
    /// OpenAI `url_citation` annotations, one per marker (character offsets into `content`).
    pub annotations: Vec<Value>,
    /// The cited passages; `n` is the number in the markers.
    pub passages: Vec<Value>,
}

/// Where a passage can be found: its URL, or a `convrag:` reference when it has none.
fn passage_url(turn: &Turn, rank: i32) -> (String, String) {
    let passage = turn.passages.iter().find(|p| p.rank == rank);
    let url = passage
        .and_then(|p| p.url.clone())
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| {
            let (collection, id) = passage
                .map(|p| {
                    (
                        p.collection.clone().unwrap_or_default(),
                        p.passage_id.clone(),
                    )
                })
                .unwrap_or_default();
            format!("convrag:passage/{collection}/{id}")
        });
    let title = passage.and_then(|p| p.title.clone()).unwrap_or_default();
    (url, title)
}

/// A stored turn's answer: its sentences with markers, the annotations and the cited passages.
pub fn answer(turn: &Turn) -> Answer {
    let mut content = String::new();
    let mut annotations = Vec::new();
    let mut previous: Option<&[i32]> = None;
    let mut previous_block = false;
    for sentence in &turn.sentences {
        let block = crate::text::sentences::is_block(&sentence.text);
        if !content.is_empty() {
            content.push_str(if block || previous_block { "\n\n" } else { " " });
        }
        let rendered = if block {
            // A marker cannot follow a closing fence on its line; the sentence introducing the
            // block usually cites the same passage already.
            let cited_before =
                previous.is_some_and(|p| sentence.citations.iter().all(|c| p.contains(c)));
            let markers: String = sentence
                .citations
                .iter()
                .map(|r| format!("[{r}]"))
                .collect();
            if cited_before || markers.is_empty() {
                sentence.text.clone()
            } else {
                format!("{}\n\n{markers}", sentence.text)
            }
        } else {
            render_sentence(&sentence.text, &sentence.citations)
        };
        previous = Some(&sentence.citations);
        previous_block = block;
        let offset = content.chars().count();
        for rank in &sentence.citations {
            let marker = format!("[{rank}]");
            if let Some(byte) = rendered.find(&marker) {
                let start = offset + rendered[..byte].chars().count();
                let (url, title) = passage_url(turn, *rank);
                annotations.push(json!({"type": "url_citation", "url_citation": {
                    "start_index": start, "end_index": start + marker.chars().count(),
                    "url": url, "title": title}}));
            }
        }
        content.push_str(&rendered);
    }
    let passages = turn
        .passages
        .iter()
        .filter(|p| p.used)
        .map(|p| {
            json!({"n": p.rank, "passage_id": p.passage_id, "collection": p.collection,
                "title": p.title, "url": p.url, "text": p.text, "score": p.score})
        })
        .collect();
    Answer {
        content,
        annotations,
        passages,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_go_before_the_final_punctuation() {
        assert_eq!(
            render_sentence("Lentils are quick.", &[1, 3]),
            "Lentils are quick [1][3]."
        );
        assert_eq!(render_sentence("No stop", &[2]), "No stop [2]");
        assert_eq!(render_sentence("Uncited.", &[]), "Uncited.");
    }

    #[test]
    fn tokens_are_words_and_marks() {
        assert_eq!(count_tokens("It's 5 o'clock."), 8);
        assert_eq!(count_tokens("  "), 0);
        assert_eq!(count_tokens("Ünïcode wörds [1]"), 5);
    }

    #[test]
    fn usage_is_the_llms_summed_over_the_turns_calls_or_by_the_rule() {
        let llm = json!({"model": "m", "endpoint": "e", "streamed": true, "latency_ms": 5,
            "prompt_tokens": 300, "completion_tokens": 40, "raw_output": "x", "passages_shown": 3});
        let answered = json!({"llm": llm, "fallback": null, "words": 20});
        let counted = usage_of(Some("llm:m"), &answered, "Two words.", 9);
        assert_eq!(
            (counted.prompt_tokens, counted.completion_tokens),
            (300, 40)
        );
        assert_eq!(counted.counted_by, UsageCounter::Llm);
        assert_eq!(counted.total_tokens(), 340);
        // With the LLM rewriter's call.
        let mut rewritten = answered.clone();
        rewritten["rewrite_llm_output"] = json!("q");
        rewritten["rewrite_llm_usage"] = json!({"prompt_tokens": 50, "completion_tokens": 6});
        let counted = usage_of(Some("llm:m"), &rewritten, "Two words.", 9);
        assert_eq!(
            (counted.prompt_tokens, counted.completion_tokens),
            (350, 46)
        );
        // By the rule: extractive, the fallback, counts missing from a call.
        let rule = ChatUsage {
            prompt_tokens: 9,
            completion_tokens: 3,
            counted_by: UsageCounter::Rule,
        };
        assert_eq!(
            usage_of(Some("extractive"), &answered, "Two words.", 9),
            rule
        );
        let mut fell_back = answered.clone();
        fell_back["fallback"] =
            json!({"from": "llm:m", "kind": "no_cited_sentence", "reason": "r"});
        assert_eq!(
            usage_of(Some("extractive"), &fell_back, "Two words.", 9),
            rule
        );
        let mut cut = answered.clone();
        cut["llm"]["prompt_tokens"] = Value::Null;
        assert_eq!(usage_of(Some("llm:m"), &cut, "Two words.", 9), rule);
        rewritten["rewrite_llm_usage"] = Value::Null;
        assert_eq!(usage_of(Some("llm:m"), &rewritten, "Two words.", 9), rule);
        assert_eq!(
            usage_of(
                Some("imported"),
                &json!({"imported": true}),
                "Two words.",
                9
            ),
            rule
        );
    }

    #[test]
    fn titles_are_the_first_line_cut_at_80_characters() {
        assert_eq!(title_of("How do I index?\nmore"), "How do I index?");
        let long = "x".repeat(90);
        assert_eq!(title_of(&long), format!("{}…", "x".repeat(80)));
    }
}
