//! The library half of `convrag bench ann`: builds each [`VectorIndex`] over one vector source in
//! turn and measures build time, resident memory, recall@k against the exact search and search
//! latency; writes seeded synthetic vector files for sizes no real collection here has.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use super::{
    build_index, dot, normalized, HnswParams, HnswRsIndex, IndexKind, Result, VectorIndex,
    VectorSource,
};
use crate::dense::vectors::VectorWriter;
use crate::progress::Progress;

/// What to compare.
#[derive(Debug, Clone)]
pub struct AnnBenchOptions {
    /// Indexes in the order they are built; the exact search always runs first (it is the
    /// reference).
    pub kinds: Vec<IndexKind>,
    pub params: HnswParams,
    /// Shortlist of the int8 scan rescored with f32 (0: none).
    pub int8_rescore: usize,
    pub k: usize,
}

/// One index's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IndexReport {
    pub index: &'static str,
    /// Vectors it holds.
    pub vectors: u64,
    /// Vectors a time-budgeted build left out (then nothing is searched).
    pub left_out: u64,
    pub build_secs: f64,
    /// Resident set growth of the process over the build (the exact search: over its searches,
    /// the pages of the mapped files it touched), after returning freed heap to the system.
    pub rss_delta_bytes: i64,
    /// Mean recall@k against the exact search, ties at the k-th score counted as found.
    pub recall: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub mean_ms: Option<f64>,
}

/// The process's resident set in bytes (0 where /proc is absent).
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf only reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as u64
}

/// Returns freed heap pages to the system, so a dropped index no longer counts in the RSS.
fn trim_heap() {
    // SAFETY: malloc_trim only releases free memory of glibc's allocator.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// (p50, p95, mean) of `values` (nearest-rank percentiles).
pub fn percentiles(values: &[f64]) -> (f64, f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    (at(0.50), at(0.95), v.iter().sum::<f64>() / v.len() as f64)
}

/// `n` random unit vectors of `dim` dimensions (Gaussian directions), the same for a seed.
pub fn random_unit_vectors(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| normalized((0..dim).map(|_| gaussian(&mut rng)).collect()))
        .collect()
}

/// A standard normal draw (Box-Muller).
fn gaussian(rng: &mut StdRng) -> f32 {
    let u1: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    let u2: f64 = rng.gen();
    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
}

/// Vectors generated per task of [`synthetic_file`]: each chunk has its own seed, so the file is
/// the same whatever the number of threads.
const SYNTHETIC_CHUNK: usize = 16384;

