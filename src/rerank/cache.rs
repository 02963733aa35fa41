//! Cache of bi-encoder passage embeddings, keyed by (model checksum, collection, passage id).
//!
//! Passage embeddings do not depend on the query, so a passage is encoded once across turns,
//! conversations, batch runs and processes. [`EmbeddingLog`] keeps one append-only file per
//! (model, collection) under `CONVRAG_HOME/embeddings/`; it can be filled in bulk (`put_many` with
//! many entries) and resumes where an interrupted fill stopped. Beside it, a collection's
//! precomputed vectors (`convrag embed`) sit in a memory-mapped file addressed by passage
//! ordinal, which [`crate::dense::DiskEmbeddingCache`] reads before the log.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::files::{cache_err, io_err, FileLock};
use super::{PassageRef, Result};

/// Where embeddings are kept. `model` is the model's checksum (hex), so a changed model never
/// reads another model's vectors.
pub trait EmbeddingCache: Send + Sync {
    /// The cached embedding of each passage (by id, or by ordinal where it has one), `None`
    /// where absent.
    fn get_many(
        &self,
        model: &str,
        collection: &str,
        passages: &[PassageRef<'_>],
    ) -> Result<Vec<Option<Arc<[f32]>>>>;
    /// Stores embeddings; an id stored twice keeps the last vector.
    fn put_many(&self, model: &str, collection: &str, entries: &[(&str, &[f32])]) -> Result<()>;
}

type Table = HashMap<String, Arc<[f32]>>;

/// Process-local cache (tests, short-lived servers without a data directory).
#[derive(Default)]
pub struct MemoryEmbeddingCache {
    tables: Mutex<HashMap<(String, String), Table>>,
}

impl MemoryEmbeddingCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of stored embeddings over all models and collections.
    pub fn len(&self) -> usize {
        let tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        tables.values().map(|t| t.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl EmbeddingCache for MemoryEmbeddingCache {
    fn get_many(
        &self,
        model: &str,
        collection: &str,
        passages: &[PassageRef<'_>],
    ) -> Result<Vec<Option<Arc<[f32]>>>> {
        let tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        let table = tables.get(&(model.to_string(), collection.to_string()));
        Ok(passages
            .iter()
            .map(|p| table.and_then(|t| t.get(p.id).cloned()))
            .collect())
    }

    fn put_many(&self, model: &str, collection: &str, entries: &[(&str, &[f32])]) -> Result<()> {
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        let table = tables
            .entry((model.to_string(), collection.to_string()))
            .or_default();
        for (id, v) in entries {
            table.insert(id.to_string(), Arc::from(*v));
        }
        Ok(())
    }
}

const MAGIC: &[u8; 8] = b"CVRGEMB1";
const MAX_ID_BYTES: usize = 1 << 16;
const MAX_DIM: usize = 1 << 16;

/// One append-only file per (model, collection) under `root/<model checksum prefix>/`.
///
/// File layout: the 8-byte magic `CVRGEMB1`, then records `u32 id length, id bytes (UTF-8),
/// u32 dimension, dimension × f32`, all little-endian. Writers append under an exclusive `flock`
/// and first cut off a torn last record left by a crashed writer; readers load complete records
/// and re-read the file's new tail when they miss, so entries written by another process are seen.
pub struct EmbeddingLog {
    root: PathBuf,
    files: Mutex<HashMap<(String, String), SharedFile>>,
}

type SharedFile = Arc<Mutex<LoadedFile>>;

struct LoadedFile {
    path: PathBuf,
    /// Bytes of the file already parsed into `table` (always at a record boundary).
    parsed_len: u64,
    table: Table,
}

impl EmbeddingLog {
    /// A log rooted at `root` (conventionally `CONVRAG_HOME/embeddings`); created on first write.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            files: Mutex::new(HashMap::new()),
        }
    }

    /// The directory every model's files are under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file holding `collection`'s embeddings for `model`.
    pub fn file_path(&self, model: &str, collection: &str) -> PathBuf {
        self.model_dir(model)
            .join(format!("{}.emb", sanitize(collection)))
    }

    /// The directory of `model`'s files (its checksum's prefix).
    pub fn model_dir(&self, model: &str) -> PathBuf {
        let model_dir: String = model.chars().take(16).collect();
        self.root.join(sanitize(&model_dir))
    }

    /// Fills the `None`s of `found` (one per passage) with the log's vectors of those passages.
    pub fn fill(
        &self,
        model: &str,
        collection: &str,
        passages: &[PassageRef<'_>],
        found: &mut [Option<Arc<[f32]>>],
    ) -> Result<()> {
        if found.iter().all(Option::is_some) {
            return Ok(());
        }
        let file = self.file(model, collection);
        let mut loaded = file.lock().unwrap_or_else(|e| e.into_inner());
        let missing = |loaded: &LoadedFile, found: &[Option<Arc<[f32]>>]| {
            passages
                .iter()
                .zip(found)
                .any(|(p, f)| f.is_none() && !loaded.table.contains_key(p.id))
        };
        if missing(&loaded, found) {
            // Another process may have added them since we last looked.
            loaded.refresh()?;
        }
        for (p, f) in passages.iter().zip(found.iter_mut()) {
            if f.is_none() {
                *f = loaded.table.get(p.id).cloned();
            }
        }
        Ok(())
    }

    fn file(&self, model: &str, collection: &str) -> Arc<Mutex<LoadedFile>> {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        files
            .entry((model.to_string(), collection.to_string()))
            .or_insert_with(|| {
                Arc::new(Mutex::new(LoadedFile {
                    path: self.file_path(model, collection),
                    parsed_len: 0,
                    table: HashMap::new(),
                }))
            })
            .clone()
    }
}

/// Collection names become file names: keep a safe alphabet, hex-encode anything else.
pub fn sanitize(name: &str) -> String {
    let safe = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if safe {
        name.to_string()
    } else {
        format!("x-{}", hex::encode(name.as_bytes()))
    }
}

impl LoadedFile {
    /// Parses records added since the last call. Returns the offset just past the last complete
    /// record, and whether bytes follow it (a torn or foreign tail).
    fn refresh(&mut self) -> Result<bool> {
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(cache_err(&self.path, format!("cannot open: {e}"))),
        };
        let len = file.metadata().map_err(|e| io_err(&self.path, e))?.len();
        if len < self.parsed_len {
            // Truncated by someone else (torn record cut off): re-read from the start.
            self.parsed_len = 0;
            self.table.clear();
        }
        if len == self.parsed_len {
            return Ok(false);
        }
        let mut start = self.parsed_len;
        if start == 0 {
            let mut magic = [0u8; 8];
            if len < 8 {
                return Ok(true);
            }
            file.read_exact(&mut magic)
                .map_err(|e| io_err(&self.path, e))?;
            if &magic != MAGIC {
                return Err(cache_err(
                    &self.path,
                    "not an embedding cache file (bad magic); delete it to rebuild the cache",
                ));
            }
            start = 8;
        }
        file.seek(SeekFrom::Start(start))
            .map_err(|e| io_err(&self.path, e))?;
        let mut buf = Vec::with_capacity((len - start) as usize);
        file.read_to_end(&mut buf)
            .map_err(|e| io_err(&self.path, e))?;
        let mut pos = 0usize;
        while let Some((id, vector, next)) = parse_record(&buf, pos) {
            self.table.insert(id, vector);
            pos = next;
        }
        self.parsed_len = start + pos as u64;
        Ok(pos < buf.len())
    }
}

fn parse_record(buf: &[u8], pos: usize) -> Option<(String, Arc<[f32]>, usize)> {
    let u32_at = |p: usize| -> Option<usize> {
        buf.get(p..p + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let id_len = u32_at(pos)?;
    if id_len > MAX_ID_BYTES {
        return None;
    }
    let id_bytes = buf.get(pos + 4..pos + 4 + id_len)?;
    let id = std::str::from_utf8(id_bytes).ok()?.to_string();
    let dim_at = pos + 4 + id_len;
    let dim = u32_at(dim_at)?;
    if dim == 0 || dim > MAX_DIM {
        return None;
    }
    let data = buf.get(dim_at + 4..dim_at + 4 + 4 * dim)?;
    let vector: Arc<[f32]> = data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Some((id, vector, dim_at + 4 + 4 * dim))
}

impl EmbeddingCache for EmbeddingLog {
    fn get_many(
        &self,
        model: &str,
        collection: &str,
        passages: &[PassageRef<'_>],
    ) -> Result<Vec<Option<Arc<[f32]>>>> {
        let mut found: Vec<Option<Arc<[f32]>>> = vec![None; passages.len()];
        self.fill(model, collection, passages, &mut found)?;
        Ok(found)
    }

    fn put_many(&self, model: &str, collection: &str, entries: &[(&str, &[f32])]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let file = self.file(model, collection);
        let mut loaded = file.lock().unwrap_or_else(|e| e.into_inner());
        let path = loaded.path.clone();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| cache_err(dir, format!("cannot create directory: {e}")))?;
        }
        let mut out = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| cache_err(&path, format!("cannot open for writing: {e}")))?;
        let _lock = FileLock::lock(&out, &path)?;
        let torn_tail = loaded.refresh()?;
        if torn_tail || loaded.parsed_len == 0 {
            // Cut a torn record left by a crashed writer (or an empty/short header) so appended
            // records stay aligned.
            out.set_len(loaded.parsed_len)
                .map_err(|e| cache_err(&path, format!("cannot truncate torn tail: {e}")))?;
        }
        let mut buf = Vec::new();
        if loaded.parsed_len == 0 {
            buf.extend_from_slice(MAGIC);
        }
        for (id, v) in entries {
            if id.len() > MAX_ID_BYTES || v.is_empty() || v.len() > MAX_DIM {
                return Err(cache_err(
                    &path,
                    format!("cannot store id {id:?} with {} dimensions", v.len()),
                ));
            }
            buf.extend_from_slice(&(id.len() as u32).to_le_bytes());
            buf.extend_from_slice(id.as_bytes());
            buf.extend_from_slice(&(v.len() as u32).to_le_bytes());
            for x in v.iter() {
                buf.extend_from_slice(&x.to_le_bytes());
            }
        }
        out.write_all(&buf)
            .and_then(|_| out.flush())
            .map_err(|e| cache_err(&path, format!("cannot append: {e}")))?;
        // Our own records are read back by the next refresh; only the table needs them now.
        for (id, v) in entries {
            loaded.table.insert(id.to_string(), Arc::from(*v));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs<'a>(ids: &[&'a str]) -> Vec<PassageRef<'a>> {
        ids.iter()
            .map(|id| PassageRef {
                id,
                text: "",
                ordinal: None,
            })
            .collect()
    }

    #[test]
    fn memory_cache_round_trip() {
        let cache = MemoryEmbeddingCache::new();
        cache
            .put_many("m", "c", &[("a", &[1.0, 2.0]), ("b", &[3.0, 4.0])])
            .unwrap();
        let got = cache.get_many("m", "c", &refs(&["b", "x", "a"])).unwrap();
        assert_eq!(got[0].as_deref(), Some(&[3.0, 4.0][..]));
        assert!(got[1].is_none());
        assert_eq!(got[2].as_deref(), Some(&[1.0, 2.0][..]));
        // Other model or collection: nothing.
        assert!(cache.get_many("m2", "c", &refs(&["a"])).unwrap()[0].is_none());
        assert!(cache.get_many("m", "c2", &refs(&["a"])).unwrap()[0].is_none());
    }

    #[test]
    fn disk_cache_persists_across_instances_and_sees_other_writers() {
        let dir = tempfile::tempdir().unwrap();
        let first = EmbeddingLog::new(dir.path());
        first
            .put_many("abc", "msmarco", &[("d1", &[0.5, -0.5])])
            .unwrap();
        let second = EmbeddingLog::new(dir.path());
        assert_eq!(
            second.get_many("abc", "msmarco", &refs(&["d1"])).unwrap()[0].as_deref(),
            Some(&[0.5, -0.5][..])
        );
        // A write by `second` is visible to `first`, which loaded the file earlier.
        first.get_many("abc", "msmarco", &refs(&["d1"])).unwrap();
        second
            .put_many("abc", "msmarco", &[("d2", &[1.0, 0.0])])
            .unwrap();
        assert_eq!(
            first.get_many("abc", "msmarco", &refs(&["d2"])).unwrap()[0].as_deref(),
            Some(&[1.0, 0.0][..])
        );
    }

    #[test]
    fn torn_tail_is_cut_and_appends_stay_readable() {
        let dir = tempfile::tempdir().unwrap();
        let cache = EmbeddingLog::new(dir.path());
        cache.put_many("m", "c", &[("a", &[1.0])]).unwrap();
        let path = cache.file_path("m", "c");
        // A crashed writer left half a record.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[5, 0, 0, 0, b'h', b'a']).unwrap();
        drop(f);
        let other = EmbeddingLog::new(dir.path());
        other.put_many("m", "c", &[("b", &[2.0])]).unwrap();
        let fresh = EmbeddingLog::new(dir.path());
        let got = fresh.get_many("m", "c", &refs(&["a", "b"])).unwrap();
        assert_eq!(got[0].as_deref(), Some(&[1.0][..]));
        assert_eq!(got[1].as_deref(), Some(&[2.0][..]));
    }

    #[test]
    fn foreign_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let cache = EmbeddingLog::new(dir.path());
        let path = cache.file_path("m", "c");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"hello world, not a cache").unwrap();
        let text = cache
            .get_many("m", "c", &refs(&["a"]))
            .unwrap_err()
            .to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
    }

    #[test]
    fn odd_collection_names_become_safe_file_names() {
        let cache = EmbeddingLog::new("/root");
        let p = cache.file_path("0123456789abcdef0123", "../etc/passwd");
        assert!(p.starts_with("/root/0123456789abcdef"));
        assert!(!p.to_string_lossy().contains(".."));
    }
}
