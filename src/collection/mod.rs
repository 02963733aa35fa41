//! Passage collections: streaming readers for every input format convrag indexes, and the
//! TREC DL / iKAT segmenter that cuts documents into passages.
//!
//! Readers are pure: they turn one input file into [`Record`]s and [`BadRecord`]s, each with the
//! 1-based line it came from. What to do with a bad record (count and skip, or stop under
//! `--strict`) and cross-file checks such as duplicate ids belong to the caller (the indexer).

pub mod documents;
mod readers;
pub mod segment;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

pub use readers::read_file;
pub use segment::{segment_document, split_sentences, SegmenterConfig, Sentence};

/// Errors of the collection readers.
#[derive(Debug, thiserror::Error)]
pub enum CollectionError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A bad record that the caller decided to treat as fatal (`--strict`).
    #[error("{}:{line}: {reason}", path.display())]
    BadRecord {
        path: PathBuf,
        line: u64,
        reason: String,
    },
    #[error("{0}")]
    Other(String),
}

pub type Result<T, E = CollectionError> = std::result::Result<T, E>;

/// One passage (segment) ready for indexing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Record {
    /// Passage id as it appears in runs and qrels (e.g. `msmarco_v2.1_doc_52_1274794243#7_2564847343`).
    pub id: String,
    pub title: String,
    pub url: String,
    /// Headings of the source document, newline-separated (MS MARCO v2.1 layout).
    pub headings: String,
    /// The passage text itself.
    pub text: String,
    /// Id of the document the passage was cut from, when known.
    pub doc_id: Option<String>,
    /// Character (Unicode scalar) offsets of the passage in that document.
    pub start_char: Option<u64>,
    pub end_char: Option<u64>,
    /// Any other metadata of the record, as a JSON string (PolEval `meta`, candidate query ids).
    pub meta: Option<String>,
}

/// A record that could not be read: which file, which line, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct BadRecord {
    pub path: PathBuf,
    pub line: u64,
    pub reason: String,
}

impl fmt::Display for BadRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path.display(), self.line, self.reason)
    }
}

impl BadRecord {
    pub fn into_error(self) -> CollectionError {
        CollectionError::BadRecord {
            path: self.path,
            line: self.line,
            reason: self.reason,
        }
    }
}

/// What a reader hands to its sink: a record with its line, or a bad record.
#[derive(Debug)]
pub enum Item {
    Record { line: u64, record: Record },
    Bad(BadRecord),
}

/// Input formats `convrag index --format` accepts.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// MS MARCO v2.1 segment shards (`msmarco_v2.1_doc_segmented_XX.json.gz`), one segment a line.
    #[value(name = "msmarco-v2.1-segmented")]
    #[serde(rename = "msmarco-v2.1-segmented")]
    MsmarcoV21Segmented,
    /// MS MARCO v2.1 document shards (docid, url, title, headings, body), segmented by convrag.
    #[value(name = "msmarco-v2.1-doc")]
    #[serde(rename = "msmarco-v2.1-doc")]
    MsmarcoV21Doc,
    /// iKAT passages JSONL (`{"id": "clueweb22-...:N", "contents"|"text", ...}`).
    IkatPassages,
    /// PolEval 2022 `passages.jl` (`{"id", "title", "text", "meta"}`).
    Poleval,
    /// Pyserini JsonCollection JSONL: `id` + `contents`, or `id` + `title` + `text`.
    Jsonl,
    /// TREC DL candidate files: a JSON array of `{"query", "hits": [{"content", "docid", ...}]}`.
    TrecDlCandidates,
    /// A folder of plain text / Markdown files, each segmented like a document.
    Text,
    /// A SMART-format collection such as Cranfield's `cran.all.1400` (`.I/.T/.A/.B/.W`).
    Smart,
    /// A folder of HTML pages: title, headings and text by section, navigation dropped.
    Html,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::MsmarcoV21Segmented => "msmarco-v2.1-segmented",
            Format::MsmarcoV21Doc => "msmarco-v2.1-doc",
            Format::IkatPassages => "ikat-passages",
            Format::Poleval => "poleval",
            Format::Jsonl => "jsonl",
            Format::TrecDlCandidates => "trec-dl-candidates",
            Format::Text => "text",
            Format::Smart => "smart",
            Format::Html => "html",
        }
    }

    /// Whether a file found while walking a directory belongs to this format.
    fn accepts(self, path: &Path) -> bool {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        if name.starts_with('.') {
            return false;
        }
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        match self {
            Format::Text => {
                name.ends_with(".txt") || name.ends_with(".md") || name.ends_with(".markdown")
            }
            Format::Smart => true,
            Format::Html => {
                name.ends_with(".html") || name.ends_with(".htm") || name.ends_with(".xhtml")
            }
            Format::TrecDlCandidates => name.ends_with(".json") || name.ends_with(".jsonl"),
            _ => name.ends_with(".json") || name.ends_with(".jsonl") || name.ends_with(".jl"),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Options shared by all readers.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    pub segmenter: SegmenterConfig,
    /// Directory the input was named by, so text-folder ids are paths relative to it.
    pub root: Option<PathBuf>,
    /// Incremented with the (compressed) bytes read, for progress bars.
    pub bytes_read: Option<Arc<AtomicU64>>,
}

/// One input file ("shard") with the root it was found under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    pub path: PathBuf,
    pub root: PathBuf,
    pub size: u64,
}

/// Expands the paths given on the command line into input files, sorted, directories walked
/// recursively and filtered by the format's file extensions.
pub fn list_inputs(format: Format, paths: &[PathBuf]) -> Result<Vec<InputFile>> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|source| CollectionError::Io {
            path: p.clone(),
            source,
        })?;
        if meta.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found)?;
            found.sort();
            for f in found {
                if format.accepts(&f) {
                    let size = std::fs::metadata(&f).map(|m| m.len()).unwrap_or(0);
                    out.push(InputFile {
                        path: f,
                        root: p.clone(),
                        size,
                    });
                }
            }
        } else {
            let root = p.parent().map(Path::to_path_buf).unwrap_or_default();
            out.push(InputFile {
                path: p.clone(),
                root,
                size: meta.len(),
            });
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|source| CollectionError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| CollectionError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        let ft = entry.file_type().map_err(|source| CollectionError::Io {
            path: path.clone(),
            source,
        })?;
        if ft.is_dir() {
            walk(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}
