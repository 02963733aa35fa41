//! Embeddings of callers' texts with the served bi-encoder (`POST /v1/embeddings`): the model,
//! truncation and pooling that dense retrieval uses, so a vector a client stores is comparable
//! with the collections' passage vectors. Each request counts as one search against the user's
//! rate; the texts go through the input contract ([`super::input`]).

use std::sync::Arc;

use super::input::{self, InvalidInput};
use super::turns::{ServiceError, TurnService};
use crate::rerank::{RerankError, Reranker};

/// Texts in one request, as OpenAI's own limit: a client batching its documents (LangChain,
/// LlamaIndex) sends at most this many at once.
pub const MAX_INPUTS: usize = 2048;

/// Texts encoded in one model call: bounds the tensors of one call whatever the request holds.
const BATCH: usize = 32;

/// Errors of the embedding service.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddingError {
    /// The served model scores pairs (a cross-encoder) or none is loaded.
    #[error("model: no embedding model is served (a bi-encoder in CONVRAG_MODEL_DIR)")]
    NoModel,
    /// The request names another model than the served bi-encoder.
    #[error("model: {requested:?} is not served; the embedding model is {served:?}")]
    UnknownModel { requested: String, served: String },
    #[error(transparent)]
    Input(#[from] InvalidInput),
    /// Refused by the service's admission (the rate of searches).
    #[error(transparent)]
    Service(#[from] ServiceError),
    #[error(transparent)]
    Model(#[from] RerankError),
    /// The blocking encoding task panicked or was cancelled.
    #[error("a task failed: {0}")]
    Task(#[source] tokio::task::JoinError),
}

pub type Result<T, E = EmbeddingError> = std::result::Result<T, E>;

/// What a caller asks to embed.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingRequest {
    /// The model the caller names: the bi-encoder's name (`all-MiniLM-L6-v2`) or its full id.
    pub model: String,
    pub inputs: Vec<String>,
    /// The length the caller wants; only the model's own is available.
    pub dimensions: Option<usize>,
}

impl EmbeddingRequest {
    /// The input contract: 1 to [`MAX_INPUTS`] non-blank texts of at most `max_chars`
    /// characters each, without NUL.
    pub fn check(&self, max_chars: usize) -> input::Result<()> {
        if self.inputs.is_empty() {
            return Err(InvalidInput::new("input", "must hold at least one text"));
        }
        input::count("input", self.inputs.len(), MAX_INPUTS)?;
        for (i, text) in self.inputs.iter().enumerate() {
            input::required_text(&format!("input[{i}]"), text, max_chars)?;
        }
        Ok(())
    }
}

/// One vector per input, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    /// The served model's name, as `GET /v1/models` lists it.
    pub model: String,
    pub vectors: Vec<Vec<f32>>,
    /// Tokens of the inputs by [`super::chat::count_tokens`]' rule (for clients' `usage`).
    pub tokens: usize,
}

/// The served bi-encoder's name: its model id without the checksum.
pub fn served_model(turns: &TurnService) -> Option<String> {
    let model = turns.reranker()?;
    if !model.embeds() {
        return None;
    }
    let id = model.model_id();
    Some(id.split('@').next().unwrap_or(&id).to_string())
}

impl TurnService {
    /// Embeds `request`'s texts for `user_id` (one search against the user's rate), after the
    /// input contract with texts of at most `max_chars` characters.
    pub async fn embed_as(
        &self,
        user_id: i64,
        request: EmbeddingRequest,
        max_chars: usize,
    ) -> Result<Embeddings> {
        let served = served_model(self).ok_or(EmbeddingError::NoModel)?;
        let model = Arc::clone(self.reranker().ok_or(EmbeddingError::NoModel)?);
        if request.model != served && request.model != model.model_id() {
            return Err(EmbeddingError::UnknownModel {
                requested: request.model,
                served,
            });
        }
        request.check(max_chars)?;
        self.admit_searches(user_id)?;
        let tokens = request
            .inputs
            .iter()
            .map(|t| super::chat::count_tokens(t))
            .sum();
        let inputs = request.inputs;
        let vectors = tokio::task::spawn_blocking(move || encode(model.as_ref(), &inputs))
            .await
            .map_err(EmbeddingError::Task)??;
        if let (Some(wanted), Some(first)) = (request.dimensions, vectors.first()) {
            if wanted != first.len() {
                return Err(InvalidInput::new(
                    "dimensions",
                    format!(
                        "this model's embeddings have {} dimensions (got {wanted})",
                        first.len()
                    ),
                )
                .into());
            }
        }
        Ok(Embeddings {
            model: served,
            vectors,
            tokens,
        })
    }
}

/// The texts' vectors, [`BATCH`] at a time.
fn encode(model: &dyn Reranker, texts: &[String]) -> Result<Vec<Vec<f32>>> {
    let mut vectors = Vec::with_capacity(texts.len());
    for batch in texts.chunks(BATCH) {
        let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
        let batch_vectors = model.embed_queries(&refs)?.ok_or(EmbeddingError::NoModel)?;
        vectors.extend(batch_vectors);
    }
    Ok(vectors)
}

/// Standard base64 (RFC 4648, padded) of the vector's little-endian `f32`s: OpenAI's
/// `encoding_format: "base64"`, which clients decode as a float32 array.
pub fn base64_f32(vector: &[f32]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = vector.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_alphabet_and_padding() {
        // 1.0f32 is 00 00 80 3f; -2.5f32 is 00 00 20 c0.
        assert_eq!(base64_f32(&[1.0]), "AACAPw==");
        assert_eq!(base64_f32(&[1.0, -2.5]), "AACAPwAAIMA=");
        assert_eq!(base64_f32(&[]), "");
        // Three floats: 12 bytes, no padding.
        assert_eq!(base64_f32(&[0.0, 0.0, 0.0]), "AAAAAAAAAAAAAAAA");
    }

    #[test]
    fn the_contract_names_the_input_that_breaks_it() {
        let request = |inputs: Vec<&str>| EmbeddingRequest {
            model: "m".into(),
            inputs: inputs.into_iter().map(String::from).collect(),
            dimensions: None,
        };
        assert_eq!(request(vec!["a", "b"]).check(10), Ok(()));
        assert_eq!(request(vec![]).check(10).unwrap_err().field, "input");
        assert_eq!(
            request(vec!["a", " "]).check(10).unwrap_err().field,
            "input[1]"
        );
        assert_eq!(
            request(vec!["a\0"]).check(10).unwrap_err().field,
            "input[0]"
        );
        assert_eq!(
            request(vec!["abcdefghijk"]).check(10).unwrap_err().field,
            "input[0]"
        );
        let many = request(vec!["x"; MAX_INPUTS + 1]).check(10).unwrap_err();
        assert_eq!(many.field, "input");
    }
}
