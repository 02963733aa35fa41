//! Chat clients' conversations: which stored conversation a resent message history continues,
//! the chat turn (the server's default settings), and the answer rendered as text with `[n]`
//! markers. The OpenAI-compatible endpoint and the MCP `ask` tool are adapters over this.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::input::{self, InvalidInput};
use super::{
    Admission, Begun, RequestedSettings, ServiceError, SettingLimits, StartedTurn, TurnRequest,
    TurnService,
};
use crate::config::Limits;
use crate::index::IndexError;
use crate::llm::{ChatModel, ChatRequest, ChatResponse, LlmError, Usage};
use crate::pipeline::generate::{Fallback, GenerationEvent, LlmCall, Sampling};
use crate::pipeline::turn::TurnEvent;
use crate::store::chat::ImportedTurn;
use crate::store::conversations::MAX_INSTRUCTIONS_CHARS;
use crate::store::{IdempotencyKey, KeyLookup, Store, StoreError, Turn, TurnSlot};

/// The generator recorded for turns imported from a chat client's history.
pub const IMPORTED: &str = crate::store::chat::IMPORTED_GENERATOR;

/// Errors of chat requests.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The model names no collection this user sees.
    #[error("model: the model {0:?} does not exist (GET /v1/models lists the collections)")]
    UnknownModel(String),
    /// The conversation the request names is not the user's.
    #[error("conversation_id: no such conversation")]
    UnknownConversation,
    /// A reference (an earlier response, its message) names none of the user's turns; `field`
    /// is where the request named it.
    #[error("{field}: no such response")]
    UnknownResponse { field: String },
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

impl From<InvalidInput> for ChatError {
    fn from(e: InvalidInput) -> Self {
        ChatError::Service(e.into())
    }
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

/// One message of a chat request as an adapter read it: its role and its text (text parts
/// joined), before any rule is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomingMessage {
    pub role: String,
    pub text: String,
}

/// A chat request's messages, checked: the exchanges (the last one is answered) and the
/// instructions its system messages give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatHistory {
    pub exchanges: Vec<ChatExchange>,
    pub instructions: Option<String>,
    /// User and assistant messages with text: a history of two or more may continue a stored
    /// conversation it matches; a single message starts a new one.
    pub conversational: usize,
}

impl ChatHistory {
    /// The utterance the request asks to answer.
    pub fn utterance(&self) -> &str {
        self.exchanges.last().map_or("", |e| e.user.as_str())
    }
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

/// What a chat request asks of the service.
pub struct ChatTurnRequest<'a> {
    pub history: &'a ChatHistory,
    /// The conversation the request names, if any.
    pub explicit: Option<Uuid>,
    /// The request's `Idempotency-Key`: a retry with it is answered with the stored turn.
    pub key: Option<IdempotencyKey>,
    pub options: AnswerOptions,
    /// The messages are the whole conversation as the client sees it (OpenAI chat clients
    /// resend it each time), so a history the stored one already ends with asks for its last
    /// answer anew; otherwise (MCP `ask`) the message is always a new turn.
    pub resends_history: bool,
}

/// Where a chat request's turn goes, decided without writing anything.
enum Target {
    /// A stored conversation; `answered`: its current utterances are all the request's.
    Existing { id: Uuid, answered: bool },
    /// A new conversation holding the request's earlier exchanges.
    New,
}

/// A chat request admitted: counted against the rate, its conversation created (provisionally)
/// or found, and its turn begun (the conversation's lease held) or found already stored.
/// Everything that can refuse the request has run; what is left is to answer.
pub struct AdmittedChat {
    pub conversation_id: Uuid,
    /// Earlier exchanges stored as imported turns of a new conversation.
    pub imported: usize,
    run: AdmittedRun,
    provisional: Option<ProvisionalChat>,
}

impl AdmittedChat {
    /// The answer is a stored turn (a retry): nothing runs, no stage reports events.
    pub fn is_stored(&self) -> bool {
        matches!(self.run, AdmittedRun::Stored(_))
    }

