//! One-time sign-in codes for the first user of a fresh server.
//!
//! On a fresh server `serve` creates the first user and prints a local link carrying a code; the
//! chat page exchanges the code once for an API token (`POST /v1/sign-in`). A code works once
//! and for a day; only its SHA-256 is stored. While the first user has never used a code, each
//! start prints a fresh link (and voids the older ones); afterwards, none.

use chrono::{DateTime, Utc};

use super::users::{generate_token, token_digest, User};
use super::{Result, Store};

/// How long a printed sign-in link works.
pub const SIGN_IN_CODE_HOURS: i64 = 24;

/// Name of the user created on a fresh server.
pub const FIRST_USER_NAME: &str = "me";

/// A link's code for the first user, as `serve` prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct FirstSignIn {
    pub user: User,
    /// Created just now (the server had no user).
    pub created: bool,
    pub code: String,
    pub expires_at: DateTime<Utc>,
}

/// Codes look like `sic_` and 64 hex digits (256 random bits).
fn generate_code() -> String {
    format!("sic_{}", &generate_token()[4..])
}

impl Store {
    /// The first user's sign-in code: creates the user when the server has none, and issues a
    /// code while that only user has never signed in with one. `None` once it has, or when other
    /// users exist (an administrator manages them).
    pub async fn first_user_sign_in(&self) -> Result<Option<FirstSignIn>> {
        let mut tx = self.pool().begin().await?;
        // Two servers starting on one database issue one user, not two.
        sqlx::query("LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE")
            .execute(&mut *tx)
            .await?;
        let users: Vec<User> = sqlx::query_as(
            "SELECT id, name, is_admin, disabled_at, created_at FROM users ORDER BY id LIMIT 2",
        )
        .fetch_all(&mut *tx)
        .await?;
        let (user, created) = match users.as_slice() {
            [] => {
                let user: User = sqlx::query_as(
                    "INSERT INTO users (name) VALUES ($1) RETURNING id, name, is_admin, disabled_at, created_at",
                )
                .bind(FIRST_USER_NAME)
                .fetch_one(&mut *tx)
                .await?;
                (user, true)
            }
            [only] => (only.clone(), false),
            _ => return Ok(None),
        };
        let used: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM sign_in_codes WHERE user_id = $1 AND used_at IS NOT NULL)",
        )
        .bind(user.id)
        .fetch_one(&mut *tx)
        .await?;
        if used {
            return Ok(None);
        }
        sqlx::query("DELETE FROM sign_in_codes WHERE user_id = $1")
            .bind(user.id)
            .execute(&mut *tx)
            .await?;
        let code = generate_code();
        let expires_at: DateTime<Utc> = sqlx::query_scalar(
            "INSERT INTO sign_in_codes (user_id, code_sha256, expires_at) \
             VALUES ($1, $2, now() + make_interval(hours => $3)) RETURNING expires_at",
        )
        .bind(user.id)
        .bind(token_digest(&code))
        .bind(SIGN_IN_CODE_HOURS as i32)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(FirstSignIn {
            user,
            created,
            code,
            expires_at,
        }))
    }

    /// Exchanges a sign-in code for a new API token of its user; `None` when the code is
    /// unknown, used or expired. The code is spent in the same transaction that issues the
    /// token, so two requests with one code get one token.
    pub async fn redeem_sign_in_code(&self, code: &str) -> Result<Option<(User, String)>> {
        let mut tx = self.pool().begin().await?;
        let user: Option<User> = sqlx::query_as(
            "WITH spent AS (UPDATE sign_in_codes SET used_at = now() \
               WHERE code_sha256 = $1 AND used_at IS NULL AND expires_at > now() \
               RETURNING user_id) \
             SELECT u.id, u.name, u.is_admin, u.disabled_at, u.created_at FROM spent JOIN users u ON u.id = spent.user_id",
        )
        .bind(token_digest(code))
        .fetch_optional(&mut *tx)
        .await?;
        let Some(user) = user else {
            return Ok(None);
        };
        let token = generate_token();
        sqlx::query("INSERT INTO api_tokens (user_id, token_sha256) VALUES ($1, $2)")
            .bind(user.id)
            .bind(token_digest(&token))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some((user, token)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_long_random_and_distinct_from_tokens() {
        let a = generate_code();
        assert!(a.starts_with("sic_"));
        assert_eq!(a.len(), 4 + 64);
        assert_ne!(a, generate_code());
    }
}
