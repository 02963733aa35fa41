//! Synthetic MS MARCO v2.1 segment corpus for the scale benchmarks (issues 4 and 15): the model of
//! `scripts/bench-gen-corpus.py`, in Rust and on every core, so 10M segments take minutes, not hours.
//!
//! Usage: gen_corpus OUTDIR SEGMENTS SHARDS [DATA=../shared/data]
//!
//! Writes OUTDIR/v21/msmarco_v2.1_doc_segmented_XX.json.gz (the real field layout: docid, url,
//! title, headings, segment, start_char, end_char) and, with the same text,
//! OUTDIR/jsonl/part_XX.jsonl.gz ({"id", "contents": title + "\n" + segment}) for Anserini's
//! JsonCollection. A shard already written completely (its `.done` marker exists) is kept, so an
//! interrupted run resumes.
//!
//! Text: a unigram word-frequency model estimated on real text in `../shared/data` (the DL19 MS
//! MARCO passages, the TREC RAG researchy-dev v2.1 segments, Cranfield; whitespace tokens): words
//! drawn independently with their corpus frequencies, segment lengths uniform in 60..=200 words,
//! 10 segments per synthetic document sharing a title (6 words) and headings (title + 4 words).
//! Deterministic: shard `s` is drawn from seed 42 + s, whatever the number of threads.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use rand::distributions::{Distribution, WeightedIndex};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

const SEGMENTS_PER_DOC: u64 = 10;

struct Model {
    /// Each word JSON-escaped (without quotes), and as it is.
    escaped: Vec<String>,
    plain: Vec<String>,
    dist: WeightedIndex<u64>,
}

fn gz_text(path: &Path) -> anyhow::Result<String> {
    let mut s = String::new();
    GzDecoder::new(std::fs::File::open(path).with_context(|| path.display().to_string())?)
        .read_to_string(&mut s)
        .with_context(|| path.display().to_string())?;
    Ok(s)
}

fn model(data: &Path) -> anyhow::Result<Model> {
    let mut texts: Vec<String> = Vec::new();
    let dl19 = data.join("trec-dl-rerank/rank_llm_data_bm25_dl19_top100.json.gz");
    let queries: serde_json::Value = serde_json::from_str(&gz_text(&dl19)?)?;
    for q in queries.as_array().context("dl19: a list")? {
        for h in q["hits"].as_array().context("dl19: hits")? {
            texts.push(h["content"].as_str().unwrap_or_default().to_string());
        }
    }
    let rag =
        data.join("trec-rag/rag24/ragnarok_data_bm25_rag24.researchy-dev_small_top100.jsonl.gz");
    let file = std::fs::File::open(&rag).with_context(|| rag.display().to_string())?;
    for (i, line) in BufReader::new(GzDecoder::new(file)).lines().enumerate() {
        let line = line.with_context(|| format!("{}:{}", rag.display(), i + 1))?;
        let v: serde_json::Value =
            serde_json::from_str(&line).with_context(|| format!("{}:{}", rag.display(), i + 1))?;
        for c in v["candidates"].as_array().into_iter().flatten() {
            texts.push(c["doc"]["segment"].as_str().unwrap_or_default().to_string());
        }
    }
    let cran = data.join("classic-ir/cranfield/cran.all.1400");
    texts.push(String::from_utf8_lossy(&std::fs::read(&cran).context("cranfield")?).into_owned());
    let mut counts: HashMap<&str, u64> = HashMap::new();
    for t in &texts {
        for w in t.split_whitespace() {
            *counts.entry(w).or_default() += 1;
        }
    }
    let mut words: Vec<(&str, u64)> = counts.into_iter().collect();
    words.sort();
    let tokens: u64 = words.iter().map(|w| w.1).sum();
    eprintln!("vocabulary {} words from {tokens} tokens", words.len());
    let escaped = words
        .iter()
        .map(|(w, _)| {
            let s = serde_json::to_string(w).expect("a string serializes");
            s[1..s.len() - 1].to_string()
        })
        .collect();
    Ok(Model {
        escaped,
        plain: words.iter().map(|(w, _)| w.to_string()).collect(),
        dist: WeightedIndex::new(words.iter().map(|w| w.1))?,
    })
}

/// Python's `str.capitalize`: the first character upper-cased, the rest lower-cased.
fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f
            .to_uppercase()
            .chain(c.flat_map(char::to_lowercase))
            .collect(),
        None => String::new(),
    }
}

