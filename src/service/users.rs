//! Users and their tokens, for every adapter: accounts (created by an administrator, deleted
//! with everything they own), tokens, the one-time sign-in link, and authentication.

use std::sync::Arc;

use super::{CollectionService, CollectionServiceError};
use chrono::{DateTime, Utc};

use crate::store::{Authenticated, NewToken, Store, StoreError, TokenInfo, User};

/// Errors of user requests.
#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Collections(#[from] CollectionServiceError),
}

pub type Result<T, E = UserError> = std::result::Result<T, E>;

/// Accounts and tokens.
#[derive(Clone)]
pub struct UserService {
    store: Store,
    collections: Arc<CollectionService>,
}

impl UserService {
    pub fn new(store: Store, collections: Arc<CollectionService>) -> Self {
        Self { store, collections }
    }

    /// The user a token names: unknown, expired, revoked, or a disabled user's token each
    /// refused with its own reason.
    pub async fn authenticate(&self, token: &str) -> Result<Authenticated> {
        Ok(self.store.authenticate_token(token).await?)
    }

    /// A new user with a first token (administrators only; the caller checks) that expires
    /// at the latest at `not_after`, when the creator's token does.
    pub async fn create(
        &self,
        name: &str,
        is_admin: bool,
        first_token: &NewToken,
        not_after: Option<DateTime<Utc>>,
    ) -> Result<(User, TokenInfo, String)> {
        Ok(self
            .store
            .create_user_with(name, is_admin, first_token, not_after)
            .await?)
    }

    /// Deletes the account and everything it owns: the rows at once, then the private
    /// collections' files (or, if that fails, the next start-up's sweep removes them).
    pub async fn delete_account(&self, user_id: i64) -> Result<()> {
        self.store.delete_user(user_id).await?;
        self.collections.delete_owner_files(user_id).await?;
        Ok(())
    }

    pub async fn set_disabled(&self, user_id: i64, disabled: bool) -> Result<User> {
        Ok(self.store.set_user_disabled(user_id, disabled).await?)
    }

    /// Another token for the same user, minted with the user's token `parent_id`: it expires at
    /// the latest at `not_after`, when that token does, and is revoked with it: a token never
    /// outlives the one that made it.
    pub async fn create_token(
        &self,
        user_id: i64,
        parent_id: i64,
        new: &NewToken,
        not_after: Option<DateTime<Utc>>,
    ) -> Result<(TokenInfo, String)> {
        Ok(self
            .store
            .create_child_token(user_id, parent_id, new, not_after)
            .await?)
    }

    /// The user's tokens that are not revoked (never the secrets).
    pub async fn tokens(&self, user_id: i64) -> Result<Vec<TokenInfo>> {
        Ok(self.store.list_tokens(user_id).await?)
    }

    /// Revokes the token and, in the same transaction, every token minted from it.
    pub async fn revoke_token(&self, user_id: i64, token_id: i64) -> Result<()> {
        Ok(self.store.revoke_token(user_id, token_id).await?)
    }

    /// Spends a one-time sign-in code: its user and a new token, or `None` when the code was
    /// used or has expired.
    pub async fn redeem_sign_in_code(&self, code: &str) -> Result<Option<(User, String)>> {
        Ok(self.store.redeem_sign_in_code(code).await?)
    }

    /// Whether the database answers.
    pub async fn database_ready(&self) -> bool {
        self.store.ping().await
    }
}
