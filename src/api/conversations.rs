//! Conversations of the authenticated user.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Deserializer};
use serde_json::json;

use super::error::ApiError;
use super::extract::{parse_uuid, ApiJson, AuthUser};
use super::ptkb::StatementInput;
use super::AppState;
use crate::store::{ConversationPatch, NewConversation, NewStatement};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateConversation {
    #[serde(default)]
    pub title: String,
    pub external_id: Option<String>,
    pub collection: Option<String>,
    #[serde(default)]
    pub ptkb: Vec<StatementInput>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateConversation {
    pub title: Option<String>,
    /// `null` clears the collection (server default); absent leaves it unchanged.
    #[serde(default, deserialize_with = "present")]
    pub collection: Option<Option<String>>,
}

/// Distinguishes an absent field (None) from an explicit null (Some(None)).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// `POST /v1/conversations`
pub async fn create(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    body: ApiJson<CreateConversation>,
) -> Result<HttpResponse, ApiError> {
    let body = body.0;
    let new = NewConversation {
        title: body.title,
        external_id: body.external_id,
        collection: body.collection.or_else(|| {
            state
                .default_collection
                .as_ref()
                .map(|d| d.name().to_string())
        }),
        ptkb: body
            .ptkb
            .into_iter()
            .map(|s| NewStatement {
                id: s.id,
                text: s.text,
            })
            .collect(),
    };
    let conversation = state.store.create_conversation(user.id, new).await?;
    let ptkb = state.store.ptkb(user.id, conversation.id, None).await?;
    Ok(HttpResponse::Created().json(json!({"conversation": conversation, "ptkb": ptkb})))
}

/// `GET /v1/conversations`
pub async fn list(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let conversations = state.store.list_conversations(user.id).await?;
    Ok(HttpResponse::Ok().json(json!({"conversations": conversations})))
}

/// `GET /v1/conversations/{conversation_id}`: the conversation with its current PTKB.
pub async fn get(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_uuid("conversation_id", &path)?;
    let conversation = state.store.conversation(user.id, id).await?;
    let ptkb = state.store.ptkb(user.id, id, None).await?;
    Ok(HttpResponse::Ok().json(json!({"conversation": conversation, "ptkb": ptkb})))
}

/// `PATCH /v1/conversations/{conversation_id}`
pub async fn update(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: ApiJson<UpdateConversation>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_uuid("conversation_id", &path)?;
    let patch = ConversationPatch {
        title: body.0.title,
        collection: body.0.collection,
    };
    let conversation = state.store.update_conversation(user.id, id, patch).await?;
    Ok(HttpResponse::Ok().json(json!({"conversation": conversation})))
}

/// `DELETE /v1/conversations/{conversation_id}`
pub async fn delete(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_uuid("conversation_id", &path)?;
    state.store.delete_conversation(user.id, id).await?;
    Ok(HttpResponse::NoContent().finish())
}
