//! Users and their API tokens. A token is shown once, at creation; only its SHA-256 is stored.

use chrono::{DateTime, Utc};
use rand::RngCore;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{require_text, sqlstate, Result, Store, StoreError};

#[derive(Debug, Clone, Serialize, sqlx::FromRow, PartialEq)]
pub struct User {
    pub id: i64,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

/// Tokens look like `cvr_` followed by 64 hex digits (256 random bits).
pub fn generate_token() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("cvr_{}", hex::encode(bytes))
}

pub fn token_digest(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

impl Store {
    /// Creates a user and its first token; returns the token in clear (never stored).
    pub async fn create_user(&self, name: &str) -> Result<(User, String)> {
        require_text("name", name, 200)?;
        let name = name.trim();
        let mut tx = self.pool().begin().await?;
        let user: User =
            sqlx::query_as("INSERT INTO users (name) VALUES ($1) RETURNING id, name, created_at")
                .bind(name)
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| match sqlstate(&e).as_deref() {
                    Some("23505") => StoreError::Conflict {
                        field: "name",
                        message: format!("a user named {name:?} already exists"),
                    },
                    _ => e.into(),
                })?;
        let token = generate_token();
        sqlx::query("INSERT INTO api_tokens (user_id, token_sha256) VALUES ($1, $2)")
            .bind(user.id)
            .bind(token_digest(&token))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok((user, token))
    }

    /// Issues an additional token for an existing user.
    pub async fn create_token(&self, user_id: i64) -> Result<String> {
        let token = generate_token();
        sqlx::query("INSERT INTO api_tokens (user_id, token_sha256) VALUES ($1, $2)")
            .bind(user_id)
            .bind(token_digest(&token))
            .execute(self.db())
            .await?;
        Ok(token)
    }

    /// The user owning `token`, if any.
    pub async fn user_by_token(&self, token: &str) -> Result<Option<User>> {
        let user = sqlx::query_as(
            "SELECT u.id, u.name, u.created_at FROM api_tokens t JOIN users u ON u.id = t.user_id \
             WHERE t.token_sha256 = $1",
        )
        .bind(token_digest(token))
        .fetch_optional(self.auth_pool())
        .await?;
        Ok(user)
    }

    pub async fn user_by_name(&self, name: &str) -> Result<Option<User>> {
        let user = sqlx::query_as("SELECT id, name, created_at FROM users WHERE name = $1")
            .bind(name)
            .fetch_optional(self.db())
            .await?;
        Ok(user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_and_hashed() {
        let a = generate_token();
        let b = generate_token();
        assert_ne!(a, b);
        assert_eq!(a.len(), 4 + 64);
        assert_eq!(token_digest(&a).len(), 32);
        assert_ne!(token_digest(&a), token_digest(&b));
    }
}
