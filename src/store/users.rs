//! Users and their API tokens. A token is shown once, at creation; only its SHA-256 is stored.
//! Tokens can be named, expire, and be revoked; a disabled user's tokens authenticate nobody.

use chrono::{DateTime, Duration, Utc};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{require_text, sqlstate, Result, Store, StoreError};

#[derive(Debug, Clone, Serialize, sqlx::FromRow, PartialEq, utoipa::ToSchema)]
pub struct User {
    pub id: i64,
    pub name: String,
    /// May use the administrator's routes (create, disable and enable users).
    pub is_admin: bool,
    /// When the user was disabled; their tokens are refused while it is set.
    pub disabled_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

const SELECT_USER: &str =
    "SELECT u.id, u.name, u.is_admin, u.disabled_at, u.created_at FROM users u";

/// Why a bearer token does not authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    #[error("unknown token")]
    Unknown,
    #[error("the token has expired")]
    Expired,
    #[error("the token has been revoked")]
    Revoked,
    #[error("the token's user is disabled")]
    UserDisabled,
}

/// A token as its owner may see it (never the secret).
#[derive(Debug, Clone, Serialize, sqlx::FromRow, PartialEq, utoipa::ToSchema)]
pub struct TokenInfo {
    pub id: i64,
    pub name: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
}

const TOKEN_COLUMNS: &str = "id, name, created_at, expires_at, last_used_at";

/// What a new token is given: a label and a lifetime. The lifetime is a duration, as
/// Kubernetes' `TokenRequest.expirationSeconds` is: its bounds are stated by the schema, where
/// an absolute time's (in the future, at most ten years ahead) could not be; the token's
/// `expires_at` is reported back.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// A label; surrounding whitespace is trimmed.
    #[schema(min_length = 1, max_length = 100, pattern = "NONBLANK")]
    pub name: Option<String>,
    /// Lifetime in seconds, at most ten years, and not past the expiry of the token making the
    /// request (default: it expires with that token, or never if that token does not expire).
    #[schema(minimum = 1, maximum = 316224000)]
    pub expires_in_seconds: Option<i64>,
}

/// Longest lifetime a token may be given (ten years).
const MAX_TOKEN_SECONDS: i64 = 10 * 366 * 24 * 3600;

impl NewToken {
    /// The expiry, checked against `now` and `not_after` (when the token making the request
    /// expires): a token never outlives the one that made it. Without a lifetime asked for, it
    /// expires with that token; an expiry later than that token's is refused.
    fn expiry(
        &self,
        now: DateTime<Utc>,
        not_after: Option<DateTime<Utc>>,
    ) -> Result<Option<DateTime<Utc>>> {
        let invalid = |message: String| StoreError::Invalid {
            field: "expires_in_seconds",
            message,
        };
        let asked = match self.expires_in_seconds {
            None => None,
            Some(secs) if !(1..=MAX_TOKEN_SECONDS).contains(&secs) => {
                return Err(invalid(
                    "must be between 1 and 316224000 (ten years)".to_string(),
                ))
            }
            Some(secs) => Some(now + Duration::seconds(secs)),
        };
        match (asked, not_after) {
            (None, limit) => Ok(limit),
            (Some(at), Some(limit)) if at > limit => Err(invalid(format!(
                "must not be later than {} (when the token making this request expires)",
                limit.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ))),
            (Some(at), _) => Ok(Some(at)),
        }
    }

    fn checked_name(&self) -> Result<Option<&str>> {
        match &self.name {
            Some(name) => {
                require_text("name", name, 100)?;
                Ok(Some(name.trim()))
            }
            None => Ok(None),
        }
    }
}

/// A user authenticated by a token, and when that token expires (`None`: never).
#[derive(Debug, Clone, PartialEq)]
pub struct Authenticated {
    pub user: User,
    pub token_id: i64,
    pub token_expires_at: Option<DateTime<Utc>>,
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

async fn insert_token(
    conn: &mut sqlx::PgConnection,
    user_id: i64,
    parent_id: Option<i64>,
    new: &NewToken,
    not_after: Option<DateTime<Utc>>,
) -> Result<(TokenInfo, String)> {
    let name = new.checked_name()?;
    let expires_at = new.expiry(Utc::now(), not_after)?;
    let token = generate_token();
    let info = sqlx::query_as(&format!(
        "INSERT INTO api_tokens (user_id, token_sha256, name, expires_at, parent_id) \
         VALUES ($1, $2, $3, $4, $5) RETURNING {TOKEN_COLUMNS}"
    ))
    .bind(user_id)
    .bind(token_digest(&token))
    .bind(name)
    .bind(expires_at)
    .bind(parent_id)
    .fetch_one(&mut *conn)
    .await?;
    Ok((info, token))
}

impl Store {
    /// Creates a user and its first token; returns the token in clear (never stored).
    pub async fn create_user(&self, name: &str) -> Result<(User, String)> {
        let (user, _, token) = self
            .create_user_with(name, false, &NewToken::default(), None)
            .await?;
        Ok((user, token))
    }

