//! An exact scan of int8 codes (one scale per vector), in memory, on all cores; compared by
//! `convrag bench ann`.

use std::sync::Arc;

use rayon::prelude::*;

use super::{
    check_query, dot, keep_best, normalized, sort_best_first, IndexKind, Result, VectorIndex,
    VectorSource, BUILD_CHUNK,
};
use crate::progress::Progress;

/// Symmetric int8 scalar quantization, one scale per vector (`x ≈ code × scale`): a quarter of
/// the f32 bytes. With `rescore > 0` the best `rescore` by the codes are rescored with the f32
/// vectors from the files, so only the order within the shortlist changes.
pub struct Int8Index {
    dim: usize,
    codes: Vec<i8>,
    scales: Vec<f32>,
    ordinals: Vec<u64>,
    rescore: usize,
    source: Arc<VectorSource>,
}

/// Codes scanned per rayon task.
const INT8_CHUNK: usize = 16384;

fn quantize(v: &[f32], codes: &mut Vec<i8>) -> f32 {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
    codes.extend(
        v.iter()
            .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8),
    );
    scale
}

fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| x as i32 * y as i32).sum()
}

impl Int8Index {
    pub fn build(
        source: Arc<VectorSource>,
        rescore: usize,
        progress: &dyn Progress,
    ) -> Result<Self> {
        let dim = source.dim();
        let mut index = Self {
            dim,
            codes: Vec::new(),
            scales: Vec::new(),
            ordinals: Vec::new(),
            rescore,
            source: Arc::clone(&source),
        };
        progress.set_length(source.len());
        source.for_each_chunk(BUILD_CHUNK, u64::MAX, |chunk| {
            progress.inc(chunk.len() as u64);
            for (ord, v) in chunk {
                index.scales.push(quantize(&v, &mut index.codes));
                index.ordinals.push(ord);
            }
            true
        })?;
        progress.finish();
        index.codes.shrink_to_fit();
        index.scales.shrink_to_fit();
        index.ordinals.shrink_to_fit();
        Ok(index)
    }

    /// Bytes held: codes, scales and ordinals.
    pub fn bytes(&self) -> usize {
        self.codes.len() + 4 * self.scales.len() + 8 * self.ordinals.len()
    }
}

impl VectorIndex for Int8Index {
    fn kind(&self) -> IndexKind {
        IndexKind::Int8
    }
    fn len(&self) -> usize {
        self.ordinals.len()
    }
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<(u64, f32)>> {
        check_query(query, self.dim)?;
        let mut q = Vec::with_capacity(self.dim);
        let q_scale = quantize(&normalized(query.to_vec()), &mut q);
        let shortlist = k.max(self.rescore);
        let starts: Vec<usize> = (0..self.ordinals.len()).step_by(INT8_CHUNK).collect();
        let mut best: Vec<(u64, f32)> = starts
            .par_iter()
            .map(|&start| {
                let end = (start + INT8_CHUNK).min(self.ordinals.len());
                let mut best = Vec::with_capacity(2 * shortlist.max(1024));
                for i in start..end {
                    let codes = &self.codes[i * self.dim..(i + 1) * self.dim];
                    let score = dot_i8(&q, codes) as f32 * q_scale * self.scales[i];
                    best.push((self.ordinals[i], score));
                    if best.len() >= 2 * shortlist.max(1024) {
                        keep_best(&mut best, shortlist);
                    }
                }
                keep_best(&mut best, shortlist);
                best
            })
            .reduce(Vec::new, |mut a, b| {
                a.extend(b);
                a
            });
        keep_best(&mut best, shortlist);
        if self.rescore > 0 {
            let q = normalized(query.to_vec());
            let ordinals: Vec<u64> = best.iter().map(|b| b.0).collect();
            let vectors = self.source.vectors_at(&ordinals)?;
            for (b, v) in best.iter_mut().zip(vectors) {
                b.1 = v.map_or(0.0, |v| dot(&q, &v));
            }
        }
        sort_best_first(&mut best);
        best.truncate(k);
        Ok(best)
    }
}
