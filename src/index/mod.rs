//! BM25 passage indexes on tantivy: one index per collection under
//! `Config::collections_dir()/<name>/`, with a small JSON manifest beside it.
//!
//! Scoring is convrag's own BM25 (`retriever.rs`), computed from tantivy's postings and field norms,
//! because tantivy's built-in BM25 fixes k1 = 1.2 and b = 0.75. The formula and the document-length
//! quantization are Lucene's (and so Anserini's): see `retriever.rs`.

pub mod analysis;
pub mod background;
mod bm25;
pub mod checksum;
pub mod impacts;
#[cfg(test)]
pub mod memory;
mod porter;
mod private;
pub mod query;
pub mod registry;
pub mod retriever;
pub mod topics;
mod topk;
pub mod writer;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tantivy::schema::{
    Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions, FAST, STORED,
    STRING,
};

use crate::collection::{CollectionError, Format, SegmenterConfig};
pub use analysis::Language;
pub use query::{Evaluation, SearchOptions, WeightedQuery};
pub use registry::{CollectionInfo, CollectionRegistry};
pub use retriever::{embedding_key, Hit, Retriever, TantivyRetriever};
pub use writer::{index_collection, IndexOptions, IndexReport};

/// Errors of the index area.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(transparent)]
    Collection(#[from] CollectionError),
    #[error("index {}: {source}", path.display())]
    Tantivy {
        path: PathBuf,
        source: tantivy::TantivyError,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: invalid manifest: {message}", path.display())]
    Manifest { path: PathBuf, message: String },
    #[error("no collection named {name:?} under {}", root.display())]
    NotFound { name: String, root: PathBuf },
    #[error("invalid collection name {0:?}: use letters, digits, '-', '_' and '.', not starting with '.'")]
    InvalidName(String),
    #[error("{0}")]
    Invalid(String),
    /// Not served by this node: its files are not the ones recorded for the name.
    #[error("collection {name:?} is unavailable on this server: {reason}")]
    Refused { name: String, reason: String },
    /// The server's default collection, still being built in the background.
    #[error(
        "the collection {name:?} is being prepared ({percent}% done); try again in a few seconds"
    )]
    Preparing { name: String, percent: u32 },
}

pub type Result<T, E = IndexError> = std::result::Result<T, E>;

/// Reading a query file or writing a run: the file's problems, with their line, as the
/// collection readers report them.
impl From<crate::formats::FormatError> for IndexError {
    fn from(e: crate::formats::FormatError) -> Self {
        use crate::formats::FormatError;
        match e {
            FormatError::Io { path, source } => IndexError::Io { path, source },
            FormatError::Parse {
                path,
                line,
                message,
            } => IndexError::Collection(CollectionError::BadRecord {
                path,
                line: line as u64,
                reason: message,
            }),
            other => IndexError::Invalid(other.to_string()),
        }
    }
}

pub(crate) fn tantivy_err(path: &Path) -> impl Fn(tantivy::TantivyError) -> IndexError + '_ {
    move |source| IndexError::Tantivy {
        path: path.to_path_buf(),
        source,
    }
}

pub(crate) fn io_err(path: &Path) -> impl Fn(std::io::Error) -> IndexError + '_ {
    move |source| IndexError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// BM25 parameters (Anserini's MS MARCO defaults).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Bm25Params {
    pub k1: f32,
    pub b: f32,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Self { k1: 0.9, b: 0.4 }
    }
}

/// Weight of each indexed field in the score: `body` holds the contents (by default title +
/// text, as Pyserini's JsonCollection indexes them); `title` and `headings` are also indexed on
/// their own so they can be boosted. The defaults rank exactly like Anserini's single-field BM25.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FieldWeights {
    pub body: f32,
    pub title: f32,
    pub headings: f32,
}

impl Default for FieldWeights {
    fn default() -> Self {
        Self {
            body: 1.0,
            title: 0.0,
            headings: 0.0,
        }
    }
}

/// The title field's extra weight in collections of HTML pages (BENCHMARKS.md, "Answers that
/// hold"): a page's title (`DROP TABLE — Examples (remove a table)`) names what its passages are
/// about, which their text often does not repeat.
pub const HTML_TITLE_WEIGHT: f32 = 0.5;

impl FieldWeights {
    /// The weights a new collection of `format` is built with: Anserini's single field, except
    /// that HTML pages' titles (the page and the section) count again on their own.
    pub fn for_format(format: Format) -> Self {
        match format {
            Format::Html => Self {
                title: HTML_TITLE_WEIGHT,
                ..Self::default()
            },
            _ => Self::default(),
        }
    }
}

/// Which parts of a record make up the indexed `body` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ContentsPart {
    Title,
    Headings,
    Text,
}