    /// Creates a user (an administrator when `is_admin`) and its first token, as `token` says,
    /// expiring at the latest at `not_after` (when the creator's token expires).
    pub async fn create_user_with(
        &self,
        name: &str,
        is_admin: bool,
        token: &NewToken,
        not_after: Option<DateTime<Utc>>,
    ) -> Result<(User, TokenInfo, String)> {
        require_text("name", name, 200)?;
        let name = name.trim();
        let mut tx = self.pool().begin().await?;
        let user: User = sqlx::query_as(
            "INSERT INTO users (name, is_admin) VALUES ($1, $2) \
             RETURNING id, name, is_admin, disabled_at, created_at",
        )
        .bind(name)
        .bind(is_admin)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| match sqlstate(&e).as_deref() {
            Some("23505") => StoreError::Conflict {
                field: "name",
                message: format!("a user named {name:?} already exists"),
            },
            _ => e.into(),
        })?;
        let (info, token) = insert_token(&mut tx, user.id, None, token, not_after).await?;
        tx.commit().await?;
        Ok((user, info, token))
    }

    /// Issues an additional token for an existing user.
    pub async fn create_token(&self, user_id: i64) -> Result<String> {
        Ok(self
            .create_token_with(user_id, &NewToken::default(), None)
            .await?
            .1)
    }

    /// Issues an additional token, named and expiring as `new` says, at the latest at
    /// `not_after` (when the token asking for it expires).
    pub async fn create_token_with(
        &self,
        user_id: i64,
        new: &NewToken,
        not_after: Option<DateTime<Utc>>,
    ) -> Result<(TokenInfo, String)> {
        // A transaction, so that through PgBouncer the insert runs on one server connection.
        let mut tx = self.pool().begin().await?;
        let issued = insert_token(&mut tx, user_id, None, new, not_after).await?;
        tx.commit().await?;
        Ok(issued)
    }

    /// As [`Store::create_token_with`], minted with the user's token `parent_id`: revoking that
    /// token revokes this one too.
    pub async fn create_child_token(
        &self,
        user_id: i64,
        parent_id: i64,
        new: &NewToken,
        not_after: Option<DateTime<Utc>>,
    ) -> Result<(TokenInfo, String)> {
        let mut tx = self.pool().begin().await?;
        let issued = insert_token(&mut tx, user_id, Some(parent_id), new, not_after).await?;
        tx.commit().await?;
        Ok(issued)
    }

    /// The user `token` authenticates, or why it does not.
    pub async fn authenticate(&self, token: &str) -> Result<User> {
        Ok(self.authenticate_token(token).await?.user)
    }

    /// The user `token` authenticates and when the token expires, or why it does not. Records
    /// when the token was last used (at most once a minute, so authentication stays a read
    /// almost always).
    pub async fn authenticate_token(&self, token: &str) -> Result<Authenticated> {
        #[derive(sqlx::FromRow)]
        struct Row {
            token_id: i64,
            token_expires_at: Option<DateTime<Utc>>,
            expired: bool,
            revoked: bool,
            stale_use: bool,
            #[sqlx(flatten)]
            user: User,
        }
        let row: Option<Row> = sqlx::query_as(
            "SELECT t.id AS token_id, t.expires_at AS token_expires_at, \
             coalesce(t.expires_at <= now(), false) AS expired, \
             t.revoked_at IS NOT NULL AS revoked, \
             coalesce(t.last_used_at < now() - interval '1 minute', true) AS stale_use, \
             u.id, u.name, u.is_admin, u.disabled_at, u.created_at \
             FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.token_sha256 = $1",
        )
        .bind(token_digest(token))
        .fetch_optional(self.auth_pool())
        .await?;
        let row = row.ok_or(StoreError::Unauthorized(AuthFailure::Unknown))?;
        let failure = if row.revoked {
            Some(AuthFailure::Revoked)
        } else if row.expired {
            Some(AuthFailure::Expired)
        } else if row.user.disabled_at.is_some() {
            Some(AuthFailure::UserDisabled)
        } else {
            None
        };
        if let Some(failure) = failure {
            return Err(StoreError::Unauthorized(failure));
        }
        if row.stale_use {
            sqlx::query("UPDATE api_tokens SET last_used_at = now() WHERE id = $1")
                .bind(row.token_id)
                .execute(self.auth_pool())
                .await?;
        }
        Ok(Authenticated {
            user: row.user,
            token_id: row.token_id,
            token_expires_at: row.token_expires_at,
        })
    }

