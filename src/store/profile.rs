//! Profile statements: statements about a user kept per user, copied into the PTKB of every
//! conversation the user creates afterwards.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::ptkb::NewStatement;
use super::{count_of, require_text, Result, Store, StoreError};

/// One statement of a user's profile.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, PartialEq, utoipa::ToSchema)]
pub struct ProfileStatement {
    pub id: i64,
    pub text: String,
    pub created_at: DateTime<Utc>,
}

/// The user's profile statements, oldest first, as the PTKB of a new conversation takes them.
pub(crate) async fn profile_as_ptkb(
    conn: &mut sqlx::PgConnection,
    user_id: i64,
) -> Result<Vec<NewStatement>> {
    let texts: Vec<String> =
        sqlx::query_scalar("SELECT text FROM profile_statements WHERE user_id = $1 ORDER BY id")
            .bind(user_id)
            .fetch_all(&mut *conn)
            .await?;
    Ok(texts
        .into_iter()
        .map(|text| NewStatement { id: None, text })
        .collect())
}

impl Store {
    /// The user's profile statements, oldest first.
    pub async fn profile_statements(&self, user_id: i64) -> Result<Vec<ProfileStatement>> {
        let rows = sqlx::query_as(
            "SELECT id, text, created_at FROM profile_statements WHERE user_id = $1 ORDER BY id",
        )
        .bind(user_id)
        .fetch_all(self.db())
        .await?;
        Ok(rows)
    }

    /// Adds a statement to the user's profile (used by conversations created from now on).
    pub async fn add_profile_statement(
        &self,
        user_id: i64,
        text: &str,
    ) -> Result<ProfileStatement> {
        let limits = self.limits();
        require_text("text", text, limits.statement_chars)?;
        let mut tx = self.pool().begin().await?;
        // Serializes concurrent additions of one user so the limit holds.
        sqlx::query("SELECT id FROM users WHERE id = $1 FOR UPDATE")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        let count: i64 =
            sqlx::query_scalar("SELECT count(*) FROM profile_statements WHERE user_id = $1")
                .bind(user_id)
                .fetch_one(&mut *tx)
                .await?;
        // Every new conversation's PTKB takes the profile, so it obeys the same count.
        let max = limits.statements_per_conversation;
        if usize::try_from(count).unwrap_or(usize::MAX) >= max {
            return Err(StoreError::QuotaExceeded {
                field: "text",
                message: format!(
                    "your profile holds {}, the most it may hold (remove some first)",
                    count_of(usize::try_from(count).unwrap_or(0), "statement")
                ),
            });
        }
        let row = sqlx::query_as(
            "INSERT INTO profile_statements (user_id, text) VALUES ($1, $2) \
             RETURNING id, text, created_at",
        )
        .bind(user_id)
        .bind(text.trim())
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(row)
    }

    /// Removes one of the user's profile statements; `NotFound` when it is not theirs.
    pub async fn remove_profile_statement(&self, user_id: i64, id: i64) -> Result<()> {
        let result = sqlx::query("DELETE FROM profile_statements WHERE user_id = $1 AND id = $2")
            .bind(user_id)
            .bind(id)
            .execute(self.db())
            .await?;
        if result.rows_affected() == 0 {
            return Err(StoreError::NotFound {
                entity: "profile statement",
            });
        }
        Ok(())
    }
}
