//! A conversation's personal textual knowledge base (PTKB), versioned by turn position.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::lease::{lock_owned, next_seq};
use super::{count_of, require_text, sqlstate, Result, Store, StoreError};
use crate::config::Limits;

/// One version of a PTKB statement.
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow, PartialEq, utoipa::ToSchema)]
pub struct Statement {
    /// Stable id within the conversation ("1", "2", ... as in iKAT topics).
    #[sqlx(rename = "statement_id")]
    pub id: String,
    pub text: String,
    /// First turn position (1-based) that sees this version.
    pub visible_from_turn: i32,
    /// First turn position that no longer sees it (removed or edited), if any.
    pub hidden_from_turn: Option<i32>,
    pub created_at: DateTime<Utc>,
    /// Row id of this version (referenced by turn rankings).
    #[serde(skip)]
    pub row_id: i64,
}

#[derive(Debug, Clone, Default)]
pub struct NewStatement {
    /// Stable id; assigned (next free number) when absent.
    pub id: Option<String>,
    pub text: String,
}

pub(crate) fn validate_statement_id(id: &str) -> Result<()> {
    super::require_identifier("id", id, 64)
}

const SELECT_STATEMENT: &str =
    "SELECT id AS row_id, statement_id, text, visible_from_seq AS visible_from_turn, \
     hidden_from_seq AS hidden_from_turn, created_at FROM ptkb_statements";

/// Orders statement ids numerically when they are numbers ("2" before "10"), else by text.
pub(crate) fn sort_statements(statements: &mut [Statement]) {
    statements.sort_by(|a, b| {
        match (a.id.parse::<u64>(), b.id.parse::<u64>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            (Ok(_), Err(_)) => std::cmp::Ordering::Less,
            (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
            _ => a.id.cmp(&b.id),
        }
        .then(a.visible_from_turn.cmp(&b.visible_from_turn))
    });
}

/// Inserts statements visible from turn `from_seq`, assigning numeric ids where none is given,
/// within the limits: at most `limits.statements_per_conversation` open statements, each at most
/// `limits.statement_chars` long. One query finds the next free id and one `UNNEST` insert
/// writes every row, so a large PTKB costs linear time.
pub(crate) async fn insert_statements(
    tx: &mut sqlx::PgConnection,
    limits: &Limits,
    conversation_id: Uuid,
    from_seq: i32,
    statements: &[NewStatement],
) -> Result<Vec<Statement>> {
    if statements.is_empty() {
        return Ok(Vec::new());
    }
    check_statement_count(tx, limits, conversation_id, statements.len()).await?;
    let mut next = next_free_id(tx, conversation_id).await?;
    let mut ids = Vec::with_capacity(statements.len());
    let mut texts = Vec::with_capacity(statements.len());
    for (i, statement) in statements.iter().enumerate() {
        require_text("text", &statement.text, limits.statement_chars).map_err(|e| match e {
            StoreError::Invalid { message, .. } => StoreError::Invalid {
                field: "ptkb",
                message: format!("statement {}: text {message}", i + 1),
            },
            other => other,
        })?;
        let id = match &statement.id {
            Some(id) => {
                validate_statement_id(id)?;
                if let Some(n) = numeric_id(id) {
                    next = next.max(n + 1);
                }
                id.clone()
            }
            None => {
                next += 1;
                (next - 1).to_string()
            }
        };
        ids.push(id);
        texts.push(statement.text.trim().to_string());
    }
    let mut rows: Vec<Statement> = sqlx::query_as(
        "INSERT INTO ptkb_statements (conversation_id, statement_id, text, visible_from_seq) \
         SELECT $1, s.statement_id, s.text, $4 FROM UNNEST($2::text[], $3::text[]) \
         WITH ORDINALITY AS s (statement_id, text, ord) ORDER BY s.ord \
         RETURNING id AS row_id, statement_id, text, \
         visible_from_seq AS visible_from_turn, hidden_from_seq AS hidden_from_turn, created_at",
    )
    .bind(conversation_id)
    .bind(&ids)
    .bind(&texts)
    .bind(from_seq)
    .fetch_all(&mut *tx)
    .await
    .map_err(|e| match sqlstate(&e).as_deref() {
        Some("23505") => StoreError::Conflict {
            field: "id",
            message: "a PTKB statement with this id already exists in this conversation (or is given twice)".to_string(),
        },
        _ => e.into(),
    })?;
    // Row ids follow the insertion order, which is the order given.
    rows.sort_by_key(|r| r.row_id);
    Ok(rows)
}

/// The id as a number, when it is one that [`next_free_id`] counts.
fn numeric_id(id: &str) -> Option<i64> {
    (id.len() <= 18 && id.bytes().all(|b| b.is_ascii_digit()))
        .then(|| id.parse().ok())
        .flatten()
}

/// Refuses `adding` statements that would make the conversation's open statements exceed the
/// limit: 400 when the request alone is too large, 429 when the conversation is full.
async fn check_statement_count(
    tx: &mut sqlx::PgConnection,
    limits: &Limits,
    conversation_id: Uuid,
    adding: usize,
) -> Result<()> {
    let max = limits.statements_per_conversation;
    if adding > max {
        return Err(StoreError::Invalid {
            field: "ptkb",
            message: format!(
                "{} given; a conversation holds at most {}",
                count_of(adding, "statement"),
                count_of(max, "statement")
            ),
        });
    }
    if max == usize::MAX {
        return Ok(());
    }
    let open: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM ptkb_statements WHERE conversation_id = $1 AND hidden_from_seq IS NULL",
    )
    .bind(conversation_id)
    .fetch_one(&mut *tx)
    .await?;
    let open = usize::try_from(open).unwrap_or(usize::MAX);
    if open.saturating_add(adding) > max {
        return Err(StoreError::QuotaExceeded {
            field: "ptkb",
            message: format!(
                "the conversation holds {}; with {} more it would hold {}, and it holds at most {max} (remove some first)",
                count_of(open, "statement"),
                adding,
                open.saturating_add(adding),
            ),
        });
    }
    Ok(())
}

