//! Conversations, each owned by one user.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::idempotency::{self, IdempotencyKey, KeyLookup};
use super::lease::lock_owned;
use super::ptkb::{insert_statements, NewStatement};
use super::{sqlstate, Result, Store, StoreError};
use crate::config::Limits;

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow, PartialEq, utoipa::ToSchema)]
pub struct Conversation {
    pub id: Uuid,
    pub title: String,
    pub external_id: Option<String>,
    pub collection: Option<String>,
    /// What every answer should follow (a chat client's system message); the LLM generator's
    /// prompt carries them, the extractive generator cannot follow them.
    pub instructions: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Number of current (non-regenerated) turns.
    pub turn_count: i64,
    /// Number of PTKB statements visible to the next turn.
    pub ptkb_count: i64,
}

/// A conversation as created, with the PTKB its first turn will see (`POST /v1/conversations`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CreatedConversation {
    pub conversation: Conversation,
    pub ptkb: Vec<super::Statement>,
}

#[derive(Debug, Clone, Default)]
pub struct NewConversation {
    pub title: String,
    pub external_id: Option<String>,
    pub collection: Option<String>,
    pub instructions: Option<String>,
    pub ptkb: Vec<NewStatement>,
}

#[derive(Debug, Clone, Default)]
pub struct ConversationPatch {
    pub title: Option<String>,
    pub collection: Option<Option<String>>,
    /// `Some(None)` clears them.
    pub instructions: Option<Option<String>>,
}

/// The longest instructions a conversation keeps (also a CHECK of the column).
pub const MAX_INSTRUCTIONS_CHARS: usize = 4000;

pub(super) const SELECT_CONVERSATION: &str = "SELECT c.id, c.title, c.external_id, c.collection, c.instructions, c.created_at, c.updated_at, \
       (SELECT count(*) FROM turns t WHERE t.conversation_id = c.id AND t.is_current) AS turn_count, \
       (SELECT count(*) FROM ptkb_statements p WHERE p.conversation_id = c.id AND p.hidden_from_seq IS NULL) AS ptkb_count \
     FROM conversations c";

async fn conversation_in(
    tx: &mut sqlx::PgConnection,
    user_id: i64,
    id: Uuid,
) -> Result<Conversation> {
    sqlx::query_as(&format!(
        "{SELECT_CONVERSATION} WHERE c.user_id = $1 AND c.id = $2"
    ))
    .bind(user_id)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(StoreError::NotFound {
        entity: "conversation",
    })
}

pub(crate) fn validate_collection(name: &str) -> Result<()> {
    super::require_identifier("collection", name, 100)
}

/// Instructions must not be blank (clearing them is `null`) nor longer than
/// [`MAX_INSTRUCTIONS_CHARS`].
pub(crate) fn validate_instructions(instructions: &str) -> Result<()> {
    super::require_text("instructions", instructions, MAX_INSTRUCTIONS_CHARS)
}

fn validate_title(title: &str) -> Result<()> {
    if title.chars().count() > 500 {
        return Err(StoreError::Invalid {
            field: "title",
            message: "must be at most 500 characters".to_string(),
        });
    }
    Ok(())
}

/// Refuses a new conversation when the user keeps the most allowed (429). Locks the user's row so
/// concurrent creations of one user count one after the other.
async fn check_conversation_count(
    tx: &mut sqlx::PgConnection,
    limits: &Limits,
    user_id: i64,
) -> Result<()> {
    let max = limits.conversations_per_user;
    if max == usize::MAX {
        return Ok(());
    }
    sqlx::query("SELECT id FROM users WHERE id = $1 FOR UPDATE")
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM conversations WHERE user_id = $1")
        .bind(user_id)
        .fetch_one(&mut *tx)
        .await?;
    if usize::try_from(count).unwrap_or(usize::MAX) >= max {
        return Err(StoreError::QuotaExceeded {
            field: "conversations",
            message: format!(
                "you keep {}, the most allowed (delete some first)",
                super::count_of(usize::try_from(count).unwrap_or(0), "conversation")
            ),
        });
    }
    Ok(())
}

impl Store {
    /// Creates a conversation with its initial PTKB, atomically.
    pub async fn create_conversation(
        &self,
        user_id: i64,
        new: NewConversation,
    ) -> Result<Conversation> {
        let (created, _) = self.create_conversation_keyed(user_id, new, None).await?;
        Ok(created.conversation)
    }

    /// As [`Store::create_conversation`], recording the result under `key` in the same
    /// transaction; `true` with the conversation an earlier request with the same key and body
    /// created (nothing new is stored).
    pub async fn create_conversation_keyed(
        &self,
        user_id: i64,
        new: NewConversation,
        key: Option<&IdempotencyKey>,
    ) -> Result<(CreatedConversation, bool)> {
        let id = Uuid::new_v4();
        let mut tx = self.pool().begin().await?;
        if let Some(key) = key {
            if let KeyLookup::Stored(earlier) =
                idempotency::find(&mut tx, self, user_id, key).await?
            {
                return Ok((earlier, true));
            }
        }
        insert_conversation(&mut tx, self.limits(), user_id, id, &new).await?;
        // Read before committing: once the commit lands, the answer needs no more database work.
        let created = CreatedConversation {
            conversation: conversation_in(&mut tx, user_id, id).await?,
            ptkb: super::ptkb::visible_at(&mut tx, id, 1).await?,
        };
        if let Some(key) = key {
            if let Some(earlier) =
                idempotency::record(&mut tx, self, user_id, key, id, &created).await?
            {
                return Ok((earlier, true)); // dropping `tx` rolls this one back
            }
        }
        tx.commit().await?;
        Ok((created, false))
    }