    /// The id of the turn that answers: the stored one, or the one being run.
    pub fn turn_id(&self) -> Uuid {
        match &self.run {
            AdmittedRun::Stored(turn) => turn.id,
            AdmittedRun::Started(started) => started.turn_id(),
        }
    }
}

enum AdmittedRun {
    Stored(Box<Turn>),
    Started(Box<StartedTurn>),
}

/// A conversation this request created, deleted unless its first turn is answered.
struct ProvisionalChat {
    store: Store,
    user_id: i64,
    conversation_id: Uuid,
    settled: bool,
}

impl ProvisionalChat {
    async fn discard(mut self) {
        self.settled = true;
        if let Err(e) = self
            .store
            .discard_provisional_chat(self.user_id, self.conversation_id)
            .await
        {
            tracing::warn!(error = %e, "a provisional chat conversation was not deleted");
        }
    }
}

impl Drop for ProvisionalChat {
    /// An abandoned request (the client went away mid-turn) deletes it too.
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (store, user_id, id) = (self.store.clone(), self.user_id, self.conversation_id);
            runtime.spawn(async move {
                let _ = store.discard_provisional_chat(user_id, id).await;
            });
        }
    }
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

    /// One of the user's stored turns by its id (an earlier response a request refers to in
    /// `field`).
    pub async fn stored_turn(
        &self,
        user_id: i64,
        turn_id: Uuid,
        field: &str,
    ) -> Result<Turn, ChatError> {
        self.store
            .turn_by_id(user_id, turn_id)
            .await
            .map_err(|e| match e {
                StoreError::NotFound { .. } => ChatError::UnknownResponse {
                    field: field.to_string(),
                },
                other => other.into(),
            })
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

    /// Checks every message of a request (no NUL in any role's text, each within
    /// `limits.message_chars`, at most `limits.chat_messages` of them, user messages non-blank
    /// utterances) and reads its exchanges and instructions. Fields are named as
    /// `messages[i].content`.
    pub fn read_history(&self, messages: &[IncomingMessage]) -> Result<ChatHistory, ChatError> {
        Ok(history_of(messages, self.store.limits())?)
    }

    /// Admits a chat request before any answer is sent: finds or creates its conversation,
    /// counts the new turn and every imported one against the turn rate, takes the
    /// conversation's lease. Every refusal (validation, rate, quota, a busy conversation) comes
    /// from here, with nothing stored: a conversation created for the request stays provisional
    /// until its first turn is answered, and is deleted when the turn is refused or fails.
    ///
    /// Which conversation: the one `explicit` names; else, for a history of two or more
    /// messages, the user's newest chat conversation with `model` whose current utterances are
    /// the request's user messages (a resent history: regenerate, or replay with a key) or all
    /// but the last (the next turn); else a new one whose first turns are the earlier
    /// exchanges, imported. A single message always starts a new conversation.
    pub async fn admit(
        &self,
        user_id: i64,
        model: &str,
        request: ChatTurnRequest<'_>,
    ) -> Result<AdmittedChat, ChatError> {
        let history = request.history;
        if let Some(key) = &request.key {
            if let KeyLookup::Stored(turn) =
                self.store.idempotent_result::<Turn>(user_id, key).await?
            {
                return Ok(AdmittedChat {
                    conversation_id: turn.conversation_id,
                    imported: 0,
                    run: AdmittedRun::Stored(Box::new(turn)),
                    provisional: None,
                });
            }
        }
        let target = self.target(user_id, model, &request).await?;
        let earlier = &history.exchanges[..history.exchanges.len().saturating_sub(1)];
        let (conversation_id, answered, provisional) = match target {
            Target::Existing { id, answered } => {
                if let Some(instructions) = &history.instructions {
                    self.store
                        .set_instructions(user_id, id, instructions)
                        .await?;
                }
                (id, answered, None)
            }
            Target::New => {
                let admission = self
                    .turns
                    .admit_turns(user_id, 1 + earlier.len(), "messages")?;
                self.store.sweep_provisional_chats(user_id).await?;
                let imported: Vec<ImportedTurn> = earlier
                    .iter()
                    .map(|e| ImportedTurn {
                        utterance: e.user.clone(),
                        response: e.assistant.clone(),
                    })
                    .collect();
                let title = title_of(history.exchanges.first().map_or("", |e| e.user.as_str()));
                let id = self
                    .store
                    .create_chat_conversation(
                        user_id,
                        model,
                        &title,
                        history.instructions.as_deref(),
                        &imported,
                    )
                    .await?;
                let provisional = ProvisionalChat {
                    store: self.store.clone(),
                    user_id,
                    conversation_id: id,
                    settled: false,
                };
                let begun = self
                    .begin(admission, user_id, id, TurnSlot::Next, &request)
                    .await;
                return match begun {
                    Ok(run) => Ok(AdmittedChat {
                        conversation_id: id,
                        imported: imported.len(),
                        run,
                        provisional: Some(provisional),
                    }),
                    Err(e) => {
                        provisional.discard().await;
                        Err(e)
                    }
                };
            }
        };
        let last = match answered {
            false => None,
            true => self
                .store
                .list_turns(user_id, conversation_id, false)
                .await?
                .into_iter()
                .last(),
        };
        let (slot, replay) = match last {
            None => (TurnSlot::Next, None),
            // A resent history with a key: the retry of the request that stored its last turn.
            Some(turn) if request.key.is_some() => (TurnSlot::Next, Some(turn)),
            Some(turn) => (TurnSlot::Regenerate { seq: turn.seq }, None),
        };
        let run = match replay {
            Some(turn) => AdmittedRun::Stored(Box::new(turn)),
            None => {
                let admission = self.turns.admit_turns(user_id, 1, "messages")?;
                self.begin(admission, user_id, conversation_id, slot, &request)
                    .await?
            }
        };
        Ok(AdmittedChat {
            conversation_id,
            imported: 0,
            run,
            provisional,
        })
    }

    /// Which conversation the request's turn goes to; nothing is written.
    async fn target(
        &self,
        user_id: i64,
        model: &str,
        request: &ChatTurnRequest<'_>,
    ) -> Result<Target, ChatError> {
        let history = request.history;
        let utterances: Vec<String> = history.exchanges.iter().map(|e| e.user.clone()).collect();
        if let Some(id) = request.explicit {
            let stored = self
                .store
                .current_utterances(user_id, id)
                .await
                .map_err(|e| match e {
                    StoreError::NotFound { .. } => ChatError::UnknownConversation,
                    other => other.into(),
                })?;
            return Ok(Target::Existing {
                id,
                answered: request.resends_history && stored == utterances,
            });
        }
        if history.conversational < 2 {
            return Ok(Target::New);
        }
        let store = &self.store;
        if let Some(m) = store
            .chat_conversation_with_turns(user_id, model, &utterances)
            .await?
        {
            return Ok(Target::Existing {
                id: m.conversation_id,
                answered: true,
            });
        }
        let earlier = &utterances[..utterances.len() - 1];
        if let Some(m) = store
            .chat_conversation_with_turns(user_id, model, earlier)
            .await?
        {
            return Ok(Target::Existing {
                id: m.conversation_id,
                answered: false,
            });
        }
        Ok(Target::New)
    }

    /// Begins the request's turn in `conversation_id` with the server's default settings (the
    /// LLM when configured, reranking when a model is loaded), recording its key.
    async fn begin(
        &self,
        admission: Admission,
        user_id: i64,
        conversation_id: Uuid,
        slot: TurnSlot,
        request: &ChatTurnRequest<'_>,
    ) -> Result<AdmittedRun, ChatError> {
        let turn_request = self.turn_request(request.history.utterance(), &request.options)?;
        let begun = self
            .turns
            .begin_admitted(
                admission,
                user_id,
                conversation_id,
                slot,
                turn_request,
                request.key.clone(),
            )
            .await?;
        let started = match begun {
            Begun::Replayed(turn) => return Ok(AdmittedRun::Stored(turn)),
            Begun::Started(started) => started,
        };
        Ok(AdmittedRun::Started(started))
    }

    /// The turn of a chat answer: the server's chat defaults, the client's word bound (which
    /// shortens the answer, never lengthens it past the default) and sampling.
    fn turn_request(
        &self,
        utterance: &str,
        options: &AnswerOptions,
    ) -> Result<TurnRequest, ChatError> {
        let defaults = self.turns.chat_defaults();
        let requested = RequestedSettings {
            max_words: options.max_words.map(|m| m.min(defaults.limit.max_words)),
            ..RequestedSettings::default()
        };
        let mut settings = self
            .turns
            .resolve(&requested, defaults, SettingLimits::API)
            .map_err(ServiceError::from)?;
        settings.sampling = options.sampling.clone();
        Ok(TurnRequest::new(Some(utterance.to_string()), settings))
    }

    /// Answers an admitted request: runs its turn (reporting each stage's events) and stores it;
    /// a stored turn is returned as it is. When the turn fails, a conversation the request
    /// created is deleted with its imported history.
    pub async fn answer(
        &self,
        admitted: AdmittedChat,
        on_event: &mut (dyn FnMut(TurnEvent<'_>) + Send),
    ) -> Result<Turn, ChatError> {
        let AdmittedChat {
            run, provisional, ..
        } = admitted;
        let mut started = match run {
            AdmittedRun::Stored(turn) => return Ok(*turn),
            AdmittedRun::Started(started) => started,
        };
        if provisional.is_some() {
            started.confirm_chat_on_commit();
        }
        match started.run(on_event).await {
            Ok(turn) => {
                if let Some(mut p) = provisional {
                    p.settled = true;
                }
                Ok(turn)
            }
            Err(e) => {
                if let Some(p) = provisional {
                    p.discard().await;
                }
                Err(e.into())
            }
        }
    }
}

/// [`ChatService::read_history`] within `limits`.
fn history_of(messages: &[IncomingMessage], limits: &Limits) -> input::Result<ChatHistory> {
    input::count("messages", messages.len(), limits.chat_messages)?;
    if !messages.iter().any(|m| m.role == "user") {
        return Err(InvalidInput::new(
            "messages",
            "needs a user message: the last one is answered",
        ));
    }
    let mut exchanges: Vec<ChatExchange> = Vec::new();
    let mut instructions = String::new();
    let mut conversational = 0;
    for (i, message) in messages.iter().enumerate() {
        let field = format!("messages[{i}].content");
        let text = message.text.as_str();
        input::text(&field, text, limits.message_chars)?;
        match message.role.as_str() {
            "user" => {
                if text.trim().is_empty() {
                    return Err(InvalidInput::new(field, "a user message needs text"));
                }
                input::text(&field, text, limits.utterance_chars)?;
                conversational += 1;
                exchanges.push(ChatExchange {
                    user: text.to_string(),
                    assistant: None,
                });
            }
            "assistant" if !text.trim().is_empty() => {
                conversational += 1;
                if let Some(previous) = exchanges.last_mut() {
                    let reply = previous.assistant.get_or_insert_with(String::new);
                    if !reply.is_empty() {
                        reply.push_str("\n\n");
                    }
                    reply.push_str(text.trim());
                }
            }
            "system" | "developer" if !text.trim().is_empty() => {
                if !instructions.is_empty() {
                    instructions.push_str("\n\n");
                }
                instructions.push_str(text.trim());
                if instructions.chars().count() > MAX_INSTRUCTIONS_CHARS {
                    return Err(InvalidInput::new(
                        field,
                        format!(
                            "the system messages become the conversation's instructions, which must be at most {MAX_INSTRUCTIONS_CHARS} characters"
                        ),
                    )
                    );
                }
            }
            _ => {}
        }
    }
    Ok(ChatHistory {
        exchanges,
        instructions: Some(instructions).filter(|i| !i.is_empty()),
        conversational,
    })
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

/// Citation markers as chat clients see them: `[1]`..`[n]`, numbered in order of first use,
/// whatever the passages' ranks (an answer citing ranks 2, 6 and 3 shows `[1]`, `[2]`, `[3]`).
#[derive(Debug, Clone, Default)]
pub struct CitationNumbers {
    /// Passage ranks, in order of first use: rank `ranks[i]` is marker `i + 1`.
    ranks: Vec<i32>,
}

impl CitationNumbers {
    /// The marker number of passage `rank`, assigning the next one on first use.
    pub fn number(&mut self, rank: i32) -> usize {
        match self.ranks.iter().position(|r| *r == rank) {
            Some(i) => i + 1,
            None => {
                self.ranks.push(rank);
                self.ranks.len()
            }
        }
    }

    /// The numbers of `ranks`, in their order.
    pub fn numbers(&mut self, ranks: &[i32]) -> Vec<i32> {
        ranks.iter().map(|r| self.number(*r) as i32).collect()
    }
}

/// The text pipeline events add to a streamed answer: each sentence with its markers
/// (numbered as the stored answer numbers them), separated by spaces; after a restart (the LLM
/// failed mid-answer) the fallback answer follows as a new paragraph, numbered afresh.
#[derive(Default)]
pub struct StreamedText {
    sent: usize,
    numbers: CitationNumbers,
}

impl StreamedText {
    pub fn text(&mut self, event: &TurnEvent<'_>) -> Option<String> {
        match event {
            TurnEvent::Generation(GenerationEvent::Sentence { sentence, .. }) => {
                let ranks: Vec<i32> = sentence.citations.iter().map(|c| *c as i32 + 1).collect();
                let text = render_sentence(&sentence.text, &self.numbers.numbers(&ranks));
                let text = if self.sent == 0 {
                    text
                } else {
                    format!(" {text}")
                };
                self.sent += 1;
                Some(text)
            }
            TurnEvent::Generation(GenerationEvent::Restart { .. }) => {
                *self = StreamedText::default();
                Some("\n\n".to_string())
            }
            _ => None,
        }
    }
}

/// A passage an answer cites, as chat clients receive it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CitedPassage {
    /// The number in the answer's markers.
    pub n: usize,
    /// Its rank in the turn's passages.
    pub rank: i32,
    pub passage_id: String,
    pub collection: Option<String>,
    pub title: Option<String>,
    /// Its URL when it has a real one (a web page); `None` otherwise.
    pub url: Option<String>,
    pub text: Option<String>,
    pub score: f64,
}

/// An OpenAI `url_citation` annotation: where the first marker of one cited passage stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Citation {
    /// Character offsets of the marker in the content.
    pub start_index: usize,
    pub end_index: usize,
    pub n: usize,
    pub url: Option<String>,
    pub title: String,
}

impl Citation {
    /// The annotation as OpenAI's chat completions write it.
    pub fn annotation(&self) -> Value {
        json!({"type": "url_citation", "url_citation": {
            "start_index": self.start_index, "end_index": self.end_index,
            "url": self.url, "title": self.title}})
    }
}

/// A turn's answer as chat clients receive it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The sentences with their `[n]` markers.
    pub content: String,
    /// One per cited passage, at its first marker.
    pub citations: Vec<Citation>,
    /// The cited passages, by their number.
    pub passages: Vec<CitedPassage>,
}

