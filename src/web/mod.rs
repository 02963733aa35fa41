//! What the HTTP adapters share (the JSON API under `/v1`, the OpenAI-compatible endpoints and
//! MCP): the state every handler reaches, the one mapping of errors to HTTP ([`error`]), request
//! bodies and bearer authentication ([`extract`]), and the request id.

pub mod deadline;
pub mod error;
pub mod extract;
pub mod schema;
pub mod sse;

use std::sync::Arc;

use crate::config::Config;
use crate::dense::VectorSearch;
use crate::index::background::DefaultCollection;
use crate::rerank::Reranker;
use crate::service::chat::ChatService;
use crate::service::conversations::ConversationService;
use crate::service::runs::RunService;
use crate::service::users::UserService;
use crate::service::{CollectionService, TurnService};
use crate::store::Store;

/// What every handler can reach.
pub struct AppState {
    pub store: Store,
    pub config: Arc<Config>,
    pub admin_token_digest: [u8; 32],
    /// Turns and searches: the pipeline built from the configuration and the model.
    pub turns: Arc<TurnService>,
    /// The collections users see, and uploads (sharing `turns`' open collections).
    pub collections: Arc<CollectionService>,
    /// Chat clients' conversations (OpenAI-compatible chat, MCP `ask`), over `turns`.
    pub chat: ChatService,
    /// Users' conversations, PTKB and profile statements.
    pub conversations: ConversationService,
    /// Accounts, tokens and authentication.
    pub users: UserService,
    /// Stored batch runs measured against uploaded judgments (the page's Runs view).
    pub runs: RunService,
    /// The collection `serve` builds in the background (listed with its progress meanwhile);
    /// new conversations without a collection use it.
    pub default_collection: Option<Arc<DefaultCollection>>,
}

impl AppState {
    /// State with the collections of `config.collections_dir()` and no reranking model.
    ///
    /// The LLM stages come from `config.llm`; an unusable LLM configuration is logged and left
    /// out (`serve` checks it first and refuses to start).
    pub fn new(store: Store, config: Arc<Config>, admin_token: &str) -> Self {
        use sha2::{Digest, Sha256};
        crate::service::turns::register_llm_series();
        error::register_error_series();
        let limited = store.clone().with_limits(config.limits.clone());
        let turns = Arc::new(turn_service(&config, &limited, None));
        let collections = collection_service(&store, &turns, &config);
        Self {
            users: UserService::new(limited.clone(), collections.clone()),
            collections,
            chat: chat_service(&limited, &turns, &config),
            conversations: ConversationService::new(limited.clone(), turns.clone()),
            runs: RunService::new(limited.clone()),
            store: limited,
            turns,
            config,
            admin_token_digest: Sha256::digest(admin_token.as_bytes()).into(),
            default_collection: None,
        }
    }

    /// Lists `default` (with its build's progress until it is ready) and makes it the
    /// collection of new conversations that name none.
    pub fn with_default_collection(mut self, default: Arc<DefaultCollection>) -> Self {
        self.turns.collections().set_preparing(default.clone());
        self.default_collection = Some(default);
        self.conversations = self.conversations_over_turns();
        self
    }

    /// The conversation service over the current turn service and default collection.
    fn conversations_over_turns(&self) -> ConversationService {
        let service = ConversationService::new(self.store.clone(), self.turns.clone());
        match &self.default_collection {
            Some(default) => service.with_default_collection(default.clone()),
            None => service,
        }
    }

    /// Uses `reranker` for searches and in the turn pipeline (reranking and PTKB ranking).
    pub fn with_reranker(self, reranker: Arc<dyn Reranker>) -> Self {
        self.with_models(reranker, None)
    }

    /// [`Self::with_reranker`] with a bi-encoder that also serves dense and hybrid retrieval
    /// over the collections that have passage vectors.
    pub fn with_vector_search(self, search: VectorSearch) -> Self {
        self.with_models(search.reranker(), Some(search))
    }

    fn with_models(mut self, reranker: Arc<dyn Reranker>, vectors: Option<VectorSearch>) -> Self {
        self.turns =
            Arc::new(turn_service(&self.config, &self.store, Some(reranker)).with_vectors(vectors));
        self.collections = collection_service(&self.store, &self.turns, &self.config);
        self.users = UserService::new(self.store.clone(), self.collections.clone());
        self.chat = chat_service(&self.store, &self.turns, &self.config);
        self.conversations = self.conversations_over_turns();
        self
    }
}

/// Chat over the turn service, with the plain-LLM model when an LLM is configured.
fn chat_service(store: &Store, turns: &Arc<TurnService>, config: &Config) -> ChatService {
    let chat = ChatService::new(store.clone(), turns.clone());
    match crate::llm::OpenAiClient::from_config(&config.llm) {
        Ok(Some(client)) => chat.with_llm(Arc::new(client)),
        Ok(None) => chat,
        Err(e) => {
            tracing::error!(error = %e, "the plain-LLM model is not served");
            chat
        }
    }
}

fn collection_service(
    store: &Store,
    turns: &TurnService,
    config: &Config,
) -> Arc<CollectionService> {
    Arc::new(
        CollectionService::new(store.clone(), turns.collections().clone(), config.uploads)
            .with_vectors(turns.vector_builds().cloned()),
    )
}

/// The server's turn service: the configured stages, turns stored in `store`, and every user's
/// rates limited.
fn turn_service(
    config: &Config,
    store: &Store,
    reranker: Option<Arc<dyn Reranker>>,
) -> TurnService {
    TurnService::from_config(config, reranker.clone())
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, "extractive answers only");
            let mut config = config.clone();
            config.llm.base_url = None;
            TurnService::from_config(&config, reranker).expect("no LLM endpoint, nothing to refuse")
        })
        .with_rate_limits(&config.limits)
        .with_store(store.clone())
}

/// The response header naming the request (also in the log lines of its failures).
pub const REQUEST_ID_HEADER: &str = "x-request-id";

tokio::task_local! {
    pub(crate) static REQUEST_ID: String;
}

/// The id of the request being handled, inside the API's request-id middleware.
pub fn current_request_id() -> Option<String> {
    REQUEST_ID.try_with(Clone::clone).ok()
}
