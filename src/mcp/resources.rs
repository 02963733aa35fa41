//! MCP resources: the user's conversations, each `convrag://conversations/{id}` (JSON: the
//! conversation, its current PTKB and its turns with their passages and citations).

use serde_json::{json, Value};
use uuid::Uuid;

use super::{RpcError, INTERNAL_ERROR, INVALID_PARAMS};
use crate::service::conversations::ConversationError;
use crate::store::{StoreError, User};
use crate::web::AppState;

const PREFIX: &str = "convrag://conversations/";

fn store_error(e: ConversationError) -> RpcError {
    match e {
        ConversationError::Store(StoreError::NotFound { entity }) => {
            RpcError::new(INVALID_PARAMS, format!("{entity} not found"))
        }
        other => RpcError::new(INTERNAL_ERROR, other.to_string()),
    }
}

/// The conversation id a resource URI names.
pub fn conversation_of(uri: &str) -> Result<Uuid, RpcError> {
    uri.strip_prefix(PREFIX)
        .and_then(|id| Uuid::parse_str(id).ok())
        .ok_or_else(|| {
            RpcError::new(
                INVALID_PARAMS,
                format!("unknown resource {uri:?}: expected {PREFIX}<conversation id>"),
            )
        })
}

pub async fn list(state: &AppState, user: &User) -> Result<Value, RpcError> {
    let conversations = state
        .conversations
        .list(user.id)
        .await
        .map_err(store_error)?;
    let resources: Vec<Value> = conversations
        .iter()
        .map(|c| {
            let name = if c.title.is_empty() {
                c.id.to_string()
            } else {
                c.title.clone()
            };
            json!({"uri": format!("{PREFIX}{}", c.id), "name": name,
                "description": format!("{} turns on {}", c.turn_count,
                    c.collection.as_deref().unwrap_or("no collection")),
                "mimeType": "application/json"})
        })
        .collect();
    Ok(json!({ "resources": resources }))
}

pub fn templates() -> Value {
    json!({"resourceTemplates": [{"uriTemplate": format!("{PREFIX}{{conversation_id}}"),
        "name": "conversation", "mimeType": "application/json",
        "description": "A conversation with its PTKB and turns (answers, passages, citations)"}]})
}

pub async fn read(state: &AppState, user: &User, uri: &str) -> Result<Value, RpcError> {
    let id = conversation_of(uri)?;
    let conversation = state
        .conversations
        .get(user.id, id)
        .await
        .map_err(store_error)?;
    let ptkb = state
        .conversations
        .ptkb(user.id, id, None)
        .await
        .map_err(store_error)?;
    let turns = state
        .conversations
        .turns(user.id, id, false)
        .await
        .map_err(store_error)?;
    let body = json!({"conversation": conversation, "ptkb": ptkb, "turns": turns});
    Ok(
        json!({"contents": [{"uri": uri, "mimeType": "application/json",
        "text": body.to_string()}]}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_name_conversations() {
        let id = Uuid::new_v4();
        assert_eq!(conversation_of(&format!("{PREFIX}{id}")).unwrap(), id);
        assert!(conversation_of("convrag://conversations/nope").is_err());
        assert!(conversation_of(&format!("file:///{id}")).is_err());
    }
}
