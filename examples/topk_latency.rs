//! Top-k BM25 latency, pruned (block-max MaxScore) vs exhaustive, on one collection; checks that
//! both return identical rankings. Used by `scripts/bench-topk.sh` (issue 15).
//!
//! Usage: topk_latency COLLECTION_DIR TOPICS_TSV [K=10]
//! Each query runs once per evaluation to warm up, then once more timed, one thread, sequentially
//! (as `convrag search --timing` measures).

use std::time::Instant;

use convrag::index::{Evaluation, Retriever, SearchOptions, TantivyRetriever, WeightedQuery};

/// Sorted latencies (ms) and each query's ranking as (id, score).
type Measured = (Vec<f64>, Vec<Vec<(String, f32)>>);

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(
        args.len() >= 3,
        "usage: topk_latency COLLECTION_DIR TOPICS_TSV [K=10]"
    );
    let retriever = TantivyRetriever::open(std::path::Path::new(&args[1]))?;
    let k: usize = args.get(3).map_or(Ok(10), |s| s.parse())?;
    let mut queries = Vec::new();
    for (i, line) in std::fs::read_to_string(&args[2])?.lines().enumerate() {
        let (_, text) = line
            .split_once('\t')
            .ok_or_else(|| anyhow::anyhow!("{}:{}: expected id<TAB>text", args[2], i + 1))?;
        queries.push(WeightedQuery::text(text));
    }
    let run = |evaluation: Evaluation| -> anyhow::Result<Measured> {
        let mut o = SearchOptions::top(k);
        o.with_fields = false;
        o.evaluation = evaluation;
        for q in &queries {
            retriever.search_with(q, &o)?;
        }
        let mut ms = Vec::with_capacity(queries.len());
        let mut rankings = Vec::with_capacity(queries.len());
        for q in &queries {
            let started = Instant::now();
            let hits = retriever.search_with(q, &o)?;
            ms.push(started.elapsed().as_secs_f64() * 1e3);
            rankings.push(hits.into_iter().map(|h| (h.id, h.score)).collect());
        }
        ms.sort_by(f64::total_cmp);
        Ok((ms, rankings))
    };
    let pct =
        |ms: &[f64], p: f64| ms[((ms.len() as f64 * p).ceil() as usize).clamp(1, ms.len()) - 1];
    let (exhaustive_ms, exhaustive) = run(Evaluation::Exhaustive)?;
    let (pruned_ms, pruned) = run(Evaluation::Pruned)?;
    let differing = exhaustive
        .iter()
        .zip(&pruned)
        .filter(|(a, b)| a != b)
        .count();
    println!(
        "{} passages, {} queries, k={k}: identical rankings {}/{}",
        retriever.num_passages(),
        queries.len(),
        queries.len() - differing,
        queries.len()
    );
    for (name, ms) in [("exhaustive", &exhaustive_ms), ("pruned", &pruned_ms)] {
        println!(
            "{name:>10}: p50 {:.3} ms, p95 {:.3} ms, mean {:.3} ms",
            pct(ms, 0.5),
            pct(ms, 0.95),
            ms.iter().sum::<f64>() / ms.len() as f64
        );
    }
    anyhow::ensure!(differing == 0, "{differing} rankings differ");
    Ok(())
}
