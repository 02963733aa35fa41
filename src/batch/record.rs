//! What a batch run is: the facts that decide its output (settings, model and input checksums,
//! collection manifests, convrag version), kept in the `batch_runs` table and written next to the
//! output as `<output>.meta.json`. A run resumes only when every fact is unchanged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{BatchError, Result};
use crate::store::batch_runs::NewBatchRun;
use crate::store::Store;

/// An input file of the run, by role (`topics`, `ranking`, `requests`, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputFile {
    pub path: String,
    pub sha256: String,
}

/// The reranking model a run uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRecord {
    /// As the model names itself (`all-MiniLM-L6-v2@5e5adaba0d2b`).
    pub id: String,
    /// SHA-256 of the ONNX file.
    pub sha256: String,
    /// SHA-256 of every file of the model directory (ONNX file, tokenizer, manifest).
    pub files: BTreeMap<String, String>,
}

/// The facts a run's output depends on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub name: String,
    pub task: String,
    pub settings: Value,
    pub model: Option<ModelRecord>,
    /// `collection.json` of every collection retrieved from, by name.
    pub collections: BTreeMap<String, Value>,
    pub inputs: BTreeMap<String, InputFile>,
    pub convrag_version: String,
}

/// The key of `settings` holding options of the output only (not compared on resume).
pub const OUTPUT_OPTIONS: &str = "output";

/// A run as stored.
#[derive(Debug, Clone)]
pub struct StoredRun {
    pub record: RunRecord,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// SHA-256 of a file, hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let d = crate::digest::file_sha256(path).map_err(|source| BatchError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(d.sha256)
}

/// The record of an input file.
pub fn input_file(path: &Path) -> Result<InputFile> {
    Ok(InputFile {
        path: path.display().to_string(),
        sha256: sha256_file(path)?,
    })
}

/// The record of the model in `dir` as loaded under `id`: every regular file's checksum.
pub fn model_record(dir: &Path, id: String) -> Result<ModelRecord> {
    let io = |source| BatchError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        if entry.file_type().map_err(io)?.is_file() {
            let name = entry.file_name().to_string_lossy().into_owned();
            files.insert(name, sha256_file(&entry.path())?);
        }
    }
    // The manifest names the ONNX file ("model"); model.onnx by convention.
    let onnx = std::fs::read_to_string(dir.join("manifest.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|m| m.get("model").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "model.onnx".to_string());
    let sha256 = files.get(&onnx).cloned().unwrap_or_default();
    Ok(ModelRecord { id, sha256, files })
}

impl RunRecord {
    /// What must not change between an interrupted run and its resumption, as flat
    /// `path → value` pairs (input paths may change; their content may not).
    fn comparable(&self) -> BTreeMap<String, String> {
        let mut view = serde_json::json!({
            "task": self.task,
            "settings": self.settings,
            "model": self.model.as_ref().map(|m| serde_json::json!({"sha256": m.sha256, "files": m.files})),
            "collections": self.collections,
            "convrag_version": self.convrag_version,
        });
        let inputs: serde_json::Map<String, Value> = self
            .inputs
            .iter()
            .map(|(role, f)| (role.clone(), Value::String(f.sha256.clone())))
            .collect();
        view["inputs"] = Value::Object(inputs);
        // How the stored turns are written out (list of statements, answer layout) may change:
        // the turns do not depend on it.
        if let Some(settings) = view["settings"].as_object_mut() {
            settings.remove(OUTPUT_OPTIONS);
        }
        let mut flat = BTreeMap::new();
        flatten("", &view, &mut flat);
        flat
    }

    /// The facts that differ from `recorded`, one line each: `what: recorded X, now Y`.
    pub fn differences(&self, recorded: &RunRecord) -> Vec<String> {
        let now = self.comparable();
        let then = recorded.comparable();
        let mut keys: Vec<&String> = now.keys().chain(then.keys()).collect();
        keys.sort();
        keys.dedup();
        let show = |v: Option<&String>| v.cloned().unwrap_or_else(|| "(absent)".into());
        keys.into_iter()
            .filter(|k| now.get(*k) != then.get(*k))
            .map(|k| {
                let mut what = k.clone();
                if let Some(role) = k.strip_prefix("inputs.") {
                    what = format!("input file {role} (SHA-256)");
                }
                format!(
                    "{what}: recorded {}, now {}",
                    show(then.get(k)),
                    show(now.get(k))
                )
            })
            .collect()
    }
}

fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// The stored run named `name` of `user_id`, if any.
pub async fn load(store: &Store, user_id: i64, name: &str) -> Result<Option<StoredRun>> {
    let Some(r) = store.batch_run(user_id, name).await? else {
        return Ok(None);
    };
    fn decode<T: serde::de::DeserializeOwned>(name: &str, what: &str, v: Value) -> Result<T> {
        serde_json::from_value(v).map_err(|e| {
            BatchError::Resume(format!("run {name}: stored {what} is unreadable ({e})"))
        })
    }
    let model = match (r.model_id, r.model_sha256) {
        (Some(id), Some(sha256)) => Some(ModelRecord {
            id,
            sha256,
            files: decode(name, "model files", r.model_files)?,
        }),
        _ => None,
    };
    Ok(Some(StoredRun {
        record: RunRecord {
            name: r.name,
            task: r.task,
            settings: r.settings,
            model,
            collections: decode(name, "collections", r.collections)?,
            inputs: decode(name, "inputs", r.inputs)?,
            convrag_version: r.convrag_version,
        },
        created_at: r.created_at,
        finished_at: r.finished_at,
    }))
}

/// Stores a new run; `None` when another process stored a run of that name first.
pub async fn insert(store: &Store, user_id: i64, record: &RunRecord) -> Result<Option<StoredRun>> {
    let run = NewBatchRun {
        name: &record.name,
        task: &record.task,
        settings: &record.settings,
        model_id: record.model.as_ref().map(|m| m.id.as_str()),
        model_sha256: record.model.as_ref().map(|m| m.sha256.as_str()),
        model_files: json(
            &record
                .model
                .as_ref()
                .map(|m| m.files.clone())
                .unwrap_or_default(),
        ),
        collections: json(&record.collections),
        inputs: json(&record.inputs),
        convrag_version: &record.convrag_version,
    };
    let created_at = store.insert_batch_run(user_id, &run).await?;
    Ok(created_at.map(|created_at| StoredRun {
        record: record.clone(),
        created_at,
        finished_at: None,
    }))
}

/// Records the written output and the settings it was written with (output options may
/// differ from an earlier invocation's); returns when the run's turns were first complete.
pub async fn finish(
    store: &Store,
    user_id: i64,
    record: &RunRecord,
    output: &Path,
    sha256: &str,
) -> Result<DateTime<Utc>> {
    let path = output.display().to_string();
    Ok(store
        .finish_batch_run(user_id, &record.name, &path, sha256, &record.settings)
        .await?)
}

/// Deletes a run with all its conversations (`--restart`).
pub async fn delete(store: &Store, user_id: i64, name: &str) -> Result<u64> {
    Ok(store.delete_batch_run(user_id, name).await?)
}

/// Turn counts of one invocation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TurnCounts {
    pub total: usize,
    /// Found stored (an earlier, interrupted invocation computed them).
    pub resumed: usize,
    /// Computed by this invocation.
    pub computed: usize,
}

