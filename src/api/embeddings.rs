//! `POST /v1/embeddings`: OpenAI's embeddings endpoint over the served bi-encoder, for clients
//! that index their own texts (LangChain's `OpenAIEmbeddings`, LlamaIndex) with the vectors
//! convrag's dense retrieval uses.

use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::service::embeddings::{base64_f32, EmbeddingRequest, Embeddings};
use crate::web::error::ApiError;
use crate::web::extract::{ApiJson, AuthUser};
use crate::web::AppState;

/// Body of `POST /v1/embeddings`. `user` is accepted and ignored.
#[derive(Deserialize, ToSchema)]
pub struct EmbeddingsRequest {
    /// The served embedding model (`GET /v1/models` lists it).
    #[schema(min_length = 1, max_length = 100, pattern = "IDENTIFIER")]
    pub model: String,
    /// A text, or up to 2048 texts. Token-id arrays are refused: send the text.
    #[schema(value_type = EmbeddingInput)]
    pub input: Value,
    /// `float` (the default) or `base64` (little-endian float32s).
    #[serde(default)]
    pub encoding_format: Option<EncodingFormat>,
    /// Only the model's own length is available.
    #[serde(default)]
    #[schema(ignore)]
    pub dimensions: Option<usize>,
}

/// What `input` may be (documented here; read as JSON).
#[derive(ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum EmbeddingInput {
    Text(String),
    Texts(Vec<String>),
}

#[derive(Deserialize, ToSchema, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum EncodingFormat {
    #[default]
    Float,
    Base64,
}

/// One vector of an embeddings answer.
#[derive(Serialize, ToSchema)]
pub struct EmbeddingItem {
    #[schema(value_type = String, pattern = "^embedding$")]
    pub object: &'static str,
    pub index: usize,
    pub embedding: Embedding,
}

/// Floats, or a base64 string with `encoding_format: "base64"`.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum Embedding {
    Floats(Vec<f32>),
    Base64(String),
}

/// An embeddings answer in OpenAI's shape.
#[derive(Serialize, ToSchema)]
pub struct EmbeddingList {
    #[schema(value_type = String, pattern = "^list$")]
    pub object: &'static str,
    pub data: Vec<EmbeddingItem>,
    pub model: String,
    #[schema(value_type = Object)]
    pub usage: Value,
}

impl EmbeddingsRequest {
    /// The texts of `input`; token ids are refused naming the field.
    fn texts(&self) -> Result<Vec<String>, ApiError> {
        let not_text = |field: String| {
            ApiError::invalid(
                field,
                "must be text (token-id arrays are not accepted; LangChain: check_embedding_ctx_length=False)",
            )
        };
        match &self.input {
            Value::String(text) => Ok(vec![text.clone()]),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    Value::String(text) => Ok(text.clone()),
                    _ => Err(not_text(format!("input[{i}]"))),
                })
                .collect(),
            _ => Err(not_text("input".to_string())),
        }
    }
}

fn answer(embeddings: Embeddings, format: EncodingFormat) -> EmbeddingList {
    let data = embeddings
        .vectors
        .iter()
        .enumerate()
        .map(|(index, vector)| EmbeddingItem {
            object: "embedding",
            index,
            embedding: match format {
                EncodingFormat::Float => Embedding::Floats(vector.clone()),
                EncodingFormat::Base64 => Embedding::Base64(base64_f32(vector)),
            },
        })
        .collect();
    EmbeddingList {
        object: "list",
        data,
        model: embeddings.model,
        usage: json!({"prompt_tokens": embeddings.tokens, "total_tokens": embeddings.tokens}),
    }
}

/// `POST /v1/embeddings`
#[utoipa::path(post, path = "/v1/embeddings", operation_id = "create_embeddings", tag = "openai",
    request_body = EmbeddingsRequest,
    responses((status = 200, description = "One vector per input, in order", body = EmbeddingList)))]
pub async fn create(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> HttpResponse {
    let result: Result<HttpResponse, ApiError> = async {
        let AuthUser(user) = AuthUser::from_request(&req, &mut Payload::None).await?;
        // Unread parts (`user`, other OpenAI parameters) may hold anything; the texts go
        // through the input contract.
        let body =
            ApiJson::<EmbeddingsRequest, true>::from_request(&req, &mut payload.into_inner())
                .await?
                .0;
        let request = EmbeddingRequest {
            inputs: body.texts()?,
            model: body.model,
            dimensions: body.dimensions,
        };
        let embeddings = state
            .turns
            .embed_as(user.id, request, state.config.limits.message_chars)
            .await?;
        Ok(HttpResponse::Ok().json(answer(embeddings, body.encoding_format.unwrap_or_default())))
    }
    .await;
    result.unwrap_or_else(|e| e.to_openai_response())
}

/// What the server requires of `input`, as JSON Schema: a non-blank text without NUL within
/// `limits.message_chars`, or 1 to 2048 of them.
pub(super) struct EmbeddingInputs;

impl utoipa::Modify for EmbeddingInputs {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use crate::web::schema::{component_mut, keywords_only, NONBLANK};
        let Some(request) = component_mut(doc, "EmbeddingsRequest") else {
            return;
        };
        let text = json!({"type": "string", "minLength": 1,
            "maxLength": crate::config::Limits::default().message_chars, "pattern": NONBLANK});
        let input = json!({"anyOf": [text, {"type": "array", "minItems": 1,
            "maxItems": crate::service::embeddings::MAX_INPUTS, "items": text}]});
        request
            .properties
            .insert("input".to_string(), keywords_only(input).into());
    }
}