/// Refuses a new conversation whose statements (`given` and the profile's) exceed the limit.
pub(crate) fn check_new_conversation_count(
    limits: &Limits,
    given: usize,
    profile: usize,
) -> Result<()> {
    let max = limits.statements_per_conversation;
    let total = given.saturating_add(profile);
    if total > max {
        return Err(StoreError::QuotaExceeded {
            field: "ptkb",
            message: format!(
                "the conversation would start with {} ({given} given, {profile} from your profile); it holds at most {max} (give fewer, or remove profile statements)",
                count_of(total, "statement"),
            ),
        });
    }
    Ok(())
}

/// One more than the largest numeric statement id ever used in the conversation.
async fn next_free_id(tx: &mut sqlx::PgConnection, conversation_id: Uuid) -> Result<i64> {
    let max: Option<i64> = sqlx::query_scalar(
        "SELECT max(statement_id::bigint) FROM ptkb_statements \
         WHERE conversation_id = $1 AND statement_id ~ '^[0-9]{1,18}$'",
    )
    .bind(conversation_id)
    .fetch_one(&mut *tx)
    .await?;
    Ok(max.unwrap_or(0) + 1)
}

/// Statements visible to turn position `seq`.
pub(crate) async fn visible_at(
    conn: &mut sqlx::PgConnection,
    conversation_id: Uuid,
    seq: i32,
) -> Result<Vec<Statement>> {
    let mut rows: Vec<Statement> = sqlx::query_as(&format!(
        "{SELECT_STATEMENT} WHERE conversation_id = $1 AND visible_from_seq <= $2 \
         AND (hidden_from_seq IS NULL OR hidden_from_seq > $2)"
    ))
    .bind(conversation_id)
    .bind(seq)
    .fetch_all(&mut *conn)
    .await?;
    sort_statements(&mut rows);
    Ok(rows)
}