    /// The user `token` authenticates, if any.
    pub async fn user_by_token(&self, token: &str) -> Result<Option<User>> {
        match self.authenticate(token).await {
            Ok(user) => Ok(Some(user)),
            Err(StoreError::Unauthorized(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub async fn user_by_name(&self, name: &str) -> Result<Option<User>> {
        let user = sqlx::query_as(&format!("{SELECT_USER} WHERE u.name = $1"))
            .bind(name)
            .fetch_optional(self.db())
            .await?;
        Ok(user)
    }

    /// Every user, oldest first.
    pub async fn list_users(&self) -> Result<Vec<User>> {
        let users = sqlx::query_as(&format!("{SELECT_USER} ORDER BY u.id"))
            .fetch_all(self.db())
            .await?;
        Ok(users)
    }

    /// Disables (their tokens are refused from now on) or enables a user.
    pub async fn set_user_disabled(&self, user_id: i64, disabled: bool) -> Result<User> {
        sqlx::query_as(
            "UPDATE users SET disabled_at = CASE WHEN $2 THEN coalesce(disabled_at, now()) END \
             WHERE id = $1 RETURNING id, name, is_admin, disabled_at, created_at",
        )
        .bind(user_id)
        .bind(disabled)
        .fetch_optional(self.db())
        .await?
        .ok_or(StoreError::NotFound { entity: "user" })
    }

    /// The user's tokens that still authenticate or may (not revoked), oldest first.
    pub async fn list_tokens(&self, user_id: i64) -> Result<Vec<TokenInfo>> {
        let tokens = sqlx::query_as(&format!(
            "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE user_id = $1 AND revoked_at IS NULL ORDER BY id"
        ))
        .bind(user_id)
        .fetch_all(self.db())
        .await?;
        Ok(tokens)
    }

    /// Revokes one of the user's tokens and every token minted from it, at any depth, in one
    /// statement (so one transaction); `NotFound` when it is not theirs or already revoked.
    pub async fn revoke_token(&self, user_id: i64, token_id: i64) -> Result<()> {
        // The root must be the user's and live; descendants already revoked keep their time
        // but are walked through, since their own children may still be live.
        let revoked: Vec<i64> = sqlx::query_scalar(
            "WITH RECURSIVE tree AS ( \
               SELECT id FROM api_tokens WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL \
               UNION \
               SELECT t.id FROM api_tokens t JOIN tree ON t.parent_id = tree.id \
             ) \
             UPDATE api_tokens SET revoked_at = now() \
             WHERE id IN (SELECT id FROM tree) AND revoked_at IS NULL RETURNING id",
        )
        .bind(token_id)
        .bind(user_id)
        .fetch_all(self.db())
        .await?;
        if !revoked.contains(&token_id) {
            return Err(StoreError::NotFound { entity: "token" });
        }
        Ok(())
    }

    /// Deletes the user and everything they own: tokens, conversations with their PTKB, turns
    /// and every row of those turns, profile statements, chat conversations, batch runs (every
    /// table refers to the user or their conversations with `ON DELETE CASCADE`), atomically.
    pub async fn delete_user(&self, user_id: i64) -> Result<()> {
        let mut tx = self.pool().begin().await?;
        // Waits for turns in flight (each holds its conversation's row lock until it commits).
        sqlx::query("SELECT id FROM conversations WHERE user_id = $1 ORDER BY id FOR UPDATE")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        // Turns first: their PTKB rankings point at statement versions without cascading, so
        // deleting the statements (by the cascade) while turns exist is refused.
        sqlx::query(
            "DELETE FROM turns WHERE conversation_id IN \
             (SELECT id FROM conversations WHERE user_id = $1)",
        )
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
        let result = sqlx::query("DELETE FROM users WHERE id = $1")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        if result.rows_affected() == 0 {
            return Err(StoreError::NotFound { entity: "user" });
        }
        tx.commit().await?;
        Ok(())
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

    #[test]
    fn token_expiry_is_validated() {
        let now = Utc::now();
        let field_of = |new: NewToken| match new.expiry(now, None).unwrap_err() {
            StoreError::Invalid { field, .. } => field,
            other => panic!("{other}"),
        };
        assert_eq!(NewToken::default().expiry(now, None).unwrap(), None);
        let in_an_hour = NewToken {
            expires_in_seconds: Some(3600),
            ..Default::default()
        };
        assert_eq!(
            in_an_hour.expiry(now, None).unwrap(),
            Some(now + Duration::seconds(3600))
        );
        for secs in [0, -5, MAX_TOKEN_SECONDS + 1] {
            let new = NewToken {
                expires_in_seconds: Some(secs),
                ..Default::default()
            };
            assert_eq!(field_of(new), "expires_in_seconds");
        }
    }

    #[test]
    fn a_token_never_outlives_the_token_that_made_it() {
        let now = Utc::now();
        let limit = now + Duration::seconds(3600);
        // Nothing asked: it expires with the creating token.
        assert_eq!(
            NewToken::default().expiry(now, Some(limit)).unwrap(),
            Some(limit)
        );
        let shorter = NewToken {
            expires_in_seconds: Some(60),
            ..Default::default()
        };
        assert_eq!(
            shorter.expiry(now, Some(limit)).unwrap(),
            Some(now + Duration::seconds(60))
        );
        let longer = NewToken {
            expires_in_seconds: Some(3601),
            ..Default::default()
        };
        match longer.expiry(now, Some(limit)).unwrap_err() {
            StoreError::Invalid { field, message } => {
                assert_eq!(field, "expires_in_seconds");
                assert!(message.contains("when the token making this request expires"));
            }
            other => panic!("{other}"),
        }
    }
}
