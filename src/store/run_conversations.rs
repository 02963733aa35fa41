//! A run's conversations: a batch run stores each topic (an interactive run each session) as a
//! conversation of the run's user with external id `<run name>/<topic>`, so the database is the
//! run's resume journal. The batch engine and the interactive client find or create them here
//! and check a resumed run's input against their stored turns; the Runs view lists them.

use std::collections::HashMap;
use std::future::Future;

use uuid::Uuid;

use super::conversations::SELECT_CONVERSATION;
use super::{Conversation, NewConversation, Result, Store, StoreError};

/// SQL: conversation `c` belongs to run `run` (an SQL text expression) of user `user`.
pub(super) fn belongs_to_run(user: &str, run: &str) -> String {
    format!("c.user_id = {user} AND left(c.external_id, length({run}) + 1) = {run} || '/'")
}

/// Deletes the conversations of user `$1`'s run `$2` with their turns in `tx`; returns how many
/// conversations went.
pub(super) async fn delete_all(
    tx: &mut sqlx::PgConnection,
    user_id: i64,
    run: &str,
) -> Result<u64> {
    let of_run = format!(
        "SELECT c.id FROM conversations c WHERE {}",
        belongs_to_run("$1", "$2::text")
    );
    // Turns first: their PTKB rankings point at statement versions without cascading (as
    // `delete_conversation` does).
    sqlx::query(&format!(
        "DELETE FROM turns WHERE conversation_id IN ({of_run})"
    ))
    .bind(user_id)
    .bind(run)
    .execute(&mut *tx)
    .await?;
    let deleted = sqlx::query(&format!("DELETE FROM conversations WHERE id IN ({of_run})"))
        .bind(user_id)
        .bind(run)
        .execute(&mut *tx)
        .await?;
    Ok(deleted.rows_affected())
}

/// The conversations of one user's run.
#[derive(Clone)]
pub struct RunConversations {
    store: Store,
    user_id: i64,
    run: String,
}

/// A conversation whose stored turns are not the first of those a resumed run's input expects:
/// it was changed outside the run, which does not continue it.
#[derive(Debug, thiserror::Error)]
#[error("run {run}: topic {topic}: {reason}")]
pub struct Diverged {
    pub run: String,
    pub topic: String,
    pub reason: String,
}

impl Store {
    /// The conversations of `user_id`'s run `run`.
    pub fn run_conversations(&self, user_id: i64, run: &str) -> RunConversations {
        RunConversations {
            store: self.clone(),
            user_id,
            run: run.to_string(),
        }
    }
}

impl RunConversations {
    pub fn run(&self) -> &str {
        &self.run
    }

    /// The external id of the topic's conversation.
    pub fn external_id(&self, topic: &str) -> String {
        format!("{}/{topic}", self.run)
    }