impl Store {
    /// The PTKB as turn position `at_turn` saw it (default: as the next turn will see it).
    pub async fn ptkb(
        &self,
        user_id: i64,
        conversation_id: Uuid,
        at_turn: Option<i32>,
    ) -> Result<Vec<Statement>> {
        let mut tx = self.pool().begin().await?;
        // Ownership check without locking: reads do not serialize with writers.
        self.conversation(user_id, conversation_id).await?;
        let seq = match at_turn {
            Some(seq) if seq >= 1 => seq,
            Some(_) => {
                return Err(StoreError::Invalid {
                    field: "at_turn",
                    message: "must be a turn position of 1 or more".to_string(),
                })
            }
            None => next_seq(&mut tx, conversation_id).await?,
        };
        let rows = visible_at(&mut tx, conversation_id, seq).await?;
        tx.commit().await?;
        Ok(rows)
    }

    /// Every version of every statement, for auditing a conversation's history.
    pub async fn ptkb_history(
        &self,
        user_id: i64,
        conversation_id: Uuid,
    ) -> Result<Vec<Statement>> {
        self.conversation(user_id, conversation_id).await?;
        let mut rows: Vec<Statement> =
            sqlx::query_as(&format!("{SELECT_STATEMENT} WHERE conversation_id = $1"))
                .bind(conversation_id)
                .fetch_all(self.db())
                .await?;
        sort_statements(&mut rows);
        Ok(rows)
    }

    /// Adds a statement, visible from the next turn on (after a running turn ends).
    pub async fn add_statement(
        &self,
        user_id: i64,
        conversation_id: Uuid,
        new: NewStatement,
    ) -> Result<Statement> {
        self.when_free(|| self.add_statement_now(user_id, conversation_id, &new))
            .await
    }

    async fn add_statement_now(
        &self,
        user_id: i64,
        conversation_id: Uuid,
        new: &NewStatement,
    ) -> Result<Statement> {
        // The request's field is `text` (in a new conversation's list it is `ptkb`).
        require_text("text", &new.text, self.limits().statement_chars)?;
        let mut tx = self.pool().begin().await?;
        lock_owned(&mut tx, user_id, conversation_id).await?;
        let seq = next_seq(&mut tx, conversation_id).await?;
        let mut rows = insert_statements(
            &mut tx,
            self.limits(),
            conversation_id,
            seq,
            std::slice::from_ref(new),
        )
        .await?;
        touch(&mut tx, conversation_id).await?;
        tx.commit().await?;
        Ok(rows.remove(0))
    }

    /// Changes a statement's text from the next turn on; earlier turns keep seeing the old text.
    pub async fn edit_statement(
        &self,
        user_id: i64,
        conversation_id: Uuid,
        statement_id: &str,
        text: &str,
    ) -> Result<Statement> {
        require_text("text", text, self.limits().statement_chars)?;
        self.when_free(|| self.edit_statement_now(user_id, conversation_id, statement_id, text))
            .await
    }

    async fn edit_statement_now(
        &self,
        user_id: i64,
        conversation_id: Uuid,
        statement_id: &str,
        text: &str,
    ) -> Result<Statement> {
        let mut tx = self.pool().begin().await?;
        lock_owned(&mut tx, user_id, conversation_id).await?;
        let seq = next_seq(&mut tx, conversation_id).await?;
        let current = open_version(&mut tx, conversation_id, statement_id).await?;
        let row: Statement = if current.visible_from_turn >= seq {
            // No turn has seen this version yet: change it in place.
            sqlx::query_as(
                "UPDATE ptkb_statements SET text = $2 WHERE id = $1 RETURNING id AS row_id, statement_id, text, \
                 visible_from_seq AS visible_from_turn, hidden_from_seq AS hidden_from_turn, created_at",
            )
            .bind(current.row_id)
            .bind(text.trim())
            .fetch_one(&mut *tx)
            .await?
        } else {
            close_version(&mut tx, current.row_id, seq).await?;
            let new = NewStatement {
                id: Some(statement_id.to_string()),
                text: text.to_string(),
            };
            insert_statements(
                &mut tx,
                self.limits(),
                conversation_id,
                seq,
                std::slice::from_ref(&new),
            )
            .await?
            .remove(0)
        };
        touch(&mut tx, conversation_id).await?;
        tx.commit().await?;
        Ok(row)
    }

