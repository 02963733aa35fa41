//! A collection's precomputed passage embeddings as one memory-mapped file of fixed-width float32
//! records addressed by passage ordinal (`Hit::ordinal`), so a server over millions of passages
//! maps the file instead of reading it into memory and finds a vector with one multiplication.
//!
//! Layout: a 32-byte header (`CVRGVEC1`, the dimension as u32, zeros), then one record per
//! ordinal: the passage id's FNV-1a 64-bit hash, then `dimension` f32, all little-endian. A hash
//! of 0 marks an ordinal with no vector (a deleted document). Records are written in ordinal order
//! by `convrag embed` under an exclusive `flock`; a writer first cuts a torn last record, so an
//! interrupted fill resumes at the first ordinal not written. The hash is checked on every read:
//! a vector is only ever returned for the id it was computed from, whatever the index became.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use memmap2::Mmap;

use crate::rerank::files::{cache_err, io_err, lock_exclusive};
use crate::rerank::Result;

const MAGIC: &[u8; 8] = b"CVRGVEC1";
const HEADER: u64 = 32;
const MAX_DIM: usize = 1 << 16;

/// The 64-bit FNV-1a hash of a passage id (never 0: 0 marks an empty record).
pub fn id_hash(id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h.max(1)
}

fn record_bytes(dim: usize) -> u64 {
    8 + 4 * dim as u64
}

/// Reads and checks the header; returns the dimension.
fn read_header(file: &mut File, path: &Path) -> Result<usize> {
    let mut header = [0u8; HEADER as usize];
    file.read_exact(&mut header)
        .map_err(|e| cache_err(path, format!("cannot read the header: {e}")))?;
    if &header[..8] != MAGIC {
        return Err(cache_err(
            path,
            "not a passage vector file (bad magic); delete it and run `convrag embed` again",
        ));
    }
    let dim = u32::from_le_bytes([header[8], header[9], header[10], header[11]]) as usize;
    if dim == 0 || dim > MAX_DIM {
        return Err(cache_err(
            path,
            format!("bad dimension {dim} in the header"),
        ));
    }
    Ok(dim)
}

/// A read-only view of a vector file; sees records appended after it was opened.
pub struct VectorFile {
    path: PathBuf,
    dim: usize,
    map: RwLock<Arc<Mmap>>,
}

impl VectorFile {
    /// Opens `path`; `Ok(None)` when there is no such file.
    pub fn open(path: &Path) -> Result<Option<Self>> {
        let mut file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(cache_err(path, format!("cannot open: {e}"))),
        };
        let dim = read_header(&mut file, path)?;
        let map = map_file(&file, path)?;
        Ok(Some(Self {
            path: path.to_path_buf(),
            dim,
            map: RwLock::new(Arc::new(map)),
        }))
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Complete records in the current mapping.
    pub fn len(&self) -> u64 {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner()).clone();
        complete_records(map.len() as u64, self.dim)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Complete records in the file now (remapped when records were appended since).
    pub fn current_len(&self) -> Result<u64> {
        let map = self.remapped()?;
        Ok(complete_records(map.len() as u64, self.dim))
    }

    /// The current mapping, remapped first when the file has grown since it was mapped.
    fn remapped(&self) -> Result<Arc<Mmap>> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner()).clone();
        let file = File::open(&self.path)
            .map_err(|e| cache_err(&self.path, format!("cannot open: {e}")))?;
        let grown = file.metadata().map_err(|e| io_err(&self.path, e))?.len();
        if grown <= map.len() as u64 {
            return Ok(map);
        }
        let fresh = Arc::new(map_file(&file, &self.path)?);
        *self.map.write().unwrap_or_else(|e| e.into_inner()) = fresh.clone();
        Ok(fresh)
    }

    /// The vector stored at each `(ordinal, id)`, `None` where there is none or it belongs to
    /// another id.
    pub fn get_many(&self, keys: &[(u64, &str)]) -> Result<Vec<Option<Arc<[f32]>>>> {
        let mut map = self.map.read().unwrap_or_else(|e| e.into_inner()).clone();
        let n = complete_records(map.len() as u64, self.dim);
        if keys.iter().any(|(ord, _)| *ord >= n) {
            // Records may have been appended since the file was mapped.
            map = self.remapped()?;
        }
        let n = complete_records(map.len() as u64, self.dim);
        let size = record_bytes(self.dim);
        Ok(keys
            .iter()
            .map(|&(ord, id)| {
                if ord >= n {
                    return None;
                }
                let start = (HEADER + ord * size) as usize;
                let record = &map[start..start + size as usize];
                let hash = u64::from_le_bytes(record[..8].try_into().expect("8 bytes"));
                if hash != id_hash(id) {
                    return None;
                }
                Some(
                    record[8..]
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                )
            })
            .collect())
    }
}