impl Answer {
    pub fn annotations(&self) -> Vec<Value> {
        self.citations.iter().map(Citation::annotation).collect()
    }

    /// A numbered list of the cited passages, for clients that drop annotations (empty when
    /// nothing is cited): `Sources:` then `[n] title, URL or passage id`, a line each.
    pub fn sources_text(&self) -> String {
        if self.passages.is_empty() {
            return String::new();
        }
        let mut text = String::from("\n\nSources:");
        for p in &self.passages {
            let title = p.title.as_deref().filter(|t| !t.trim().is_empty());
            let place = p.url.as_deref().unwrap_or(&p.passage_id);
            match title {
                Some(title) => text.push_str(&format!("\n[{}] {title}, {place}", p.n)),
                None => text.push_str(&format!("\n[{}] {place}", p.n)),
            }
        }
        text
    }
}

/// Where a cited passage without a web address can be opened: the chat page's view of it
/// (`{origin}/#/c/{conversation}/t/{turn}/p/{rank}`), so every citation a client shows leads
/// somewhere its user (signed in with the same token) can read the passage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageLinks {
    origin: String,
}

impl PageLinks {
    /// Links under `origin` (`http(s)://host[:port]`, as the client reached the server);
    /// `None` for anything else.
    pub fn new(origin: &str) -> Option<Self> {
        let origin = origin.trim_end_matches('/');
        let host = origin
            .strip_prefix("https://")
            .or_else(|| origin.strip_prefix("http://"))?;
        let plain = |c: char| c.is_ascii_alphanumeric() || ".-:[]".contains(c);
        (!host.is_empty() && host.chars().all(plain)).then(|| Self {
            origin: origin.to_string(),
        })
    }