fn escape(s: &str) -> String {
    let e = serde_json::to_string(s).expect("a string serializes");
    e[1..e.len() - 1].to_string()
}

fn shard(m: &Model, out: &Path, s: u64, first: u64, count: u64) -> anyhow::Result<()> {
    let done = out.join(format!(".done_{s:02}"));
    if done.exists() {
        return Ok(());
    }
    let mut rng = StdRng::seed_from_u64(42 + s);
    let v21 = out.join(format!("v21/msmarco_v2.1_doc_segmented_{s:02}.json.gz"));
    let jsonl = out.join(format!("jsonl/part_{s:02}.jsonl.gz"));
    let open = |p: &PathBuf| -> anyhow::Result<GzEncoder<std::io::BufWriter<std::fs::File>>> {
        let f = std::fs::File::create(p).with_context(|| p.display().to_string())?;
        Ok(GzEncoder::new(
            std::io::BufWriter::with_capacity(1 << 20, f),
            flate2::Compression::fast(),
        ))
    };
    let (mut f, mut g) = (open(&v21)?, open(&jsonl)?);
    let (mut title, mut headings) = (String::new(), String::new());
    let mut start = 0usize;
    let mut seg = String::new();
    let mut seg_plain_chars;
    let mut line = String::new();
    for k in first..first + count {
        let (doc, part) = (k / SEGMENTS_PER_DOC, k % SEGMENTS_PER_DOC);
        if part == 0 {
            let words = |rng: &mut StdRng, n: usize| -> Vec<&str> {
                (0..n)
                    .map(|_| m.plain[m.dist.sample(rng)].as_str())
                    .collect()
            };
            title = capitalize(&words(&mut rng, 6).join(" "));
            headings = format!("{title}\n{}", words(&mut rng, 4).join(" "));
            start = 0;
        }
        let len = rng.gen_range(60..=200);
        seg.clear();
        seg_plain_chars = 0;
        for i in 0..len {
            let w = m.dist.sample(&mut rng);
            if i > 0 {
                seg.push(' ');
                seg_plain_chars += 1;
            }
            seg.push_str(&m.escaped[w]);
            seg_plain_chars += m.plain[w].chars().count();
        }
        seg.push('.');
        seg_plain_chars += 1;
        let docid = format!("msmarco_v2.1_doc_{s:02}_{doc}#{part}_{k}");
        let (t, h) = (escape(&title), escape(&headings));
        line.clear();
        line.push_str(&format!(
            "{{\"docid\": \"{docid}\", \"url\": \"https://example.org/{doc}\", \"title\": \"{t}\", \"headings\": \"{h}\", \"segment\": \"{seg}\", \"start_char\": {start}, \"end_char\": {}}}\n",
            start + seg_plain_chars
        ));
        f.write_all(line.as_bytes())?;
        line.clear();
        line.push_str(&format!(
            "{{\"id\": \"{docid}\", \"contents\": \"{t}\\n{seg}\"}}\n"
        ));
        g.write_all(line.as_bytes())?;
        start += seg_plain_chars / 2;
    }
    f.finish()?.flush()?;
    g.finish()?.flush()?;
    std::fs::write(&done, b"")?;
    eprintln!("shard {s}: {count} segments");
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(
        args.len() >= 4,
        "usage: gen_corpus OUTDIR SEGMENTS SHARDS [DATA=../shared/data]"
    );
    let out = PathBuf::from(&args[1]);
    let n: u64 = args[2].parse().context("SEGMENTS")?;
    let shards: u64 = args[3].parse().context("SHARDS")?;
    anyhow::ensure!(shards > 0, "SHARDS must be at least 1");
    let data = PathBuf::from(args.get(4).map_or("../shared/data", String::as_str));
    let m = model(&data)?;
    std::fs::create_dir_all(out.join("v21"))?;
    std::fs::create_dir_all(out.join("jsonl"))?;
    // Whole documents per shard, so no document spans two shards.
    let per_shard = n.div_ceil(shards).div_ceil(SEGMENTS_PER_DOC) * SEGMENTS_PER_DOC;
    (0..shards)
        .into_par_iter()
        .map(|s| {
            let first = s * per_shard;
            let count = per_shard.min(n.saturating_sub(first));
            if count == 0 {
                return Ok(());
            }
            shard(&m, &out, s, first, count)
        })
        .collect::<anyhow::Result<Vec<()>>>()?;
    Ok(())
}
