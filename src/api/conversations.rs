//! Conversations of the authenticated user.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::json;

use super::error::{ApiError, ErrorCode};
use super::extract::{idempotency_key, parse_uuid, ApiJson, AuthUser, REPLAYED_HEADER};
use super::ptkb::StatementInput;
use super::AppState;
use crate::store::{ConversationPatch, NewConversation, NewStatement};

#[derive(Deserialize, Serialize)]
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

/// `POST /v1/conversations`; with an `Idempotency-Key`, a retry answers with what the first
/// request created.
pub async fn create(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    req: HttpRequest,
    body: ApiJson<CreateConversation>,
) -> Result<HttpResponse, ApiError> {
    let body = body.0;
    let key = idempotency_key(&req, "POST /v1/conversations", &body)?;
    if let Some(collection) = &body.collection {
        check_collection(&state, user.id, collection).await?;
    }
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
    let (created, replayed) = state
        .store
        .create_conversation_keyed(user.id, new, key.as_ref())
        .await?;
    let mut response = HttpResponse::Created();
    if replayed {
        response.insert_header((REPLAYED_HEADER, "true"));
    }
    Ok(response.json(created))
}

/// A conversation may name only a collection the user sees (a shared one or their own private
/// one); any other name, another user's private collection included, is not found.
async fn check_collection(state: &AppState, user_id: i64, name: &str) -> Result<(), ApiError> {
    use crate::index::IndexError;
    use crate::service::ServiceError;
    match state.turns.visible_retriever(Some(user_id), name).await {
        Ok(_) => Ok(()),
        Err(ServiceError::Index(IndexError::NotFound { .. })) => Err(ApiError::field(
            ErrorCode::NotFound,
            "collection",
            format!("no collection named {name:?}"),
        )),
        Err(ServiceError::Index(e @ IndexError::InvalidName(_))) => {
            Err(ApiError::invalid("collection", e.to_string()))
        }
        Err(other) => Err(other.into()),
    }
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
    if let Some(Some(collection)) = &body.0.collection {
        check_collection(&state, user.id, collection).await?;
    }
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
