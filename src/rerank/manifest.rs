//! `manifest.json` next to a model: what kind of model it is and how to feed it.
//!
//! ```json
//! {"kind": "bi-encoder", "model": "model.onnx", "tokenizer": "tokenizer.json", "max_length": 256,
//!  "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask", "token_type_ids": "token_type_ids"},
//!  "output": "last_hidden_state", "pooling": "mean", "normalize": true}
//! ```
//! A cross-encoder has `"kind": "cross-encoder"`, `"output": "logits"` (shape [batch, 1], or
//! [batch, 2] with `"logit_index": 1`) and no pooling.
//!
//! Exporting a trained cross-encoder on a machine with Hugging Face hub access:
//! ```text
//! pip install "optimum[onnxruntime]"
//! optimum-cli export onnx --model cross-encoder/ms-marco-MiniLM-L-6-v2 \
//!     --task text-classification DIR
//! ```
//! then write `DIR/manifest.json` with `"kind": "cross-encoder"`, `"model": "model.onnx"`,
//! `"output": "logits"`, the graph's input names (XLM-R models such as bge-reranker have no
//! `token_type_ids`: leave it out) and `max_length` (512 for both).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{RerankError, Result};

pub const MANIFEST_FILE: &str = "manifest.json";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// Query and passage encoded separately; score = cosine of pooled embeddings.
    BiEncoder,
    /// `[CLS] query [SEP] passage [SEP]` → one relevance logit.
    CrossEncoder,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pooling {
    /// Average of the token vectors under the attention mask (sentence-transformers default).
    Mean,
    /// The first token's vector.
    Cls,
}

/// Names of the graph inputs; `token_type_ids` may be absent for models without segments.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputNames {
    pub input_ids: String,
    pub attention_mask: String,
    #[serde(default)]
    pub token_type_ids: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelManifest {
    pub kind: ModelKind,
    /// ONNX file, relative to the model directory.
    pub model: String,
    /// sha256 of the ONNX file as recorded by whoever made the directory (informational; convrag
    /// hashes the file itself for cache keys).
    #[serde(default)]
    pub model_sha256: Option<String>,
    pub tokenizer: String,
    /// Longest sequence fed to the model, special tokens included.
    pub max_length: usize,
    pub inputs: InputNames,
    pub output: String,
    #[serde(default)]
    pub pooling: Option<Pooling>,
    #[serde(default)]
    pub normalize: bool,
    /// For cross-encoders with several logits per pair: which one is "relevant" (default 0).
    #[serde(default)]
    pub logit_index: usize,
    #[serde(default)]
    pub source: Option<String>,
}

impl ModelManifest {
    /// Reads and validates `dir/manifest.json`.
    pub fn load(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST_FILE);
        let err = |reason: String| RerankError::Model {
            path: path.clone(),
            reason,
        };
        if !dir.is_dir() {
            return Err(RerankError::Model {
                path: dir.to_path_buf(),
                reason: "model directory not found; expected a directory with manifest.json, \
                         model.onnx and tokenizer.json (run scripts/fetch-models.sh)"
                    .to_string(),
            });
        }
        let text = std::fs::read_to_string(&path).map_err(|e| {
            err(format!(
                "cannot read it ({e}); expected a JSON manifest (kind, model, tokenizer, max_length, inputs, output)"
            ))
        })?;
        let mut de = serde_json::Deserializer::from_str(&text);
        let manifest: ModelManifest = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let line = e.inner().line();
            RerankError::Input {
                path: path.clone(),
                line,
                reason: format!("invalid manifest at {}: {}", e.path(), e.inner()),
            }
        })?;
        if manifest.max_length < 8 {
            return Err(err(format!(
                "max_length {} is too small (at least 8)",
                manifest.max_length
            )));
        }
        if manifest.kind == ModelKind::BiEncoder && manifest.pooling.is_none() {
            return Err(err(
                "a bi-encoder needs \"pooling\": \"mean\" or \"cls\"".to_string()
            ));
        }
        Ok(manifest)
    }

    pub fn model_path(&self, dir: &Path) -> PathBuf {
        dir.join(&self.model)
    }

    pub fn tokenizer_path(&self, dir: &Path) -> PathBuf {
        dir.join(&self.tokenizer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_manifest_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(MANIFEST_FILE),
            "{\n  \"kind\": \"bi-encoder\",\n  \"model\": 3\n}\n",
        )
        .unwrap();
        let text = ModelManifest::load(dir.path()).unwrap_err().to_string();
        assert!(text.contains("manifest.json:3:"), "{text}");
        assert!(text.contains("model"), "{text}");
    }

    #[test]
    fn unknown_kind_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(MANIFEST_FILE),
            r#"{"kind": "poly-encoder", "model": "m.onnx", "tokenizer": "t.json", "max_length": 128,
                "inputs": {"input_ids": "a", "attention_mask": "b"}, "output": "o"}"#,
        )
        .unwrap();
        let text = ModelManifest::load(dir.path()).unwrap_err().to_string();
        assert!(text.contains("poly-encoder"), "{text}");
    }

    #[test]
    fn missing_directory_says_what_is_expected() {
        let text = ModelManifest::load(Path::new("/nonexistent/model"))
            .unwrap_err()
            .to_string();
        assert!(text.contains("/nonexistent/model"), "{text}");
        assert!(text.contains("manifest.json"), "{text}");
    }
}