    /// The topic a conversation of this run stands for (`None`: not one of the run's).
    pub fn topic<'c>(&self, conversation: &'c Conversation) -> Option<&'c str> {
        conversation
            .external_id
            .as_deref()?
            .strip_prefix(&self.run)?
            .strip_prefix('/')
    }

    /// The run's conversations, by external id.
    pub async fn list(&self) -> Result<Vec<Conversation>> {
        Ok(sqlx::query_as(&format!(
            "{SELECT_CONVERSATION} WHERE {} ORDER BY c.external_id COLLATE \"C\"",
            belongs_to_run("$1", "$2::text")
        ))
        .bind(self.user_id)
        .bind(&self.run)
        .fetch_all(self.store.db())
        .await?)
    }

    /// The topic's conversation, if stored.
    pub async fn find(&self, topic: &str) -> Result<Option<Conversation>> {
        self.store
            .conversation_by_external_id(self.user_id, &self.external_id(topic))
            .await
    }

    /// The topic's conversation, created from `new` (awaited only then) when missing.
    pub async fn find_or_create<E: From<StoreError>>(
        &self,
        topic: &str,
        new: impl Future<Output = Result<NewConversation, E>>,
    ) -> Result<Uuid, E> {
        if let Some(c) = self.find(topic).await? {
            return Ok(c.id);
        }
        let new = NewConversation {
            external_id: Some(self.external_id(topic)),
            ..new.await?
        };
        match self.store.create_conversation(self.user_id, new).await {
            Ok(c) => Ok(c.id),
            Err(StoreError::Invalid { field, message }) => Err(StoreError::Invalid {
                field,
                message: format!(
                    "run {}: topic {topic} cannot be stored as a conversation: {message}",
                    self.run
                ),
            }
            .into()),
            Err(e) => Err(e.into()),
        }
    }

    /// Current turns stored per topic.
    pub async fn turn_counts(&self) -> Result<HashMap<String, usize>> {
        let rows: Vec<(String, i64)> = sqlx::query_as(&format!(
            "SELECT c.external_id, count(t.id) FROM conversations c \
               LEFT JOIN turns t ON t.conversation_id = c.id AND t.is_current \
             WHERE {} GROUP BY c.external_id",
            belongs_to_run("$1", "$2::text")
        ))
        .bind(self.user_id)
        .bind(&self.run)
        .fetch_all(self.store.db())
        .await?;
        let prefix = self.external_id("");
        Ok(rows
            .into_iter()
            .filter_map(|(external, n)| {
                let topic = external.strip_prefix(&prefix)?;
                Some((topic.to_string(), n as usize))
            })
            .collect())
    }

    /// (position, external turn id) of the current turns of one of the run's conversations, in
    /// order.
    pub async fn turn_ids(&self, conversation: Uuid) -> Result<Vec<(i32, Option<String>)>> {
        Ok(sqlx::query_as(
            "SELECT t.seq, t.external_turn_id FROM turns t \
               JOIN conversations c ON c.id = t.conversation_id AND c.user_id = $2 \
             WHERE t.conversation_id = $1 AND t.is_current ORDER BY t.seq",
        )
        .bind(conversation)
        .bind(self.user_id)
        .fetch_all(self.store.db())
        .await?)
    }

    /// How many of the turns a resumed run's input expects for `topic` are stored: the stored
    /// turns, as (position, name), must be the first of `expected` at positions 1, 2, … (named
    /// alike: by external turn id, or by utterance).
    pub fn resume_point(
        &self,
        topic: &str,
        stored: &[(i32, Option<&str>)],
        expected: &[&str],
    ) -> Result<usize, Diverged> {
        let diverged = |reason: String| Diverged {
            run: self.run.clone(),
            topic: topic.to_string(),
            reason,
        };
        if stored.len() > expected.len() {
            return Err(diverged(format!(
                "{} turns are stored, the input has {}",
                stored.len(),
                expected.len()
            )));
        }
        for (i, ((seq, name), wanted)) in stored.iter().zip(expected).enumerate() {
            if *seq != i as i32 + 1 || *name != Some(*wanted) {
                return Err(diverged(format!(
                    "stored turn {seq} is {:?}, the input has {wanted:?} there (the conversation \
                     was changed outside this run)",
                    name.unwrap_or("(no id)")
                )));
            }
        }
        Ok(stored.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> RunConversations {
        let options = sqlx::postgres::PgConnectOptions::new();
        let pool = sqlx::postgres::PgPoolOptions::new().connect_lazy_with(options);
        Store::from_pool(pool).run_conversations(1, "r")
    }

    #[tokio::test]
    async fn resumes_after_the_stored_first_turns_only() {
        let run = run();
        let expected = ["a", "b", "c"];
        assert_eq!(run.resume_point("t", &[], &expected).unwrap(), 0);
        let stored = [(1, Some("a")), (2, Some("b"))];
        assert_eq!(run.resume_point("t", &stored, &expected).unwrap(), 2);
        let e = run
            .resume_point("t", &[(1, Some("a")), (2, Some("c"))], &expected)
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("run r: topic t: stored turn 2 is \"c\""),
            "{e}"
        );
        assert!(run.resume_point("t", &[(2, Some("a"))], &expected).is_err());
        assert!(run.resume_point("t", &stored, &expected[..1]).is_err());
    }
}
