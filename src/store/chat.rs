//! Conversations held through the OpenAI-compatible chat endpoint: a client resends the whole
//! message history each time, and the conversation whose stored turns match it is continued.

use uuid::Uuid;

use super::conversations::NewConversation;
use super::{Result, Store};

/// A chat conversation whose current turns' utterances matched a request's user messages.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatMatch {
    pub conversation_id: Uuid,
    /// Number of current turns the conversation holds.
    pub turns: usize,
}

impl Store {
    /// The user's newest conversation started through the chat endpoint for `model` whose
    /// current turns' utterances are exactly `utterances`, in order.
    pub async fn chat_conversation_with_turns(
        &self,
        user_id: i64,
        model: &str,
        utterances: &[String],
    ) -> Result<Option<ChatMatch>> {
        let id: Option<Uuid> = sqlx::query_scalar(
            "SELECT cc.conversation_id FROM chat_conversations cc \
             JOIN conversations c ON c.id = cc.conversation_id AND c.user_id = $1 \
             LEFT JOIN turns t ON t.conversation_id = cc.conversation_id AND t.is_current \
             WHERE cc.user_id = $1 AND cc.model = $2 \
             GROUP BY cc.conversation_id, c.created_at \
             HAVING coalesce(array_agg(t.utterance ORDER BY t.seq) FILTER (WHERE t.id IS NOT NULL), \
                             '{}'::text[]) = $3::text[] \
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

    /// Creates a conversation (with the user's profile as its PTKB) for the chat endpoint.
    pub async fn create_chat_conversation(
        &self,
        user_id: i64,
        model: &str,
        title: &str,
        instructions: Option<&str>,
    ) -> Result<Uuid> {
        let conversation = self
            .create_conversation(
                user_id,
                NewConversation {
                    title: title.to_string(),
                    collection: Some(model.to_string()),
                    instructions: instructions.map(str::to_string),
                    ..Default::default()
                },
            )
            .await?;
        sqlx::query(
            "INSERT INTO chat_conversations (conversation_id, user_id, model) VALUES ($1, $2, $3)",
        )
        .bind(conversation.id)
        .bind(user_id)
        .bind(model)
        .execute(self.db())
        .await?;
        Ok(conversation.id)
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