/// `<output>.meta.json`: the run's record plus what it wrote.
#[derive(Debug, Serialize)]
pub struct Sidecar<'a> {
    #[serde(flatten)]
    pub record: &'a RunRecord,
    pub created_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub output: OutputRecord,
    pub turns: TurnCounts,
}

#[derive(Debug, Serialize)]
pub struct OutputRecord {
    pub path: String,
    pub sha256: String,
    pub bytes: usize,
}

/// Where the sidecar of `output` goes.
pub fn sidecar_path(output: &Path) -> PathBuf {
    let mut name = output
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".meta.json");
    output.with_file_name(name)
}

/// Writes the sidecar atomically.
pub fn write_sidecar(output: &Path, sidecar: &Sidecar<'_>) -> Result<PathBuf> {
    let path = sidecar_path(output);
    let mut text = serde_json::to_string_pretty(sidecar).map_err(|e| {
        BatchError::Format(crate::formats::FormatError::Invalid(format!(
            "sidecar: {e}"
        )))
    })?;
    text.push('\n');
    crate::formats::atomic::write_atomic(&path, text.as_bytes())?;
    Ok(path)
}

/// Record parts as JSON for binding (plain data: serialization cannot fail).
fn json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> RunRecord {
        RunRecord {
            name: "r".into(),
            task: "ikat".into(),
            settings: serde_json::json!({"turn": {"depth": 100, "rerank": true}, "stages": ["ptkb"]}),
            model: None,
            collections: BTreeMap::new(),
            inputs: [(
                "topics".to_string(),
                InputFile {
                    path: "a.json".into(),
                    sha256: "aa".into(),
                },
            )]
            .into(),
            convrag_version: "0.1.0".into(),
        }
    }

    #[test]
    fn differences_name_the_setting_and_ignore_input_paths() {
        let a = record();
        let mut b = record();
        assert!(b.differences(&a).is_empty());
        b.inputs.get_mut("topics").unwrap().path = "elsewhere/a.json".into();
        assert!(b.differences(&a).is_empty());
        b.settings["turn"]["depth"] = 50.into();
        b.inputs.get_mut("topics").unwrap().sha256 = "bb".into();
        let d = b.differences(&a);
        assert_eq!(
            d,
            vec![
                "input file topics (SHA-256): recorded \"aa\", now \"bb\"".to_string(),
                "settings.turn.depth: recorded 100, now 50".to_string(),
            ]
        );
    }

    #[test]
    fn sidecar_sits_next_to_the_output() {
        assert_eq!(
            sidecar_path(Path::new("runs/a.json")),
            PathBuf::from("runs/a.json.meta.json")
        );
    }
}