/// A vector file of `n` random unit vectors in `dir` (ids `syn<i>`), written unless a complete
/// one for the same size, dimension and seed is already there.
pub fn synthetic_file(
    dir: &Path,
    n: u64,
    dim: usize,
    seed: u64,
    progress: &dyn Progress,
) -> Result<PathBuf> {
    let path = dir.join(format!("synthetic-{n}-d{dim}-s{seed}.vec"));
    let mut writer = VectorWriter::open(&path, dim)?;
    progress.set_length(n);
    progress.set_position(writer.len().min(n));
    while writer.len() < n {
        // A resumed fill continues at its first missing chunk.
        let first_chunk = writer.len() / SYNTHETIC_CHUNK as u64;
        let chunks: Vec<u64> = (first_chunk..)
            .take(8)
            .take_while(|c| c * (SYNTHETIC_CHUNK as u64) < n)
            .collect();
        let generated: Vec<Vec<Vec<f32>>> = chunks
            .par_iter()
            .map(|&c| {
                let size = (n - c * SYNTHETIC_CHUNK as u64).min(SYNTHETIC_CHUNK as u64) as usize;
                random_unit_vectors(size, dim, seed ^ (c.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
            })
            .collect();
        for (c, vectors) in chunks.iter().zip(generated) {
            let base = c * SYNTHETIC_CHUNK as u64;
            let ids: Vec<String> = (0..vectors.len() as u64)
                .map(|i| format!("syn{}", base + i))
                .collect();
            let records: Vec<(u64, &str, &[f32])> = vectors
                .iter()
                .enumerate()
                .filter(|(i, _)| base + *i as u64 >= writer.len())
                .map(|(i, v)| (base + i as u64, ids[i].as_str(), v.as_slice()))
                .collect();
            progress.inc(records.len() as u64);
            writer.append(&records)?;
        }
    }
    writer.sync()?;
    progress.finish();
    Ok(path)
}

/// Builds each index of `options` over `source` and measures it on `queries`; `progress` gives
/// the bar of one build, `report` receives each index's figures as soon as they are measured.
pub fn run_ann_bench(
    source: &Arc<VectorSource>,
    queries: &[Vec<f32>],
    options: &AnnBenchOptions,
    progress: &dyn Fn(IndexKind) -> Box<dyn Progress>,
    report: &mut dyn FnMut(&IndexReport),
) -> Result<Vec<IndexReport>> {
    let k = options.k;
    let queries: Vec<Vec<f32>> = queries.iter().map(|q| normalized(q.clone())).collect();
    let mut reports = Vec::new();

    trim_heap();
    let before = rss_bytes();
    let exact = build_index(
        IndexKind::Exact,
        source,
        &options.params,
        0,
        &*progress(IndexKind::Exact),
    )?;
    let (truth, latencies) = timed_searches(exact.as_ref(), &queries, k)?;
    let r = figures(
        exact.as_ref(),
        Duration::ZERO,
        rss_bytes() as i64 - before as i64,
        Some(1.0),
        &latencies,
    );
    report(&r);
    reports.push(r);
    drop(exact);

    for &kind in options.kinds.iter().filter(|k| **k != IndexKind::Exact) {
        trim_heap();
        let before = rss_bytes();
        let started = Instant::now();
        let bar = progress(kind);
        let index: Box<dyn VectorIndex> = match kind {
            // Built here to honour the time budget.
            IndexKind::HnswRs => Box::new(HnswRsIndex::build(
                source,
                &options.params,
                u64::MAX,
                &*bar,
            )?),
            _ => build_index(kind, source, &options.params, options.int8_rescore, &*bar)?,
        };
        let build = started.elapsed();
        trim_heap();
        let rss = rss_bytes() as i64 - before as i64;
        let r = if index.left_out() > 0 {
            figures(index.as_ref(), build, rss, None, &[])
        } else {
            let (found, latencies) = timed_searches(index.as_ref(), &queries, k)?;
            let recall = recall_at_k(source, &queries, &truth, &found, k)?;
            figures(index.as_ref(), build, rss, Some(recall), &latencies)
        };
        report(&r);
        reports.push(r);
    }
    Ok(reports)
}

fn figures(
    index: &dyn VectorIndex,
    build: Duration,
    rss_delta_bytes: i64,
    recall: Option<f64>,
    latencies: &[f64],
) -> IndexReport {
    let (p50, p95, mean) = percentiles(latencies);
    let measured = !latencies.is_empty();
    IndexReport {
        index: index.kind().as_str(),
        vectors: index.len() as u64,
        left_out: index.left_out(),
        build_secs: build.as_secs_f64(),
        rss_delta_bytes,
        recall,
        p50_ms: measured.then_some(p50),
        p95_ms: measured.then_some(p95),
        mean_ms: measured.then_some(mean),
    }
}

/// One query's neighbours: (ordinal, cosine), best first.
type Ranked = Vec<(u64, f32)>;

/// Each query's top `k` and its latency in milliseconds, one query at a time after one
/// unmeasured warm-up query.
fn timed_searches(
    index: &dyn VectorIndex,
    queries: &[Vec<f32>],
    k: usize,
) -> Result<(Vec<Ranked>, Vec<f64>)> {
    if let Some(q) = queries.first() {
        index.search(q, k)?;
    }
    let mut found = Vec::with_capacity(queries.len());
    let mut latencies = Vec::with_capacity(queries.len());
    for q in queries {
        let started = Instant::now();
        found.push(index.search(q, k)?);
        latencies.push(started.elapsed().as_secs_f64() * 1e3);
    }
    Ok((found, latencies))
}

/// Mean over queries of the share of the exact top `k` found: a returned vector counts when it
/// is in the exact list or scores (exactly) at least the exact k-th score, so among equal
/// vectors any one will do.
pub fn recall_at_k(
    source: &VectorSource,
    queries: &[Vec<f32>],
    truth: &[Vec<(u64, f32)>],
    found: &[Vec<(u64, f32)>],
    k: usize,
) -> Result<f64> {
    let mut total = 0.0;
    let mut counted = 0usize;
    for ((q, exact), got) in queries.iter().zip(truth).zip(found) {
        let want = exact.len().min(k);
        if want == 0 {
            continue;
        }
        let kth = exact[want - 1].1;
        let ordinals: Vec<u64> = got.iter().take(k).map(|g| g.0).collect();
        let vectors = source.vectors_at(&ordinals)?;
        let hits = ordinals
            .iter()
            .zip(vectors)
            .filter(|(ord, v)| {
                exact.iter().any(|e| e.0 == **ord)
                    || v.as_ref().is_some_and(|v| dot(q, v) >= kth - 1e-6)
            })
            .count();
        total += hits.min(want) as f64 / want as f64;
        counted += 1;
    }
    Ok(if counted == 0 {
        1.0
    } else {
        total / counted as f64
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentiles(&v), (50.0, 95.0, 50.5));
        assert_eq!(percentiles(&[3.0]), (3.0, 3.0, 3.0));
    }

    #[test]
    fn synthetic_files_are_the_same_for_a_seed_and_a_run_measures_every_index() {
        let dir = tempfile::tempdir().unwrap();
        // Two chunks: one more vector than a chunk holds.
        let n = SYNTHETIC_CHUNK as u64 + 1;
        let path = synthetic_file(dir.path(), n, 2, 3, &NoProgress).unwrap();
        let first = std::fs::read(&path).unwrap();
        // A torn fill resumes to the same bytes.
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(first.len() as u64 - 500).unwrap();
        synthetic_file(dir.path(), n, 2, 3, &NoProgress).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), first);
        let other = synthetic_file(dir.path(), n, 2, 4, &NoProgress).unwrap();
        assert_ne!(std::fs::read(other).unwrap(), first);

        let n = 1500;
        let path = synthetic_file(dir.path(), n, 16, 3, &NoProgress).unwrap();
        let source = Arc::new(VectorSource::open(&[path]).unwrap());
        let queries = random_unit_vectors(20, 16, 4);
        let options = AnnBenchOptions {
            kinds: vec![IndexKind::Int8, IndexKind::HnswRs],
            params: HnswParams::default(),
            int8_rescore: 100,
            k: 10,
        };
        let mut seen = Vec::new();
        let reports = run_ann_bench(
            &source,
            &queries,
            &options,
            &|_| Box::new(NoProgress),
            &mut |r| seen.push(r.index),
        )
        .unwrap();
        assert_eq!(seen, ["exact", "int8", "hnsw-rs"]);
        assert!(reports
            .iter()
            .all(|r| r.vectors == n && r.p95_ms >= r.p50_ms));
        // The rescored shortlist of 100 holds the exact top 10 of 16-dimensional vectors.
        assert!(reports[1].recall.unwrap() >= 0.99, "{:?}", reports[1]);
        assert!(reports[2].recall.unwrap() >= 0.9, "{:?}", reports[2]);
    }
}
