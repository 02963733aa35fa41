//! Fills a collection's passage-vector file with deterministic pseudo-random unit vectors, for
//! measuring turn *latency* at scales this machine cannot embed (issue 15: all-MiniLM-L6-v2 encodes
//! about 8 passages per CPU-second here, so 10M segments would take about 180 hours).
//!
//! The file is the one `convrag embed` writes (same path, model key, header, record layout and
//! ordinal order, through the same `dense::embed::write_collection_vectors`), so a turn reads
//! it exactly as it reads real precomputed vectors: one mapped record per candidate, checked
//! against the id's hash. Only the values are not the model's: rerank *scores* over this file
//! mean nothing, its timing does.
//!
//! Usage: fill_vectors HOME COLLECTION
//! (models and ONNX Runtime under HOME as `convrag --home HOME` finds them). Resumes after the
//! last complete record, as `convrag embed` does.

use std::path::PathBuf;

use convrag::dense::embed::{write_collection_vectors, VectorModel};
use convrag::dense::vectors::id_hash;
use convrag::rerank::{OnnxOptions, OnnxReranker, Reranker};
use convrag::Config;

/// A unit vector drawn from the id's hash (xorshift64*), the same for the same id.
fn vector(id: &str, dim: usize) -> Vec<f32> {
    let mut s = id_hash(id) | 1;
    let mut v: Vec<f32> = (0..dim)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let x = s.wrapping_mul(0x2545_f491_4f6c_dd1d);
            (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

/// Prints a line per million passages.
struct Every1M(std::sync::atomic::AtomicU64, std::time::Instant);

impl convrag::progress::Progress for Every1M {
    fn set_length(&self, _: u64) {}
    fn set_position(&self, _: u64) {}
    fn inc(&self, n: u64) {
        let done = self.0.fetch_add(n, std::sync::atomic::Ordering::Relaxed) + n;
        if done % 1_000_000 < n {
            eprintln!("{done} ({:.0} s)", self.1.elapsed().as_secs_f64());
        }
    }
    fn set_message(&self, _: String) {}
    fn finish(&self) {}
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(args.len() == 3, "usage: fill_vectors HOME COLLECTION");
    let config = Config {
        home: PathBuf::from(&args[1]),
        ..Default::default()
    };
    // The model only names the file and gives the dimension.
    let model = OnnxReranker::open(
        &config.default_model_dir(),
        &config.ort_library_path(),
        OnnxOptions::default(),
    )?;
    let dim = model.embedding_dim()?;
    let progress = Every1M(Default::default(), std::time::Instant::now());
    let model_id = model.model_id();
    let vector_model = VectorModel {
        id: &model_id,
        sha256: model.model_sha256(),
        dim,
    };
    let (passages, written) = write_collection_vectors(
        &config,
        &args[2],
        vector_model,
        10_000,
        &progress,
        &mut |hits| Ok(hits.iter().map(|h| vector(&h.id, dim)).collect()),
    )?;
    eprintln!(
        "{written} vectors of {dim} dimensions written for {} ({passages} passages), {:.0} s",
        args[2],
        progress.1.elapsed().as_secs_f64()
    );
    Ok(())
}