impl VectorFile {
    /// The vectors of ordinals `range` (past the end: cut short), `None` for an empty record;
    /// read in file order, for building another index over the same vectors.
    pub fn records(&self, range: std::ops::Range<u64>) -> Result<Vec<Option<Vec<f32>>>> {
        let map = self.remapped()?;
        let n = complete_records(map.len() as u64, self.dim);
        let size = record_bytes(self.dim) as usize;
        Ok((range.start.min(n)..range.end.min(n))
            .map(|ord| {
                let start = HEADER as usize + ord as usize * size;
                let record = &map[start..start + size];
                let hash = u64::from_le_bytes(record[..8].try_into().expect("8 bytes"));
                (hash != 0).then(|| {
                    record[8..]
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect()
                })
            })
            .collect())
    }
}

/// A stored record found by [`VectorFile::nearest`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Neighbour {
    pub ordinal: u64,
    /// The hash of the passage id the vector was computed from ([`id_hash`]).
    pub id_hash: u64,
    /// Cosine similarity with the query.
    pub score: f32,
}

/// Records scanned per task: large enough that a task outweighs its scheduling, small enough
/// that both cores stay busy to the end.
const SCAN_CHUNK: u64 = 8192;

impl VectorFile {
    /// The `k` records most similar to `query` by cosine, best first (ties by ordinal), over
    /// every record in the file: an exact search, chunked over rayon's threads.
    pub fn nearest(&self, query: &[f32], k: usize) -> Result<Vec<Neighbour>> {
        use rayon::prelude::*;
        if query.len() != self.dim {
            return Err(cache_err(
                &self.path,
                format!(
                    "a {}-dimensional query for {}-dimensional vectors",
                    query.len(),
                    self.dim
                ),
            ));
        }
        let map = self.remapped()?;
        let n = complete_records(map.len() as u64, self.dim);
        if k == 0 || n == 0 {
            return Ok(Vec::new());
        }
        let query_norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
        let starts: Vec<u64> = (0..n).step_by(SCAN_CHUNK as usize).collect();
        let mut best: Vec<Neighbour> = starts
            .par_iter()
            .map(|&start| {
                let end = (start + SCAN_CHUNK).min(n);
                self.scan(&map, start..end, query, query_norm, k)
            })
            .reduce(Vec::new, |mut a, b| {
                a.extend(b);
                a
            });
        sort_best_first(&mut best);
        best.truncate(k);
        Ok(best)
    }

    /// The best `k` records of `range` (unsorted).
    fn scan(
        &self,
        map: &Mmap,
        range: std::ops::Range<u64>,
        query: &[f32],
        query_norm: f32,
        k: usize,
    ) -> Vec<Neighbour> {
        let size = record_bytes(self.dim) as usize;
        let mut best: Vec<Neighbour> = Vec::with_capacity(2 * k.min(SCAN_CHUNK as usize));
        for ordinal in range {
            let start = HEADER as usize + ordinal as usize * size;
            let record = &map[start..start + size];
            let (hash, vector) = record.split_at(8);
            let id_hash = u64::from_le_bytes(hash.try_into().unwrap_or_default());
            if id_hash == 0 {
                continue;
            }
            let score = cosine_le(query, query_norm, vector);
            best.push(Neighbour {
                ordinal,
                id_hash,
                score,
            });
            if best.len() >= 2 * k.max(1024) {
                keep_best(&mut best, k);
            }
        }
        keep_best(&mut best, k);
        best
    }
}

/// Orders by score descending, then ordinal ascending.
fn sort_best_first(v: &mut [Neighbour]) {
    v.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.ordinal.cmp(&b.ordinal))
    });
}

/// Keeps the best `k` of `v` (in no particular order).
fn keep_best(v: &mut Vec<Neighbour>, k: usize) {
    if v.len() > k {
        let better = |a: &Neighbour, b: &Neighbour| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.ordinal.cmp(&b.ordinal))
        };
        v.select_nth_unstable_by(k, better);
        v.truncate(k);
    }
}

/// Cosine of `query` (of norm `query_norm`) with a stored vector of little-endian f32, computed
/// as the reranker's cosine is, so a passage scores the same found either way; 0 for a zero
/// vector.
fn cosine_le(query: &[f32], query_norm: f32, stored: &[u8]) -> f32 {
    let mut dot = 0.0f32;
    let mut norm = 0.0f32;
    for (q, c) in query.iter().zip(stored.chunks_exact(4)) {
        let x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        dot += q * x;
        norm += x * x;
    }
    let norm = norm.sqrt();
    if query_norm == 0.0 || norm == 0.0 {
        0.0
    } else {
        dot / (query_norm * norm)
    }
}

