//! [`OnnxReranker`]: bi-encoders and cross-encoders exported to ONNX, run through `ort`.
//!
//! Efficiency: sequences are sorted by token length and cut into batches padded only to the
//! longest sequence of each batch; a pool of sessions lets concurrent requests run in parallel
//! (`Session::run` takes `&mut self`); cross-encoder inputs are truncated from the passage so the
//! query stays whole.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use ort::environment::Environment;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::{Session, SessionInputValue};
use ort::value::Tensor;
use tokenizers::{Encoding, PostProcessor, Tokenizer, TruncationDirection, TruncationParams};

use super::cache::EmbeddingCache;
use super::manifest::{ModelKind, ModelManifest, Pooling};
use super::{runtime, EmbeddedScores, PassageRef, RerankError, Reranker, Result};

/// Tunables of [`OnnxReranker`].
#[derive(Debug, Clone)]
pub struct OnnxOptions {
    /// ONNX Runtime intra-op threads per session (default: all cores).
    pub intra_threads: usize,
    /// Most sessions kept (each holds the model's weights): concurrent requests beyond this wait.
    pub max_sessions: usize,
    /// Sequences per inference batch.
    pub batch_size: usize,
    /// Override of the manifest's `max_length` (truncation), e.g. 128 for speed.
    pub max_length: Option<usize>,
    /// Sort sequences by length before batching (turn off only to measure padding waste).
    pub sort_by_length: bool,
}

impl Default for OnnxOptions {
    fn default() -> Self {
        Self {
            intra_threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            max_sessions: 2,
            batch_size: 16,
            max_length: None,
            sort_by_length: true,
        }
    }
}

/// Counters since creation (or the last [`OnnxReranker::reset_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InferenceStats {
    /// Sequences run through the model (queries and passages).
    pub sequences: u64,
    /// Tokens of those sequences, special tokens included.
    pub real_tokens: u64,
    /// Tokens fed to the model including padding (batch × longest in batch, summed).
    pub padded_tokens: u64,
    pub batches: u64,
    /// Passage embeddings taken from the cache instead of encoded.
    pub cache_hits: u64,
    /// Query texts encoded by the bi-encoder (a turn's rewrite, its PTKB statements), of
    /// `sequences`.
    pub queries: u64,
    /// Time inside `Session::run`.
    pub inference_nanos: u64,
}

#[derive(Default)]
struct Counters {
    sequences: AtomicU64,
    real_tokens: AtomicU64,
    padded_tokens: AtomicU64,
    batches: AtomicU64,
    cache_hits: AtomicU64,
    queries: AtomicU64,
    inference_nanos: AtomicU64,
}

/// A query's vector (when one was encoded) and passages' vectors, in order.
struct QueryAndPassages {
    query: Option<Vec<f32>>,
    passages: Vec<Arc<[f32]>>,
    /// Passages encoded now (not found in the cache).
    encoded: usize,
}

/// A reranker backed by an ONNX model directory (see [`ModelManifest`]).
pub struct OnnxReranker {
    dir: PathBuf,
    manifest: ModelManifest,
    max_length: usize,
    tokenizer: Tokenizer,
    pool: SessionPool,
    model_sha256: String,
    options: OnnxOptions,
    cache: Option<Arc<dyn EmbeddingCache>>,
    counters: Counters,
}

impl OnnxReranker {
    /// Opens the model in `model_dir`, loading ONNX Runtime from `library` if this process has not
    /// yet. Checks the manifest, tokenizer and ONNX file and creates the first session, so a broken
    /// model fails here with its path, not at the first query.
    pub fn open(model_dir: &Path, library: &Path, options: OnnxOptions) -> Result<Self> {
        let manifest = ModelManifest::load(model_dir)?;
        // The library first: a missing runtime is the likelier set-up error and is cheap to report.
        let env = runtime::environment(library)?;
        let model_path = manifest.model_path(model_dir);
        let model_err = |path: &Path, reason: String| RerankError::Model {
            path: path.to_path_buf(),
            reason,
        };
        let model_sha256 = crate::digest::file_sha256(&model_path).map(|d| d.sha256).map_err(|e| {
            model_err(
                &model_path,
                format!("cannot read the ONNX model ({e}); expected the file named by manifest.json \"model\""),
            )
        })?;
        let tokenizer_path = manifest.tokenizer_path(model_dir);
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path).map_err(|e| {
            model_err(
                &tokenizer_path,
                format!("cannot load the tokenizer ({e}); expected a Hugging Face tokenizer.json"),
            )
        })?;
        let max_length = options.max_length.unwrap_or(manifest.max_length);
        if max_length < 8 {
            return Err(model_err(
                model_dir,
                format!("max_length {max_length} is too small"),
            ));
        }
        // The shipped tokenizer.json may carry its own truncation and fixed padding: replace them.
        tokenizer.with_padding(None);
        let truncation = match manifest.kind {
            ModelKind::BiEncoder => Some(TruncationParams {
                max_length,
                ..Default::default()
            }),
            // Cross-encoder pairs are truncated by hand (passage only).
            ModelKind::CrossEncoder => None,
        };
        tokenizer
            .with_truncation(truncation)
            .map_err(|e| model_err(&tokenizer_path, format!("cannot set truncation: {e}")))?;

