//! Fills a collection's passage-vector file with deterministic pseudo-random unit vectors, for
//! measuring turn *latency* at scales this machine cannot embed (issue 15: all-MiniLM-L6-v2 encodes
//! about 8 passages per CPU-second here, so 10M segments would take about 180 hours).
//!
//! The file is the one `convrag embed` writes (same path, model key, header, record layout and
//! ordinal order, through the same `VectorWriter`), so a turn reads it exactly as it reads real
//! precomputed vectors: one mapped record per candidate, checked against the id's hash. Only the
//! values are not the model's: rerank *scores* over this file mean nothing, its timing does.
//!
//! Usage: fill_vectors HOME COLLECTION
//! (models and ONNX Runtime under HOME as `convrag --home HOME` finds them). Resumes after the
//! last complete record, as `convrag embed` does.

use std::path::PathBuf;

use convrag::index::{embedding_key, CollectionRegistry, Retriever};
use convrag::rerank::{vectors::id_hash, DiskEmbeddingCache, OnnxOptions, OnnxReranker};
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

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(args.len() == 3, "usage: fill_vectors HOME COLLECTION");
    let config = Config {
        home: PathBuf::from(&args[1]),
        ..Default::default()
    };
    let registry = CollectionRegistry::new(config.collections_dir());
    let retriever = registry.get(&args[2])?;
    let model = OnnxReranker::open(
        &config.default_model_dir(),
        &config.ort_library_path(),
        OnnxOptions::default(),
    )?;
    let dim = model
        .embed(&["dimension"])?
        .first()
        .map(Vec::len)
        .unwrap_or_default();
    let cache = DiskEmbeddingCache::new(config.home.join("embeddings"));
    let key = embedding_key(&args[2], retriever.as_ref());
    let mut writer = cache.vector_writer(model.model_sha256(), &key, dim)?;
    let start = writer.len();
    let total = retriever.num_passages();
    let started = std::time::Instant::now();
    let mut done = start;
    retriever.for_each_passage_from(start, 10_000, |hits| {
        let vectors: Vec<Vec<f32>> = hits.iter().map(|h| vector(&h.id, dim)).collect();
        let records: Vec<(u64, &str, &[f32])> = hits
            .iter()
            .zip(&vectors)
            .filter_map(|(h, v)| h.ordinal.map(|o| (o, h.id.as_str(), v.as_slice())))
            .collect();
        writer
            .append(&records)
            .map_err(|e| convrag::index::IndexError::Invalid(e.to_string()))?;
        done += hits.len() as u64;
        if done % 1_000_000 < hits.len() as u64 {
            eprintln!("{done}/{total} ({:.0} s)", started.elapsed().as_secs_f64());
        }
        Ok(())
    })?;
    writer.sync()?;
    eprintln!(
        "{} vectors of {dim} dimensions for {} ({} were there), {:.0} s",
        writer.len(),
        args[2],
        start,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