fn complete_records(file_len: u64, dim: usize) -> u64 {
    file_len.saturating_sub(HEADER) / record_bytes(dim)
}

fn map_file(file: &File, path: &Path) -> Result<Mmap> {
    // SAFETY: the file is only ever appended to, and a writer truncates nothing but a torn record
    // past the last complete one; readers index complete records of their mapping only, so no
    // mapped byte they read is changed or removed while mapped.
    unsafe { Mmap::map(file) }.map_err(|e| cache_err(path, format!("cannot map: {e}")))
}

/// The one writer of a vector file: holds its lock until dropped.
pub struct VectorWriter {
    path: PathBuf,
    file: File,
    dim: usize,
    len: u64,
}

impl VectorWriter {
    /// Opens (or creates) `path` for vectors of `dim` dimensions, waiting for another writer to
    /// finish, and cuts a torn last record.
    pub fn open(path: &Path, dim: usize) -> Result<Self> {
        if dim == 0 || dim > MAX_DIM {
            return Err(cache_err(
                path,
                format!("cannot store {dim}-dimensional vectors"),
            ));
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| cache_err(dir, format!("cannot create directory: {e}")))?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| cache_err(path, format!("cannot open for writing: {e}")))?;
        lock_exclusive(&file, path)?;
        let file_len = file.metadata().map_err(|e| io_err(path, e))?.len();
        if file_len < HEADER {
            // New, or a writer died before finishing the header.
            let mut header = [0u8; HEADER as usize];
            header[..8].copy_from_slice(MAGIC);
            header[8..12].copy_from_slice(&(dim as u32).to_le_bytes());
            file.set_len(0)
                .and_then(|_| file.write_all(&header))
                .and_then(|_| file.flush())
                .map_err(|e| cache_err(path, format!("cannot write the header: {e}")))?;
        } else {
            let stored = read_header(&mut file, path)?;
            if stored != dim {
                return Err(cache_err(
                    path,
                    format!("holds {stored}-dimensional vectors, the model gives {dim}; delete it to rebuild"),
                ));
            }
        }
        let file_len = file_len.max(HEADER);
        let len = complete_records(file_len, dim);
        let complete = HEADER + len * record_bytes(dim);
        if file_len > complete {
            file.set_len(complete)
                .map_err(|e| cache_err(path, format!("cannot cut the torn last record: {e}")))?;
        }
        Ok(Self {
            path: path.to_path_buf(),
            file,
            dim,
            len,
        })
    }

    /// Records written: the first ordinal still to write.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends the vectors of `(ordinal, id, vector)`, ordinals increasing from [`Self::len`];
    /// ordinals skipped get an empty record.
    pub fn append(&mut self, records: &[(u64, &str, &[f32])]) -> Result<()> {
        let size = record_bytes(self.dim) as usize;
        let mut buf = Vec::with_capacity(records.len() * size);
        let mut next = self.len;
        for &(ord, id, vector) in records {
            if ord < next {
                return Err(cache_err(
                    &self.path,
                    format!("ordinal {ord} is already written (next is {next})"),
                ));
            }
            if vector.len() != self.dim {
                return Err(cache_err(
                    &self.path,
                    format!(
                        "a {}-dimensional vector for {id:?} in a {}-dimensional file",
                        vector.len(),
                        self.dim
                    ),
                ));
            }
            buf.resize(buf.len() + (ord - next) as usize * size, 0);
            buf.extend_from_slice(&id_hash(id).to_le_bytes());
            for x in vector {
                buf.extend_from_slice(&x.to_le_bytes());
            }
            next = ord + 1;
        }
        // One write per batch: a crash leaves at most one torn record, cut at the next open.
        use std::io::{Seek, SeekFrom};
        self.file
            .seek(SeekFrom::End(0))
            .and_then(|_| self.file.write_all(&buf))
            .and_then(|_| self.file.flush())
            .map_err(|e| cache_err(&self.path, format!("cannot append: {e}")))?;
        self.len = next;
        Ok(())
    }

    /// Flushes the file to disk (the end of a fill).
    pub fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| cache_err(&self.path, format!("cannot sync: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(x: f32) -> Vec<f32> {
        vec![x, -x, 0.5]
    }

    #[test]
    fn vectors_are_found_by_ordinal_and_only_for_their_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m/c.vec");
        let mut w = VectorWriter::open(&path, 3).unwrap();
        // Ordinal 1 is a deleted document: no vector.
        w.append(&[(0, "a", &v(1.0)), (2, "c", &v(3.0))]).unwrap();
        assert_eq!(w.len(), 3);
        drop(w);
        let file = VectorFile::open(&path).unwrap().unwrap();
        assert_eq!(file.len(), 3);
        let got = file
            .get_many(&[(2, "c"), (1, "b"), (0, "a"), (0, "not-a"), (9, "z")])
            .unwrap();
        assert_eq!(got[0].as_deref(), Some(&v(3.0)[..]));
        assert!(got[1].is_none(), "an empty record");
        assert_eq!(got[2].as_deref(), Some(&v(1.0)[..]));
        assert!(got[3].is_none(), "another id at that ordinal");
        assert!(got[4].is_none(), "past the end");
        assert!(VectorFile::open(&dir.path().join("none.vec"))
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_torn_record_is_cut_and_an_open_reader_sees_later_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.vec");
        let mut w = VectorWriter::open(&path, 3).unwrap();
        w.append(&[(0, "a", &v(1.0))]).unwrap();
        drop(w);
        let reader = VectorFile::open(&path).unwrap().unwrap();
        // A writer killed mid-record.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[1, 2, 3, 4, 5]).unwrap();
        drop(f);
        assert_eq!(reader.get_many(&[(1, "b")]).unwrap()[0], None);
        let mut w = VectorWriter::open(&path, 3).unwrap();
        assert_eq!(w.len(), 1, "resumes after the last complete record");
        w.append(&[(1, "b", &v(2.0))]).unwrap();
        assert_eq!(
            reader.get_many(&[(1, "b")]).unwrap()[0].as_deref(),
            Some(&v(2.0)[..])
        );
        let err = w.append(&[(0, "a", &v(1.0))]).unwrap_err().to_string();
        assert!(err.contains("already written"), "{err}");
    }

    #[test]
    fn a_foreign_file_or_another_dimension_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.vec");
        VectorWriter::open(&path, 3).unwrap();
        let err = VectorWriter::open(&path, 4).err().unwrap().to_string();
        assert!(
            err.contains(&path.display().to_string()) && err.contains("3-dimensional"),
            "{err}"
        );
        std::fs::write(&path, [7u8; 64]).unwrap();
        let err = VectorFile::open(&path).err().unwrap().to_string();
        assert!(err.contains("bad magic"), "{err}");
    }

    #[test]
    fn nearest_is_exact_cosine_best_first_and_skips_empty_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.vec");
        let mut w = VectorWriter::open(&path, 2).unwrap();
        let (a, b, d, e) = ([1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [0.0, 0.0]);
        // Ordinal 2 is empty; "e" is a zero vector (cosine 0).
        w.append(&[(0, "a", &a), (1, "b", &b), (3, "d", &d), (4, "e", &e)])
            .unwrap();
        let file = VectorFile::open(&path).unwrap().unwrap();
        let got = file.nearest(&[2.0, 0.0], 10).unwrap();
        let order: Vec<u64> = got.iter().map(|n| n.ordinal).collect();
        // b and e tie at 0: by ordinal.
        assert_eq!(order, vec![0, 3, 1, 4]);
        assert!((got[0].score - 1.0).abs() < 1e-6);
        assert!((got[1].score - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert_eq!(got[0].id_hash, id_hash("a"));
        assert_eq!(file.nearest(&[2.0, 0.0], 2).unwrap(), got[..2].to_vec());
        assert!(
            file.nearest(&[1.0, 0.0, 0.0], 2).is_err(),
            "wrong dimension"
        );
    }

    #[test]
    fn nearest_over_many_chunks_equals_a_full_sort() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.vec");
        let mut w = VectorWriter::open(&path, 3).unwrap();
        let n = 2 * SCAN_CHUNK + 17;
        let vectors: Vec<Vec<f32>> = (0..n)
            .map(|i| {
                let x = i as f32;
                vec![(x * 0.37).sin(), (x * 0.11).cos(), (x % 7.0) - 3.0]
            })
            .collect();
        let ids: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
        let records: Vec<(u64, &str, &[f32])> = (0..n)
            .map(|i| (i, ids[i as usize].as_str(), vectors[i as usize].as_slice()))
            .collect();
        w.append(&records).unwrap();
        let file = VectorFile::open(&path).unwrap().unwrap();
        let query = [0.3, -0.5, 0.8];
        let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
        let mut all: Vec<Neighbour> = (0..n)
            .map(|i| {
                let bytes: Vec<u8> = vectors[i as usize]
                    .iter()
                    .flat_map(|x| x.to_le_bytes())
                    .collect();
                Neighbour {
                    ordinal: i,
                    id_hash: id_hash(&ids[i as usize]),
                    score: cosine_le(&query, norm, &bytes),
                }
            })
            .collect();
        sort_best_first(&mut all);
        assert_eq!(file.nearest(&query, 50).unwrap(), all[..50].to_vec());
    }

    #[test]
    fn id_hashes_are_stable_and_never_zero() {
        assert_eq!(id_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(id_hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(id_hash("doc#1"), id_hash("doc#2"));
    }
}