    /// The user's conversations, newest first.
    pub async fn list_conversations(&self, user_id: i64) -> Result<Vec<Conversation>> {
        let rows = sqlx::query_as(&format!(
            "{SELECT_CONVERSATION} WHERE c.user_id = $1 ORDER BY c.created_at DESC, c.id"
        ))
        .bind(user_id)
        .fetch_all(self.db())
        .await?;
        Ok(rows)
    }

    /// One conversation of the user; `NotFound` when absent or owned by someone else.
    pub async fn conversation(&self, user_id: i64, id: Uuid) -> Result<Conversation> {
        sqlx::query_as(&format!(
            "{SELECT_CONVERSATION} WHERE c.user_id = $1 AND c.id = $2"
        ))
        .bind(user_id)
        .bind(id)
        .fetch_optional(self.db())
        .await?
        .ok_or(StoreError::NotFound {
            entity: "conversation",
        })
    }

    /// A conversation by the user's external id (e.g. an iKAT topic number).
    pub async fn conversation_by_external_id(
        &self,
        user_id: i64,
        external_id: &str,
    ) -> Result<Option<Conversation>> {
        let row = sqlx::query_as(&format!(
            "{SELECT_CONVERSATION} WHERE c.user_id = $1 AND c.external_id = $2"
        ))
        .bind(user_id)
        .bind(external_id)
        .fetch_optional(self.db())
        .await?;
        Ok(row)
    }

    pub async fn update_conversation(
        &self,
        user_id: i64,
        id: Uuid,
        patch: ConversationPatch,
    ) -> Result<Conversation> {
        if let Some(title) = &patch.title {
            validate_title(title)?;
        }
        if let Some(Some(collection)) = &patch.collection {
            validate_collection(collection)?;
        }
        if let Some(Some(instructions)) = &patch.instructions {
            validate_instructions(instructions)?;
        }
        let result = sqlx::query(
            "UPDATE conversations SET \
               title = COALESCE($3, title), \
               collection = CASE WHEN $4 THEN $5 ELSE collection END, \
               instructions = CASE WHEN $6 THEN $7 ELSE instructions END, \
               updated_at = now() \
             WHERE user_id = $1 AND id = $2",
        )
        .bind(user_id)
        .bind(id)
        .bind(patch.title.as_deref().map(str::trim))
        .bind(patch.collection.is_some())
        .bind(patch.collection.clone().flatten())
        .bind(patch.instructions.is_some())
        .bind(
            patch
                .instructions
                .clone()
                .flatten()
                .as_deref()
                .map(str::trim),
        )
        .execute(self.db())
        .await?;
        if result.rows_affected() == 0 {
            return Err(StoreError::NotFound {
                entity: "conversation",
            });
        }
        self.conversation(user_id, id).await
    }

    /// Deletes a conversation with its PTKB and turns (after a running turn of it ends).
    pub async fn delete_conversation(&self, user_id: i64, id: Uuid) -> Result<()> {
        self.when_free(|| self.delete_conversation_now(user_id, id))
            .await
    }

    async fn delete_conversation_now(&self, user_id: i64, id: Uuid) -> Result<()> {
        let mut tx = self.pool().begin().await?;
        lock_owned(&mut tx, user_id, id).await?;
        // Turns first: their PTKB rankings point at statement versions without cascading, so
        // deleting the statements (by the conversation's cascade) while turns exist is refused.
        sqlx::query("DELETE FROM turns WHERE conversation_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM conversations WHERE user_id = $1 AND id = $2")
            .bind(user_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}

/// Writes a new conversation `id` of `user_id` in `tx`: checked, counted against the user's
/// quota, with its given PTKB and the user's profile as statements.
pub(crate) async fn insert_conversation(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    limits: &crate::config::Limits,
    user_id: i64,
    id: Uuid,
    new: &NewConversation,
) -> Result<()> {
    validate_title(&new.title)?;
    if let Some(external_id) = &new.external_id {
        super::require_text("external_id", external_id, 200)?;
    }
    if let Some(collection) = &new.collection {
        validate_collection(collection)?;
    }
    if let Some(instructions) = &new.instructions {
        validate_instructions(instructions)?;
    }
    check_conversation_count(&mut *tx, limits, user_id).await?;
    sqlx::query(
        "INSERT INTO conversations (id, user_id, title, external_id, collection, instructions) \
             VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(id)
    .bind(user_id)
    .bind(new.title.trim())
    .bind(new.external_id.as_deref().map(str::trim))
    .bind(&new.collection)
    .bind(new.instructions.as_deref().map(str::trim))
    .execute(&mut **tx)
    .await
    .map_err(|e| match sqlstate(&e).as_deref() {
        Some("23505") => StoreError::Conflict {
            field: "external_id",
            message: format!(
                "you already have a conversation with external id {:?}",
                new.external_id.as_deref().unwrap_or_default()
            ),
        },
        _ => e.into(),
    })?;
    insert_statements(&mut *tx, limits, id, 1, &new.ptkb).await?;
    // The user's profile joins every new conversation's PTKB (texts already given are skipped).
    let profile: Vec<_> = super::profile::profile_as_ptkb(&mut *tx, user_id)
        .await?
        .into_iter()
        .filter(|p| !new.ptkb.iter().any(|s| s.text.trim() == p.text))
        .collect();
    super::ptkb::check_new_conversation_count(limits, new.ptkb.len(), profile.len())?;
    insert_statements(&mut *tx, limits, id, 1, &profile).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_names_are_checked() {
        assert!(validate_collection("msmarco-v2.1").is_ok());
        assert!(validate_collection("cran_field").is_ok());
        assert!(validate_collection("").is_err());
        assert!(validate_collection("../etc").is_err());
        assert!(validate_collection("a b").is_err());
    }
}