    fn passage(&self, turn: &Turn, rank: i32) -> String {
        format!(
            "{}/#/c/{}/t/{}/p/{rank}",
            self.origin, turn.conversation_id, turn.id
        )
    }
}

/// How an adapter renders a turn's answer for its client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnswerStyle {
    /// The answer ends with its numbered sources (`convrag.sources: "text"`), for clients
    /// that drop annotations.
    pub sources_as_text: bool,
    /// Passages without a web address link to the page.
    pub links: Option<PageLinks>,
}

impl AnswerStyle {
    pub fn answer(&self, turn: &Turn) -> Answer {
        let mut answer = answer(turn, self.links.as_ref());
        if self.sources_as_text {
            answer.content.push_str(&answer.sources_text());
        }
        answer
    }
}

/// A passage's URL when it is one a client can open (`http(s)`); a blank or made-up one is
/// left out.
fn real_url(url: Option<&str>) -> Option<String> {
    url.map(str::trim)
        .filter(|u| u.starts_with("https://") || u.starts_with("http://"))
        .map(str::to_string)
}

/// A stored turn's answer: its sentences with markers numbered by [`CitationNumbers`], one
/// citation per cited passage, and the cited passages; a passage without a web address links
/// to the page when `links` is given.
pub fn answer(turn: &Turn, links: Option<&PageLinks>) -> Answer {
    let url = |p: &crate::store::turns::TurnPassage| {
        real_url(p.url.as_deref()).or_else(|| links.map(|l| l.passage(turn, p.rank)))
    };
    let mut numbers = CitationNumbers::default();
    let mut content = String::new();
    let mut citations: Vec<Citation> = Vec::new();
    let mut previous: Option<Vec<i32>> = None;
    let mut previous_block = false;
    for sentence in &turn.sentences {
        let block = crate::text::sentences::is_block(&sentence.text);
        let cited = numbers.numbers(&sentence.citations);
        if !content.is_empty() {
            content.push_str(if block || previous_block { "\n\n" } else { " " });
        }
        let rendered = if block {
            // A marker cannot follow a closing fence on its line; the sentence introducing the
            // block usually cites the same passage already.
            let cited_before = previous
                .as_ref()
                .is_some_and(|p| cited.iter().all(|c| p.contains(c)));
            let markers: String = cited.iter().map(|n| format!("[{n}]")).collect();
            if cited_before || markers.is_empty() {
                sentence.text.clone()
            } else {
                format!("{}\n\n{markers}", sentence.text)
            }
        } else {
            render_sentence(&sentence.text, &cited)
        };
        let offset = content.chars().count();
        for (&rank, &n) in sentence.citations.iter().zip(&cited) {
            let n = n as usize;
            if citations.iter().any(|c| c.n == n) {
                continue;
            }
            let marker = format!("[{n}]");
            if let Some(byte) = rendered.find(&marker) {
                let start = offset + rendered[..byte].chars().count();
                let passage = turn.passages.iter().find(|p| p.rank == rank);
                citations.push(Citation {
                    start_index: start,
                    end_index: start + marker.chars().count(),
                    n,
                    url: passage.and_then(url),
                    title: passage.and_then(|p| p.title.clone()).unwrap_or_default(),
                });
            }
        }
        previous = Some(cited);
        previous_block = block;
        content.push_str(&rendered);
    }
    let passages = numbers
        .ranks
        .iter()
        .enumerate()
        .filter_map(|(i, rank)| {
            let p = turn.passages.iter().find(|p| p.rank == *rank)?;
            Some(CitedPassage {
                n: i + 1,
                rank: p.rank,
                passage_id: p.passage_id.clone(),
                collection: p.collection.clone(),
                title: p.title.clone(),
                url: url(p),
                text: p.text.clone(),
                score: p.score,
            })
        })
        .collect();
    Answer {
        content,
        citations,
        passages,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(role: &str, text: &str) -> IncomingMessage {
        IncomingMessage {
            role: role.to_string(),
            text: text.to_string(),
        }
    }

    #[test]
    fn user_messages_are_read_in_order_with_their_replies_and_instructions() {
        let limits = Limits::default();
        let messages = [
            message("system", "be brief"),
            message("user", "a"),
            message("assistant", "b"),
            message("user", "c"),
        ];
        let read = history_of(&messages, &limits).unwrap();
        let users: Vec<&str> = read.exchanges.iter().map(|e| e.user.as_str()).collect();
        assert_eq!(users, ["a", "c"]);
        assert_eq!(read.exchanges[0].assistant.as_deref(), Some("b"));
        assert_eq!(read.exchanges[1].assistant, None);
        assert_eq!(read.instructions.as_deref(), Some("be brief"));
        assert_eq!((read.conversational, read.utterance()), (3, "c"));
        // A history that ends with the answer to its last user message asks for it anew.
        let again = history_of(&messages[..3], &limits).unwrap();
        assert_eq!(again.exchanges.len(), 1);
        assert_eq!(again.conversational, 2);
        let e = history_of(
            &[message("system", "x"), message("assistant", "b")],
            &limits,
        );
        assert_eq!(e.unwrap_err().field, "messages");
        let e = history_of(&[message("user", "  ")], &limits).unwrap_err();
        assert_eq!(e.field, "messages[0].content");
        assert_eq!(history_of(&[], &limits).unwrap_err().field, "messages");
    }

    #[test]
    fn every_role_is_checked_for_nul_and_length_and_the_count_is_bounded() {
        let limits = Limits {
            chat_messages: 3,
            message_chars: 10,
            utterance_chars: 5,
            ..Limits::default()
        };
        for (i, role) in ["system", "assistant", "tool"].into_iter().enumerate() {
            let mut messages = vec![message("user", "hi")];
            messages.insert(0, message(role, "a\0b"));
            let e = history_of(&messages, &limits).unwrap_err();
            assert_eq!(e.field, "messages[0].content", "{role} ({i})");
            assert!(e.reason.contains("NUL"), "{e}");
            messages[0] = message(role, &"x".repeat(11));
            let e = history_of(&messages, &limits).unwrap_err();
            assert!(e.reason.contains("at most 10 characters"), "{e}");
        }
        // A user message is an utterance: its own, shorter limit.
        let e = history_of(&[message("user", "sixsix")], &limits).unwrap_err();
        assert!(e.reason.contains("at most 5 characters"), "{e}");
        let four = vec![message("user", "a"); 4];
        let e = history_of(&four, &limits).unwrap_err();
        assert_eq!(e.field, "messages");
        assert!(history_of(&four[..3], &limits).is_ok());
    }

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
