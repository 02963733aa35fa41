//! A user's conversations, their PTKB and the user's profile statements, for every adapter (the
//! JSON API, MCP): which collection a new or changed conversation may name, the default
//! collection for one that names none, and the owner filter on every read and write.

use std::sync::Arc;

use uuid::Uuid;

use super::{ServiceError, TurnService};
use crate::index::background::DefaultCollection;
use crate::index::IndexError;
use crate::store::idempotency::IdempotencyKey;
use crate::store::turns::Turn;
use crate::store::{
    Conversation, ConversationPatch, CreatedConversation, NewConversation, NewStatement,
    ProfileStatement, Statement, Store, StoreError,
};

/// Errors of conversation requests.
#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    /// The collection is none the user sees (another user's private one included).
    #[error("collection: no collection named {0:?}")]
    UnknownCollection(String),
    /// The collection name is not a valid name.
    #[error("collection: {0}")]
    InvalidCollection(#[source] IndexError),
    #[error(transparent)]
    Service(#[from] ServiceError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type Result<T, E = ConversationError> = std::result::Result<T, E>;

/// Conversations, PTKB statements and profile statements of the users.
#[derive(Clone)]
pub struct ConversationService {
    store: Store,
    turns: Arc<TurnService>,
    default_collection: Option<Arc<DefaultCollection>>,
}

impl ConversationService {
    pub fn new(store: Store, turns: Arc<TurnService>) -> Self {
        Self {
            store,
            turns,
            default_collection: None,
        }
    }

    /// New conversations that name no collection get `default`.
    pub fn with_default_collection(mut self, default: Arc<DefaultCollection>) -> Self {
        self.default_collection = Some(default);
        self
    }

    /// A conversation may name only a collection the user sees (a shared one or their own
    /// private one); any other name, another user's private collection included, is not found.
    async fn check_collection(&self, user_id: i64, name: &str) -> Result<()> {
        match self.turns.visible_retriever(Some(user_id), name).await {
            // The default collection being built: the conversation may name it already.
            Ok(_) | Err(ServiceError::Index(IndexError::Preparing { .. })) => Ok(()),
            Err(ServiceError::Index(IndexError::NotFound { .. })) => {
                Err(ConversationError::UnknownCollection(name.to_string()))
            }
            Err(ServiceError::Index(e @ IndexError::InvalidName(_))) => {
                Err(ConversationError::InvalidCollection(e))
            }
            Err(other) => Err(other.into()),
        }
    }

    /// Creates a conversation with its initial PTKB; with `key`, a retry answers with what the
    /// first request created (`true`).
    pub async fn create(
        &self,
        user_id: i64,
        mut new: NewConversation,
        key: Option<&IdempotencyKey>,
    ) -> Result<(CreatedConversation, bool)> {
        match &new.collection {
            Some(collection) => self.check_collection(user_id, collection).await?,
            None => {
                new.collection = self
                    .default_collection
                    .as_ref()
                    .map(|d| d.name().to_string())
            }
        }
        Ok(self
            .store
            .create_conversation_keyed(user_id, new, key)
            .await?)
    }

    pub async fn list(&self, user_id: i64) -> Result<Vec<Conversation>> {
        Ok(self.store.list_conversations(user_id).await?)
    }

    pub async fn get(&self, user_id: i64, id: Uuid) -> Result<Conversation> {
        Ok(self.store.conversation(user_id, id).await?)
    }

    /// Changes the title or the collection (checked as at creation).
    pub async fn update(
        &self,
        user_id: i64,
        id: Uuid,
        patch: ConversationPatch,
    ) -> Result<Conversation> {
        if let Some(Some(collection)) = &patch.collection {
            self.check_collection(user_id, collection).await?;
        }
        Ok(self.store.update_conversation(user_id, id, patch).await?)
    }

    pub async fn delete(&self, user_id: i64, id: Uuid) -> Result<()> {
        Ok(self.store.delete_conversation(user_id, id).await?)
    }

    /// The PTKB as turn `at_turn` saw it (`None`: as the next turn will).
    pub async fn ptkb(
        &self,
        user_id: i64,
        id: Uuid,
        at_turn: Option<i32>,
    ) -> Result<Vec<Statement>> {
        Ok(self.store.ptkb(user_id, id, at_turn).await?)
    }

    /// Every version of every statement.
    pub async fn ptkb_history(&self, user_id: i64, id: Uuid) -> Result<Vec<Statement>> {
        Ok(self.store.ptkb_history(user_id, id).await?)
    }

    pub async fn add_statement(
        &self,
        user_id: i64,
        id: Uuid,
        new: NewStatement,
    ) -> Result<Statement> {
        Ok(self.store.add_statement(user_id, id, new).await?)
    }

    pub async fn edit_statement(
        &self,
        user_id: i64,
        id: Uuid,
        statement_id: &str,
        text: &str,
    ) -> Result<Statement> {
        Ok(self
            .store
            .edit_statement(user_id, id, statement_id, text)
            .await?)
    }

    pub async fn remove_statement(&self, user_id: i64, id: Uuid, statement_id: &str) -> Result<()> {
        Ok(self
            .store
            .remove_statement(user_id, id, statement_id)
            .await?)
    }

    /// The turns of a conversation (every version with `all_versions`).
    pub async fn turns(&self, user_id: i64, id: Uuid, all_versions: bool) -> Result<Vec<Turn>> {
        Ok(self.store.list_turns(user_id, id, all_versions).await?)
    }

    pub async fn turn(&self, user_id: i64, id: Uuid, turn_id: Uuid) -> Result<Turn> {
        Ok(self.store.turn(user_id, id, turn_id).await?)
    }

    /// The user's profile: statements copied into every new conversation's PTKB.
    pub async fn profile(&self, user_id: i64) -> Result<Vec<ProfileStatement>> {
        Ok(self.store.profile_statements(user_id).await?)
    }

    pub async fn add_profile_statement(
        &self,
        user_id: i64,
        text: &str,
    ) -> Result<ProfileStatement> {
        Ok(self.store.add_profile_statement(user_id, text).await?)
    }

    pub async fn remove_profile_statement(&self, user_id: i64, id: i64) -> Result<()> {
        Ok(self.store.remove_profile_statement(user_id, id).await?)
    }
}