/// `collection.json`: how a collection was built, and what it holds. Written when a collection is
/// created and after every commit. The list of committed shards lives in tantivy's commit payload
/// (so it is atomic with the data); the copy here is for people and `GET /v1/collections`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub name: String,
    pub format: Format,
    pub language: Language,
    pub bm25: Bm25Params,
    pub weights: FieldWeights,
    pub contents: Vec<ContentsPart>,
    pub segmenter: SegmenterConfig,
    pub created: String,
    #[serde(default)]
    pub state: CommitState,
    /// How passages were cut from documents ([`PASSAGE_LAYOUT`] when built; 0 before it was
    /// recorded). A default collection of an older layout is rebuilt.
    #[serde(default)]
    pub layout: u32,
}

/// The passage layout this build writes: 2 keeps documents' code blocks, headings, list items
/// and tables as Markdown in the passage text; 3 writes definition terms that are code (a
/// command's clauses and options) as code spans; 4 keeps the code in table cells as code spans;
/// 5 puts an HTML reference page's purpose in its passages' titles, keeps admonitions (`Note`,
/// `Tip`) in their section and a definition term's code as code spans, and leaves out sections
/// of links alone.
pub const PASSAGE_LAYOUT: u32 = 5;

/// What has been committed: the source of truth is the tantivy commit payload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommitState {
    pub passages: u64,
    pub bad_records: u64,
    pub duplicates: u64,
    pub shards: Vec<ShardState>,
}

/// A fully indexed and committed input file; resuming skips it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardState {
    pub path: String,
    pub size: u64,
    pub passages: u64,
    pub bad_records: u64,
}

pub const MANIFEST_FILE: &str = "collection.json";
pub const TANTIVY_DIR: &str = "tantivy";

/// Named fields of a collection's schema.
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    pub id: Field,
    pub body: Field,
    pub title: Field,
    pub headings: Field,
    pub text: Field,
    pub url: Field,
    pub doc_id: Field,
    pub start_char: Field,
    pub end_char: Field,
    pub meta: Field,
}

pub fn build_schema(language: Language) -> Schema {
    let mut b = Schema::builder();
    let indexed = |stored: bool| {
        let idx = TextFieldIndexing::default()
            .set_tokenizer(language.tokenizer_name())
            .set_index_option(IndexRecordOption::WithFreqs);
        let o = TextOptions::default().set_indexing_options(idx);
        if stored {
            o.set_stored()
        } else {
            o
        }
    };
    b.add_text_field("id", STRING | STORED | FAST);
    b.add_text_field("body", indexed(false));
    b.add_text_field("title", indexed(true));
    b.add_text_field("headings", indexed(true));
    b.add_text_field("text", STORED);
    b.add_text_field("url", STORED);
    b.add_text_field("doc_id", STORED);
    b.add_u64_field("start_char", NumericOptions::default().set_stored());
    b.add_u64_field("end_char", NumericOptions::default().set_stored());
    b.add_text_field("meta", STORED);
    b.build()
}

impl Fields {
    pub fn from_schema(schema: &Schema) -> Result<Self> {
        let f = |name: &str| {
            schema
                .get_field(name)
                .map_err(|_| IndexError::Invalid(format!("index schema lacks field {name:?}")))
        };
        Ok(Self {
            id: f("id")?,
            body: f("body")?,
            title: f("title")?,
            headings: f("headings")?,
            text: f("text")?,
            url: f("url")?,
            doc_id: f("doc_id")?,
            start_char: f("start_char")?,
            end_char: f("end_char")?,
            meta: f("meta")?,
        })
    }
}

/// Checks a collection name is safe as a directory name and URL segment.
pub fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(IndexError::InvalidName(name.to_string()))
    }
}

pub fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join(MANIFEST_FILE);
    let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    let mut de = serde_json::Deserializer::from_str(&text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| IndexError::Manifest {
        path: path.clone(),
        message: e.to_string(),
    })
}

/// Writes the manifest atomically (temp file + rename).
pub fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<()> {
    let path = dir.join(MANIFEST_FILE);
    let json = serde_json::to_string_pretty(manifest).expect("manifest serializes");
    Ok(crate::formats::atomic::write_atomic(
        &path,
        json.as_bytes(),
    )?)
}

/// Opens the tantivy index of a collection directory, with convrag's analyzers registered.
pub fn open_tantivy(dir: &Path, language: Language) -> Result<tantivy::Index> {
    let tdir = dir.join(TANTIVY_DIR);
    let index = tantivy::Index::open_in_dir(&tdir).map_err(tantivy_err(&tdir))?;
    register_analyzers(&index);
    let _ = language;
    Ok(index)
}

pub fn register_analyzers(index: &tantivy::Index) {
    for lang in [Language::English, Language::Polish, Language::Neutral] {
        index
            .tokenizers()
            .register(lang.tokenizer_name(), lang.text_analyzer());
    }
}

/// Reads the committed state from the index's last commit payload.
pub fn committed_state(index: &tantivy::Index, dir: &Path) -> Result<CommitState> {
    let metas = index.load_metas().map_err(tantivy_err(dir))?;
    match metas.payload {
        None => Ok(CommitState::default()),
        Some(p) => serde_json::from_str(&p).map_err(|e| IndexError::Manifest {
            path: dir.join(TANTIVY_DIR).join("meta.json"),
            message: format!("commit payload: {e}"),
        }),
    }
}