        let pool = SessionPool::new(
            env,
            model_path.clone(),
            options.intra_threads,
            options.max_sessions,
        );
        // Create one session now: validates the ONNX file and its input/output names.
        pool.with_session(|session| {
            let inputs: Vec<&str> = session.inputs().iter().map(|o| o.name()).collect();
            let outputs: Vec<&str> = session.outputs().iter().map(|o| o.name()).collect();
            let mut wanted = vec![&manifest.inputs.input_ids, &manifest.inputs.attention_mask];
            wanted.extend(manifest.inputs.token_type_ids.as_ref());
            for name in wanted {
                if !inputs.contains(&name.as_str()) {
                    return Err(model_err(
                        &model_path,
                        format!("the graph has no input {name:?} named by manifest.json (inputs: {inputs:?})"),
                    ));
                }
            }
            if !outputs.contains(&manifest.output.as_str()) {
                return Err(model_err(
                    &model_path,
                    format!(
                        "the graph has no output {:?} named by manifest.json (outputs: {outputs:?})",
                        manifest.output
                    ),
                ));
            }
            Ok(())
        })?;
        Ok(Self {
            dir: model_dir.to_path_buf(),
            manifest,
            max_length,
            tokenizer,
            pool,
            model_sha256,
            options,
            cache: None,
            counters: Counters::default(),
        })
    }

    /// Uses `cache` for bi-encoder passage embeddings of named collections.
    pub fn with_cache(mut self, cache: Arc<dyn EmbeddingCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    pub fn kind(&self) -> ModelKind {
        self.manifest.kind
    }

    pub fn manifest(&self) -> &ModelManifest {
        &self.manifest
    }

    pub fn model_dir(&self) -> &Path {
        &self.dir
    }

    /// sha256 of the ONNX file (the cache key's model part).
    pub fn model_sha256(&self) -> &str {
        &self.model_sha256
    }

    pub fn max_length(&self) -> usize {
        self.max_length
    }

    pub fn stats(&self) -> InferenceStats {
        let c = &self.counters;
        InferenceStats {
            sequences: c.sequences.load(Ordering::Relaxed),
            real_tokens: c.real_tokens.load(Ordering::Relaxed),
            padded_tokens: c.padded_tokens.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            cache_hits: c.cache_hits.load(Ordering::Relaxed),
            queries: c.queries.load(Ordering::Relaxed),
            inference_nanos: c.inference_nanos.load(Ordering::Relaxed),
        }
    }

    pub fn reset_stats(&self) {
        let c = &self.counters;
        for a in [
            &c.sequences,
            &c.real_tokens,
            &c.padded_tokens,
            &c.batches,
            &c.cache_hits,
            &c.queries,
            &c.inference_nanos,
        ] {
            a.store(0, Ordering::Relaxed);
        }
    }

    /// Bi-encoder embeddings of `texts` (pooled, normalized when the manifest says so), no cache.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.require_kind(ModelKind::BiEncoder)?;
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(RerankError::Tokenize)?;
        let sequences: Vec<Sequence> = encodings.iter().map(Sequence::from_encoding).collect();
        self.run_batches(&sequences)
    }

    /// The bi-encoder's embedding dimension (one text encoded: the ONNX graph need not declare
    /// it).
    pub fn embedding_dim(&self) -> Result<usize> {
        Ok(self
            .embed(&["dimension"])?
            .first()
            .map(Vec::len)
            .unwrap_or_default())
    }

    /// Encodes those of `passages` not yet cached for `collection` and stores them; returns how
    /// many were encoded. This is the bulk fill behind `convrag embed` (call it chunk by chunk:
    /// an interrupted fill resumes where it stopped).
    pub fn precompute(&self, collection: &str, passages: &[PassageRef<'_>]) -> Result<usize> {
        self.require_kind(ModelKind::BiEncoder)?;
        let cache = self.cache.as_ref().ok_or_else(|| RerankError::Cache {
            path: self.dir.clone(),
            reason: "no embedding cache configured".to_string(),
        })?;
        let cached = cache.get_many(&self.model_sha256, collection, passages)?;
        let missing: Vec<&PassageRef<'_>> = passages
            .iter()
            .zip(&cached)
            .filter(|(_, c)| c.is_none())
            .map(|(p, _)| p)
            .collect();
        if missing.is_empty() {
            return Ok(0);
        }
        let texts: Vec<&str> = missing.iter().map(|p| p.text).collect();
        let vectors = self.embed(&texts)?;
        let entries: Vec<(&str, &[f32])> = missing
            .iter()
            .zip(&vectors)
            .map(|(p, v)| (p.id, v.as_slice()))
            .collect();
        cache.put_many(&self.model_sha256, collection, &entries)?;
        Ok(missing.len())
    }

    fn require_kind(&self, kind: ModelKind) -> Result<()> {
        if self.manifest.kind == kind {
            Ok(())
        } else {
            Err(RerankError::Model {
                path: self.dir.clone(),
                reason: format!(
                    "this operation needs a {kind:?} model, manifest.json declares {:?}",
                    self.manifest.kind
                ),
            })
        }
    }

    fn rerank_bi(
        &self,
        query: &str,
        passages: &[PassageRef<'_>],
        collection: Option<&str>,
    ) -> Result<Vec<f32>> {
        // Query and uncached passages go through the model together (one length-sorted plan).
        let vectors = self.passage_vectors(Some(query), passages, collection)?;
        let query_vec = vectors.query.unwrap_or_default();
        Ok(vectors
            .passages
            .iter()
            .map(|v| cosine(&query_vec, v))
            .collect())
    }

    /// The vectors of `passages` (cached for `collection`, else encoded and cached), with
    /// `query` encoded in the same plan when given.
    fn passage_vectors(
        &self,
        query: Option<&str>,
        passages: &[PassageRef<'_>],
        collection: Option<&str>,
    ) -> Result<QueryAndPassages> {
        let cache = self.cache.as_ref().filter(|_| collection.is_some());
        let mut vectors: Vec<Option<Arc<[f32]>>> = match (cache, collection) {
            (Some(cache), Some(coll)) => cache.get_many(&self.model_sha256, coll, passages)?,
            _ => vec![None; passages.len()],
        };
        let hits = vectors.iter().filter(|v| v.is_some()).count();
        self.counters
            .cache_hits
            .fetch_add(hits as u64, Ordering::Relaxed);
        let missing: Vec<usize> = (0..passages.len())
            .filter(|&i| vectors[i].is_none())
            .collect();
        let mut texts: Vec<&str> = Vec::with_capacity(missing.len() + 1);
        texts.extend(query);
        texts.extend(missing.iter().map(|&i| passages[i].text));
        if texts.is_empty() {
            return Ok(QueryAndPassages {
                query: None,
                passages: vectors.into_iter().flatten().collect(),
                encoded: 0,
            });
        }
        if query.is_some() {
            self.counters.queries.fetch_add(1, Ordering::Relaxed);
        }
        let mut encoded = self.embed(&texts)?.into_iter();
        let query_vec = query.and_then(|_| encoded.next());
        let new_vectors: Vec<Vec<f32>> = encoded.collect();
        if let (Some(cache), Some(coll)) = (cache, collection) {
            let entries: Vec<(&str, &[f32])> = missing
                .iter()
                .zip(&new_vectors)
                .map(|(&i, v)| (passages[i].id, v.as_slice()))
                .collect();
            cache.put_many(&self.model_sha256, coll, &entries)?;
        }
        for (&i, v) in missing.iter().zip(new_vectors) {
            vectors[i] = Some(Arc::from(v));
        }
        Ok(QueryAndPassages {
            query: query_vec,
            passages: vectors.into_iter().flatten().collect(),
            encoded: missing.len(),
        })
    }

    fn rerank_cross(&self, query: &str, passages: &[PassageRef<'_>]) -> Result<Vec<f32>> {
        let tok_err = RerankError::Tokenize;
        let mut q = self.tokenizer.encode(query, false).map_err(tok_err)?;
        let added = self
            .tokenizer
            .get_post_processor()
            .map_or(0, |p| p.added_tokens(true));
        let budget = self.max_length.saturating_sub(added);
        // Keep the query whole; only a query that leaves no room at all for the passage is cut
        // (to half the budget), which beats refusing the request.
        if q.len() + 1 > budget {
            q.truncate(budget / 2, 0, TruncationDirection::Right);
        }
        let passage_budget = budget - q.len();
        let texts: Vec<&str> = passages.iter().map(|p| p.text).collect();
        let encodings = self.tokenizer.encode_batch(texts, false).map_err(tok_err)?;
        let mut sequences = Vec::with_capacity(passages.len());
        for mut p in encodings {
            p.truncate(passage_budget, 0, TruncationDirection::Right);
            let pair = self
                .tokenizer
                .post_process(q.clone(), Some(p), true)
                .map_err(tok_err)?;
            sequences.push(Sequence::from_encoding(&pair));
        }
        let logits = self.run_batches(&sequences)?;
        Ok(logits
            .into_iter()
            .map(|v| v.first().copied().unwrap_or(f32::NAN))
            .collect())
    }

    /// Runs `sequences` through the model in length-sorted, dynamically padded batches and returns
    /// one output vector per sequence in the original order (pooled embedding or logit).
    fn run_batches(&self, sequences: &[Sequence]) -> Result<Vec<Vec<f32>>> {
        let lengths: Vec<usize> = sequences.iter().map(|s| s.ids.len()).collect();
        let plan = plan_batches(
            &lengths,
            self.options.batch_size.max(1),
            self.options.sort_by_length,
        );
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); sequences.len()];
        self.pool.with_session(|session| {
            let m = crate::metrics::metrics();
            for batch in &plan {
                let started = std::time::Instant::now();
                let rows = self.run_batch(session, sequences, batch)?;
                m.rerank_batches.inc();
                m.rerank_passages_encoded.inc_by(batch.len() as u64);
                m.rerank_encode_duration
                    .observe(started.elapsed().as_secs_f64());
                for (&i, row) in batch.iter().zip(rows) {
                    out[i] = row;
                }
            }
            Ok(())
        })?;
        Ok(out)
    }

    fn run_batch(
        &self,
        session: &mut Session,
        sequences: &[Sequence],
        batch: &[usize],
    ) -> Result<Vec<Vec<f32>>> {
        let width = batch
            .iter()
            .map(|&i| sequences[i].ids.len())
            .max()
            .unwrap_or(0)
            .max(1);
        let rows = batch.len();
        let mut ids = vec![0i64; rows * width];
        let mut mask = vec![0i64; rows * width];
        let mut types = vec![0i64; rows * width];
        let mut real = 0u64;
        for (r, &i) in batch.iter().enumerate() {
            let s = &sequences[i];
            real += s.ids.len() as u64;
            let base = r * width;
            for (j, (&id, &ty)) in s.ids.iter().zip(&s.type_ids).enumerate() {
                ids[base + j] = id as i64;
                mask[base + j] = 1;
                types[base + j] = ty as i64;
            }
        }
        let c = &self.counters;
        c.sequences.fetch_add(rows as u64, Ordering::Relaxed);
        c.real_tokens.fetch_add(real, Ordering::Relaxed);
        c.padded_tokens
            .fetch_add((rows * width) as u64, Ordering::Relaxed);
        c.batches.fetch_add(1, Ordering::Relaxed);

        let infer = |e: ort::Error| RerankError::Inference(e.to_string());
        let names = &self.manifest.inputs;
        let mut inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = vec![
            (
                Cow::Borrowed(names.input_ids.as_str()),
                Tensor::from_array(([rows, width], ids))
                    .map_err(infer)?
                    .into(),
            ),
            (
                Cow::Borrowed(names.attention_mask.as_str()),
                Tensor::from_array(([rows, width], mask.clone()))
                    .map_err(infer)?
                    .into(),
            ),
        ];
        if let Some(name) = &names.token_type_ids {
            inputs.push((
                Cow::Borrowed(name.as_str()),
                Tensor::from_array(([rows, width], types))
                    .map_err(infer)?
                    .into(),
            ));
        }
        let started = Instant::now();
        let outputs = session.run(inputs).map_err(infer)?;
        c.inference_nanos
            .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        let value = outputs.get(&self.manifest.output).ok_or_else(|| {
            RerankError::Inference(format!(
                "the model produced no output {:?}",
                self.manifest.output
            ))
        })?;
        let (shape, data) = value.try_extract_tensor::<f32>().map_err(infer)?;
        let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
        match self.manifest.kind {
            ModelKind::BiEncoder => {
                if dims.len() != 3 || dims[0] != rows || dims[1] != width {
                    return Err(RerankError::Inference(format!(
                        "expected output {:?} of shape [{rows}, {width}, hidden], got {dims:?}",
                        self.manifest.output
                    )));
                }
                let hidden = dims[2];
                let pooling = self.manifest.pooling.unwrap_or(Pooling::Mean);
                Ok((0..rows)
                    .map(|r| {
                        let tokens = &data[r * width * hidden..(r + 1) * width * hidden];
                        let row_mask = &mask[r * width..(r + 1) * width];
                        let mut v = pool_tokens(tokens, row_mask, hidden, pooling);
                        if self.manifest.normalize {
                            l2_normalize(&mut v);
                        }
                        v
                    })
                    .collect())
            }
            ModelKind::CrossEncoder => {
                let per_row = match dims.as_slice() {
                    [b] if *b == rows => 1,
                    [b, n] if *b == rows && *n > 0 => *n,
                    _ => {
                        return Err(RerankError::Inference(format!(
                        "expected output {:?} of shape [{rows}] or [{rows}, labels], got {dims:?}",
                        self.manifest.output
                    )))
                    }
                };
                let k = self.manifest.logit_index;
                if k >= per_row {
                    return Err(RerankError::Model {
                        path: self.dir.clone(),
                        reason: format!("logit_index {k} but the model gives {per_row} logits"),
                    });
                }
                Ok((0..rows).map(|r| vec![data[r * per_row + k]]).collect())
            }
        }
    }
}

impl Reranker for OnnxReranker {
    fn rerank(
        &self,
        query: &str,
        passages: &[PassageRef<'_>],
        collection: Option<&str>,
    ) -> Result<Vec<f32>> {
        if passages.is_empty() {
            return Ok(Vec::new());
        }
        match self.manifest.kind {
            ModelKind::BiEncoder => self.rerank_bi(query, passages, collection),
            ModelKind::CrossEncoder => self.rerank_cross(query, passages),
        }
    }

    fn embeds(&self) -> bool {
        self.manifest.kind == ModelKind::BiEncoder
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Option<Vec<Vec<f32>>>> {
        if self.manifest.kind != ModelKind::BiEncoder {
            return Ok(None);
        }
        self.counters
            .queries
            .fetch_add(texts.len() as u64, Ordering::Relaxed);
        self.embed(texts).map(Some)
    }

    fn rerank_embedded(
        &self,
        query: &[f32],
        passages: &[PassageRef<'_>],
        collection: Option<&str>,
    ) -> Result<Option<EmbeddedScores>> {
        if self.manifest.kind != ModelKind::BiEncoder {
            return Ok(None);
        }
        let vectors = self.passage_vectors(None, passages, collection)?;
        Ok(Some(EmbeddedScores {
            scores: vectors.passages.iter().map(|v| cosine(query, v)).collect(),
            encoded: vectors.encoded,
        }))
    }

    fn model_id(&self) -> String {
        let name = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".to_string());
        format!("{name}@{}", &self.model_sha256[..12])
    }
}

/// Token ids of one model input sequence.
struct Sequence {
    ids: Vec<u32>,
    type_ids: Vec<u32>,
}

impl Sequence {
    fn from_encoding(e: &Encoding) -> Self {
        Self {
            ids: e.get_ids().to_vec(),
            type_ids: e.get_type_ids().to_vec(),
        }
    }
}

/// Groups sequence indices into batches of at most `batch_size`; with `sort`, by ascending length
/// so each batch pads to a length close to its members'.
pub fn plan_batches(lengths: &[usize], batch_size: usize, sort: bool) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    if sort {
        order.sort_by_key(|&i| lengths[i]);
    }
    order
        .chunks(batch_size.max(1))
        .map(|c| c.to_vec())
        .collect()
}

fn pool_tokens(tokens: &[f32], mask: &[i64], hidden: usize, pooling: Pooling) -> Vec<f32> {
    match pooling {
        Pooling::Cls => tokens[..hidden].to_vec(),
        Pooling::Mean => {
            let mut sum = vec![0f32; hidden];
            let mut n = 0f32;
            for (t, &m) in mask.iter().enumerate() {
                if m != 0 {
                    n += 1.0;
                    for (s, x) in sum.iter_mut().zip(&tokens[t * hidden..(t + 1) * hidden]) {
                        *s += x;
                    }
                }
            }
            let n = n.max(1e-9);
            sum.iter_mut().for_each(|s| *s /= n);
            sum
        }
    }
}

fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= norm);
}

pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

/// Sessions created on demand up to a limit and handed out one per running request.
struct SessionPool {
    env: Environment,
    model_path: PathBuf,
    intra_threads: usize,
    max: usize,
    state: Mutex<PoolState>,
    returned: Condvar,
}

struct PoolState {
    idle: Vec<Session>,
    created: usize,
}

impl SessionPool {
    fn new(env: Environment, model_path: PathBuf, intra_threads: usize, max: usize) -> Self {
        Self {
            env,
            model_path,
            intra_threads: intra_threads.max(1),
            max: max.max(1),
            state: Mutex::new(PoolState {
                idle: Vec::new(),
                created: 0,
            }),
            returned: Condvar::new(),
        }
    }

    fn create(&self) -> Result<Session> {
        let err = |reason: String| RerankError::Model {
            path: self.model_path.clone(),
            reason,
        };
        let builder = Session::builder(&self.env)
            .map_err(|e| err(format!("cannot create a session builder: {e}")))?;
        let builder = builder
            .with_optimization_level(GraphOptimizationLevel::All)
            .map_err(|e| err(format!("cannot configure the session: {e}")))?;
        let mut builder = builder
            .with_intra_threads(self.intra_threads)
            .map_err(|e| err(format!("cannot configure the session: {e}")))?;
        builder.commit_from_file(&self.model_path).map_err(|e| {
            err(format!(
                "ONNX Runtime cannot load it ({e}); expected an ONNX model as named in manifest.json"
            ))
        })
    }

    fn with_session<R>(&self, f: impl FnOnce(&mut Session) -> Result<R>) -> Result<R> {
        let mut session = self.acquire()?;
        let result = f(&mut session);
        // Return the session even when `f` failed: a failed run leaves the session usable.
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.idle.push(session);
        drop(state);
        self.returned.notify_one();
        result
    }

    fn acquire(&self) -> Result<Session> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(s) = state.idle.pop() {
                return Ok(s);
            }
            if state.created < self.max {
                state.created += 1;
                drop(state);
                return self.create().inspect_err(|_| {
                    let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
                    state.created -= 1;
                });
            }
            state = self.returned.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// The bi-encoder in `dir` (default: the configured default model) on the configured ONNX
/// Runtime: the one way commands and services open a model.
pub fn open_model(
    config: &crate::Config,
    dir: Option<&std::path::Path>,
) -> Result<OnnxReranker, RerankError> {
    let dir = dir.map_or_else(|| config.default_model_dir(), |d| d.to_path_buf());
    OnnxReranker::open(&dir, &config.ort_library_path(), OnnxOptions::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_plan_groups_similar_lengths() {
        let lengths = [50, 3, 48, 4, 49, 5];
        let plan = plan_batches(&lengths, 3, true);
        assert_eq!(plan, vec![vec![1, 3, 5], vec![2, 4, 0]]);
        let unsorted = plan_batches(&lengths, 4, false);
        assert_eq!(unsorted, vec![vec![0, 1, 2, 3], vec![4, 5]]);
    }

    #[test]
    fn mean_pooling_ignores_padding() {
        let tokens = [1.0, 2.0, 3.0, 4.0, 100.0, 100.0];
        let v = pool_tokens(&tokens, &[1, 1, 0], 2, Pooling::Mean);
        assert_eq!(v, vec![2.0, 3.0]);
        assert_eq!(
            pool_tokens(&tokens, &[1, 1, 0], 2, Pooling::Cls),
            vec![1.0, 2.0]
        );
    }

    #[test]
    fn cosine_of_parallel_and_orthogonal() {
        assert!((cosine(&[1.0, 1.0], &[2.0, 2.0]) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 3.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[0.0, 3.0]), 0.0);
    }
}
