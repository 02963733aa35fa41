//! Conversations of the authenticated user.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use super::ptkb::StatementInput;
use crate::store::ptkb::Statement;
use crate::store::{Conversation, ConversationPatch, NewConversation, NewStatement};
use crate::web::error::ApiError;
use crate::web::extract::{idempotency_key, parse_uuid, ApiJson, AuthUser, REPLAYED_HEADER};
use crate::web::AppState;

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateConversation {
    #[serde(default)]
    #[schema(max_length = 500, pattern = "NOTNUL")]
    pub title: String,
    /// Your own id for the conversation (unique among yours).
    #[schema(min_length = 1, max_length = 200, pattern = "NONBLANK")]
    pub external_id: Option<String>,
    /// The collection turns retrieve from.
    #[schema(min_length = 1, max_length = 100, pattern = "IDENTIFIER")]
    pub collection: Option<String>,
    /// What every answer should follow; the LLM generator's prompt carries them (the
    /// extractive generator cannot follow them).
    #[schema(min_length = 1, max_length = 4000, pattern = "NONBLANK")]
    pub instructions: Option<String>,
    /// The initial PTKB (the profile statements join it).
    #[serde(default)]
    pub ptkb: Vec<StatementInput>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateConversation {
    /// Absent or `null` leaves it unchanged.
    #[schema(max_length = 500, pattern = "NOTNUL")]
    pub title: Option<String>,
    /// `null` clears the collection; absent leaves it unchanged.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 100, pattern = "IDENTIFIER")]
    pub collection: Option<Option<String>>,
    /// `null` clears the instructions; absent leaves them unchanged.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 4000, pattern = "NONBLANK")]
    pub instructions: Option<Option<String>>,
}

/// A conversation with the PTKB its next turn sees.
#[derive(Serialize, ToSchema)]
pub struct ConversationWithPtkb {
    pub conversation: Conversation,
    pub ptkb: Vec<Statement>,
}

#[derive(Serialize, ToSchema)]
pub struct ConversationEnvelope {
    pub conversation: Conversation,
}

#[derive(Serialize, ToSchema)]
pub struct ConversationList {
    /// Newest first.
    pub conversations: Vec<Conversation>,
}

/// Distinguishes an absent field (None) from an explicit null (Some(None)).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// `POST /v1/conversations`; with an `Idempotency-Key`, a retry answers with what the first
/// request created.
#[utoipa::path(post, path = "/v1/conversations", operation_id = "create_conversation",
    tag = "conversations", request_body = CreateConversation,
    params(("Idempotency-Key" = Option<String>, Header, max_length = 255, pattern = "^[!-~]+$",
        description = "A retry with the same key and body answers with what the first request created")),
    // No link to `update_conversation`: its body names a collection, and a collection the user
    // does not see is 404 (as another user's private one must be), which a client following the
    // link cannot tell from "the conversation is gone".
    responses((status = 201, description = "The conversation", body = ConversationWithPtkb, links(
        ("GetConversation" = (operation_id = "get_conversation",
            parameters(("conversation_id" = "$response.body#/conversation/id")))),
        ("DeleteConversation" = (operation_id = "delete_conversation",
            parameters(("conversation_id" = "$response.body#/conversation/id")))),
        ("ListPtkb" = (operation_id = "list_ptkb",
            parameters(("conversation_id" = "$response.body#/conversation/id")))),
        ("AddPtkbStatement" = (operation_id = "add_ptkb_statement",
            parameters(("conversation_id" = "$response.body#/conversation/id")))),
        ("CreateTurn" = (operation_id = "create_turn",
            parameters(("conversation_id" = "$response.body#/conversation/id")))),
        ("ListTurns" = (operation_id = "list_turns",
            parameters(("conversation_id" = "$response.body#/conversation/id")))),
    ))))]
pub async fn create(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    req: HttpRequest,
    body: ApiJson<CreateConversation>,
) -> Result<HttpResponse, ApiError> {
    let body = body.0;
    let key = idempotency_key(&req, "POST /v1/conversations", &body)?;
    let new = NewConversation {
        title: body.title,
        external_id: body.external_id,
        collection: body.collection,
        instructions: body.instructions,
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
        .conversations
        .create(user.id, new, key.as_ref())
        .await?;
    let mut response = HttpResponse::Created();
    if replayed {
        response.insert_header((REPLAYED_HEADER, "true"));
    }
    Ok(response.json(created))
}

/// `GET /v1/conversations`
#[utoipa::path(get, path = "/v1/conversations", operation_id = "list_conversations",
    tag = "conversations", responses((status = 200, description = "Your conversations", body = ConversationList)))]
pub async fn list(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let conversations = state.conversations.list(user.id).await?;
    Ok(HttpResponse::Ok().json(ConversationList { conversations }))
}

/// `GET /v1/conversations/{conversation_id}`: the conversation with its current PTKB.
#[utoipa::path(get, path = "/v1/conversations/{conversation_id}", operation_id = "get_conversation",
    tag = "conversations", params(super::model::ConversationPath),
    responses((status = 200, description = "The conversation", body = ConversationWithPtkb)))]
pub async fn get(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_uuid("conversation_id", &path)?;
    let conversation = state.conversations.get(user.id, id).await?;
    let ptkb = state.conversations.ptkb(user.id, id, None).await?;
    Ok(HttpResponse::Ok().json(ConversationWithPtkb { conversation, ptkb }))
}

/// `PATCH /v1/conversations/{conversation_id}`
#[utoipa::path(patch, path = "/v1/conversations/{conversation_id}", operation_id = "update_conversation",
    tag = "conversations", params(super::model::ConversationPath), request_body = UpdateConversation,
    responses((status = 200, description = "The updated conversation", body = ConversationEnvelope)))]
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
        instructions: body.0.instructions,
    };
    let conversation = state.conversations.update(user.id, id, patch).await?;
    Ok(HttpResponse::Ok().json(ConversationEnvelope { conversation }))
}

/// `DELETE /v1/conversations/{conversation_id}`
#[utoipa::path(delete, path = "/v1/conversations/{conversation_id}", operation_id = "delete_conversation",
    tag = "conversations", params(super::model::ConversationPath),
    responses((status = 204, description = "Deleted with its turns and PTKB")))]
pub async fn delete(
    AuthUser(user): AuthUser,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_uuid("conversation_id", &path)?;
    state.conversations.delete(user.id, id).await?;
    Ok(HttpResponse::NoContent().finish())
}