    /// Removes a statement from the next turn on; earlier turns keep it.
    pub async fn remove_statement(
        &self,
        user_id: i64,
        conversation_id: Uuid,
        statement_id: &str,
    ) -> Result<()> {
        self.when_free(|| self.remove_statement_now(user_id, conversation_id, statement_id))
            .await
    }

    async fn remove_statement_now(
        &self,
        user_id: i64,
        conversation_id: Uuid,
        statement_id: &str,
    ) -> Result<()> {
        let mut tx = self.pool().begin().await?;
        lock_owned(&mut tx, user_id, conversation_id).await?;
        let seq = next_seq(&mut tx, conversation_id).await?;
        let current = open_version(&mut tx, conversation_id, statement_id).await?;
        if current.visible_from_turn >= seq {
            sqlx::query("DELETE FROM ptkb_statements WHERE id = $1")
                .bind(current.row_id)
                .execute(&mut *tx)
                .await?;
        } else {
            close_version(&mut tx, current.row_id, seq).await?;
        }
        touch(&mut tx, conversation_id).await?;
        tx.commit().await?;
        Ok(())
    }
}

async fn open_version(
    tx: &mut sqlx::PgConnection,
    conversation_id: Uuid,
    statement_id: &str,
) -> Result<Statement> {
    sqlx::query_as(&format!(
        "{SELECT_STATEMENT} WHERE conversation_id = $1 AND statement_id = $2 AND hidden_from_seq IS NULL"
    ))
    .bind(conversation_id)
    .bind(statement_id)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(StoreError::NotFound {
        entity: "PTKB statement",
    })
}

async fn close_version(tx: &mut sqlx::PgConnection, row_id: i64, seq: i32) -> Result<()> {
    sqlx::query("UPDATE ptkb_statements SET hidden_from_seq = $2 WHERE id = $1")
        .bind(row_id)
        .bind(seq)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

async fn touch(tx: &mut sqlx::PgConnection, conversation_id: Uuid) -> Result<()> {
    sqlx::query("UPDATE conversations SET updated_at = now() WHERE id = $1")
        .bind(conversation_id)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statement(id: &str, from: i32) -> Statement {
        Statement {
            id: id.to_string(),
            text: "t".to_string(),
            visible_from_turn: from,
            hidden_from_turn: None,
            created_at: Utc::now(),
            row_id: 0,
        }
    }

    #[test]
    fn numeric_ids_sort_numerically() {
        let mut v = vec![
            statement("10", 1),
            statement("2", 1),
            statement("b", 1),
            statement("1", 1),
        ];
        sort_statements(&mut v);
        let ids: Vec<&str> = v.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["1", "2", "10", "b"]);
    }

    #[test]
    fn only_short_digit_ids_count_as_numbers() {
        assert_eq!(numeric_id("12"), Some(12));
        assert_eq!(numeric_id("diet-1"), None);
        assert_eq!(numeric_id(&"9".repeat(19)), None);
    }

    #[test]
    fn statement_ids_are_checked() {
        assert!(validate_statement_id("12").is_ok());
        assert!(validate_statement_id("diet-1").is_ok());
        assert!(validate_statement_id("").is_err());
        assert!(validate_statement_id("has space").is_err());
    }
}
