//! Conversations held through the OpenAI-compatible chat endpoint: a client resends the whole
//! message history each time, and the conversation whose stored turns match it is continued.

use uuid::Uuid;

use super::conversations::NewConversation;
use super::{Result, Store};

/// The generator recorded for turns imported from a chat client's history.
pub const IMPORTED_GENERATOR: &str = "imported";

/// An earlier exchange of a chat client's history, stored as a turn of a new conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedTurn {
    pub utterance: String,
    pub response: Option<String>,
}

/// A chat conversation whose current turns' utterances matched a request's user messages.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatMatch {
    pub conversation_id: Uuid,
    /// Number of current turns the conversation holds.
    pub turns: usize,
}

impl Store {
    /// The user's newest conversation started through the chat endpoint for `model` whose
    /// current turns' utterances are exactly `utterances`, in order. A provisional conversation
    /// (its first turn not yet answered) is never matched, and neither is any conversation when
    /// `utterances` is empty: an empty history says nothing about which session it belongs to.
    pub async fn chat_conversation_with_turns(
        &self,
        user_id: i64,
        model: &str,
        utterances: &[String],
    ) -> Result<Option<ChatMatch>> {
        if utterances.is_empty() {
            return Ok(None);
        }
        let id: Option<Uuid> = sqlx::query_scalar(
            "SELECT cc.conversation_id FROM chat_conversations cc \
             JOIN conversations c ON c.id = cc.conversation_id AND c.user_id = $1 \
             JOIN turns t ON t.conversation_id = cc.conversation_id AND t.is_current \
             WHERE cc.user_id = $1 AND cc.model = $2 AND NOT cc.provisional \
             GROUP BY cc.conversation_id, c.created_at \
             HAVING array_agg(t.utterance ORDER BY t.seq) = $3::text[] \
             ORDER BY c.created_at DESC, cc.conversation_id LIMIT 1",
        )
        .bind(user_id)
        .bind(model)
        .bind(utterances.to_vec())
        .fetch_optional(self.db())
        .await?;
        Ok(id.map(|conversation_id| ChatMatch {
            conversation_id,
            turns: utterances.len(),
        }))
    }

    /// Creates, in one transaction, a provisional conversation (with the user's profile as its
    /// PTKB) for the chat endpoint, holding `history` as its first turns: each user message as
    /// the utterance, the assistant's reply as the response; no stage runs for them. The first
    /// answered turn's commit makes it permanent ([`super::PendingTurn::confirm_chat`]); until
    /// then [`Store::discard_provisional_chat`] removes it.
    pub async fn create_chat_conversation(
        &self,
        user_id: i64,
        model: &str,
        title: &str,
        instructions: Option<&str>,
        history: &[ImportedTurn],
    ) -> Result<Uuid> {
        let new = NewConversation {
            title: title.to_string(),
            collection: Some(model.to_string()),
            instructions: instructions.map(str::to_string),
            ..Default::default()
        };
        for turn in history {
            super::require_text("utterance", &turn.utterance, 10_000)?;
        }
        let id = Uuid::new_v4();
        let mut tx = self.pool().begin().await?;
        super::conversations::insert_conversation(&mut tx, self.limits(), user_id, id, &new)
            .await?;
        sqlx::query(
            "INSERT INTO chat_conversations (conversation_id, user_id, model, provisional) \
             VALUES ($1, $2, $3, true)",
        )
        .bind(id)
        .bind(user_id)
        .bind(model)
        .execute(&mut *tx)
        .await?;
        let ids: Vec<Uuid> = history.iter().map(|_| Uuid::new_v4()).collect();
        let seqs: Vec<i32> = (1..=history.len() as i32).collect();
        let utterances: Vec<&str> = history.iter().map(|t| t.utterance.as_str()).collect();
        let responses: Vec<Option<&str>> = history.iter().map(|t| t.response.as_deref()).collect();
        sqlx::query(
            "INSERT INTO turns (id, conversation_id, seq, version, is_current, utterance, \
               response_text, generator, diagnostics) \
             SELECT t.id, $1, t.seq, 1, true, t.utterance, t.response, $6, $7 \
             FROM UNNEST($2::uuid[], $3::int[], $4::text[], $5::text[]) AS t(id, seq, utterance, response)",
        )
        .bind(id)
        .bind(ids)
        .bind(seqs)
        .bind(utterances)
        .bind(responses)
        .bind(IMPORTED_GENERATOR)
        .bind(serde_json::json!({ "imported": true }))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Deletes one of the user's chat conversations if it is still provisional (its first turn
    /// failed, was refused or was abandoned); an answered one is kept.
    pub async fn discard_provisional_chat(
        &self,
        user_id: i64,
        conversation_id: Uuid,
    ) -> Result<()> {
        let provisional: Option<bool> = sqlx::query_scalar(
            "SELECT provisional FROM chat_conversations WHERE user_id = $1 AND conversation_id = $2",
        )
        .bind(user_id)
        .bind(conversation_id)
        .fetch_optional(self.db())
        .await?;
        if provisional == Some(true) {
            self.delete_conversation(user_id, conversation_id).await?;
        }
        Ok(())
    }

    /// The user's provisional chat conversations left by a process that stopped during their
    /// first turn (older than any turn runs, and no turn holding them), deleted.
    pub async fn sweep_provisional_chats(&self, user_id: i64) -> Result<()> {
        let stale: Vec<Uuid> = sqlx::query_scalar(
            "SELECT cc.conversation_id FROM chat_conversations cc \
             JOIN conversations c ON c.id = cc.conversation_id \
             WHERE cc.user_id = $1 AND cc.provisional AND c.created_at < now() - interval '1 hour' \
               AND (c.lease_holder IS NULL OR c.lease_expires_at < now())",
        )
        .bind(user_id)
        .fetch_all(self.db())
        .await?;
        for id in stale {
            self.discard_provisional_chat(user_id, id).await?;
        }
        Ok(())
    }

    /// Replaces the instructions of one of the user's conversations when they differ (so an
    /// unchanged system message, resent with every request, changes nothing).
    pub async fn set_instructions(
        &self,
        user_id: i64,
        conversation_id: Uuid,
        instructions: &str,
    ) -> Result<()> {
        super::conversations::validate_instructions(instructions)?;
        sqlx::query(
            "UPDATE conversations SET instructions = $3, updated_at = now() \
             WHERE user_id = $1 AND id = $2 AND instructions IS DISTINCT FROM $3",
        )
        .bind(user_id)
        .bind(conversation_id)
        .bind(instructions.trim())
        .execute(self.db())
        .await?;
        Ok(())
    }

    /// Utterances of the current turns of one of the user's conversations, in order.
    pub async fn current_utterances(
        &self,
        user_id: i64,
        conversation_id: Uuid,
    ) -> Result<Vec<String>> {
        self.conversation(user_id, conversation_id).await?;
        let rows = sqlx::query_scalar(
            "SELECT utterance FROM turns WHERE conversation_id = $1 AND is_current ORDER BY seq",
        )
        .bind(conversation_id)
        .fetch_all(self.db())
        .await?;
        Ok(rows)
    }
}
