//! Pruned top-k BM25 (block-max MaxScore) returns exactly what exhaustive scoring returns: the
//! same ids in the same order with bit-identical scores, on Cranfield, on the DL19 candidate
//! passages and on a seeded synthetic collection of several segments, for plain and weighted
//! multi-part (PTKB-like) queries, several BM25 parameters and field weights, k = 10, 100, 1000.

use std::path::{Path, PathBuf};

use convrag::collection::Format;
use convrag::index::{
    index_collection, Bm25Params, CollectionRegistry, Evaluation, FieldWeights, IndexOptions,
    Retriever, SearchOptions, TantivyRetriever, WeightedQuery,
};
use rand::distributions::{Distribution, WeightedIndex};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DEPTHS: [usize; 3] = [10, 100, 1000];

fn ranking(
    r: &TantivyRetriever,
    q: &WeightedQuery,
    k: usize,
    base: &SearchOptions,
    evaluation: Evaluation,
) -> Vec<(String, u32)> {
    let mut o = base.clone();
    o.k = k;
    o.with_fields = false;
    o.evaluation = evaluation;
    r.search_with(q, &o)
        .unwrap()
        .into_iter()
        .map(|h| (h.id, h.score.to_bits()))
        .collect()
}

/// Asserts identical rankings for every query, depth and option set; returns how many
/// rankings were compared and how many of them hold a tie at some rank.
fn assert_identical(
    r: &TantivyRetriever,
    queries: &[WeightedQuery],
    option_sets: &[SearchOptions],
) -> (usize, usize) {
    let (mut compared, mut with_ties) = (0, 0);
    for base in option_sets {
        for (i, q) in queries.iter().enumerate() {
            for k in DEPTHS {
                let exhaustive = ranking(r, q, k, base, Evaluation::Exhaustive);
                let pruned = ranking(r, q, k, base, Evaluation::Pruned);
                assert_eq!(
                    pruned, exhaustive,
                    "query {i} {q:?}, k={k}, bm25 {:?}, weights {:?}",
                    base.bm25, base.weights
                );
                assert!(!exhaustive.is_empty(), "query {i} {q:?} matched nothing");
                compared += 1;
                if exhaustive.windows(2).any(|w| w[0].1 == w[1].1) {
                    with_ties += 1;
                }
            }
        }
    }
    (compared, with_ties)
}

fn options(k1: f32, b: f32, weights: Option<FieldWeights>) -> SearchOptions {
    let mut o = SearchOptions::top(10);
    o.bm25 = Some(Bm25Params { k1, b });
    o.weights = weights;
    o
}

/// Query `i` alone, and query `i` with the next query as a weight-0.3 part (as selected PTKB
/// statements are added to a turn's query).
fn plain_and_weighted(texts: &[String]) -> Vec<WeightedQuery> {
    let mut out: Vec<WeightedQuery> = texts.iter().map(|t| WeightedQuery::text(t)).collect();
    for (i, t) in texts.iter().enumerate() {
        let next = &texts[(i + 1) % texts.len()];
        out.push(WeightedQuery::text(t).with(next, 0.3));
    }
    out
}

fn index(home: &Path, name: &str, format: Format, inputs: Vec<PathBuf>) -> TantivyRetriever {
    let mut o = IndexOptions::new(name, format);
    o.inputs = inputs;
    o.threads = 2;
    o.heap_bytes = 32 << 20;
    index_collection(home, &o).unwrap();
    let registry = CollectionRegistry::new(home);
    TantivyRetriever::open(&registry.root().join(name)).unwrap()
}

fn cranfield_queries(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap().replace('\r', "");
    let mut queries: Vec<String> = Vec::new();
    let mut in_text = false;
    for line in text.lines() {
        if line.starts_with(".I") {
            queries.push(String::new());
            in_text = false;
        } else if line.starts_with(".W") {
            in_text = true;
        } else if in_text {
            let q = queries.last_mut().unwrap();
            q.push(' ');
            q.push_str(line);
        }
    }
    queries
}

#[test]
fn pruned_equals_exhaustive_on_cranfield() {
    let data = crate::support::shared_data("classic-ir/cranfield");
    let home = tempfile::tempdir().unwrap();
    let r = index(
        home.path(),
        "cran",
        Format::Smart,
        vec![data.join("cran.all.1400")],
    );
    let texts = cranfield_queries(&data.join("cran.qry"));
    assert_eq!(texts.len(), 225);
    let queries = plain_and_weighted(&texts);
    let (compared, with_ties) = assert_identical(
        &r,
        &queries,
        &[options(0.9, 0.4, None), options(1.2, 0.75, None)],
    );
    assert_eq!(compared, 2 * 450 * DEPTHS.len());
    assert!(with_ties > 0, "no ranking with ties: tie-breaking untested");
}

#[test]
fn pruned_equals_exhaustive_on_dl19_candidates() {
    let data = crate::support::shared_data("trec-dl-rerank");
    let home = tempfile::tempdir().unwrap();
    let r = index(
        home.path(),
        "dl19",
        Format::TrecDlCandidates,
        vec![data.join("rank_llm_data_bm25_dl19_top100.json.gz")],
    );
    assert!(r.num_passages() > 4000, "{} passages", r.num_passages());
    let texts: Vec<String> = std::fs::read_to_string(data.join("topics.dl19-passage.txt"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('\t').map(|(_, t)| t.to_string()))
        .collect();
    assert_eq!(texts.len(), 43);
    let queries = plain_and_weighted(&texts);
    let (compared, _) = assert_identical(
        &r,
        &queries,
        &[options(0.9, 0.4, None), options(1.2, 0.75, None)],
    );
    assert_eq!(compared, 2 * 86 * DEPTHS.len());
}

/// Pseudo-words (letters only, so the analyzer keeps them as single tokens), Zipf-distributed.
fn synthetic_vocabulary(rng: &mut StdRng, n: usize) -> Vec<String> {
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "bel", "dor", "fen", "gal", "hum", "jor",
        "pix", "zan",
    ];
    let mut words: Vec<String> = Vec::with_capacity(n);
    while words.len() < n {
        let len = rng.gen_range(2..=4);
        let w: String = (0..len)
            .map(|_| SYLLABLES[rng.gen_range(0..SYLLABLES.len())])
            .collect();
        if !words.contains(&w) {
            words.push(w);
        }
    }
    words
}

/// A collection in 4 shard files (one commit, hence at least one segment, each), with every
/// 50th passage a copy of the one before it under a new id, so scores tie across documents.
fn write_synthetic_collection(dir: &Path, rng: &mut StdRng, vocab: &[String]) -> Vec<PathBuf> {
    let zipf = WeightedIndex::new((1..=vocab.len()).map(|r| 1.0 / (r as f64).powf(1.07))).unwrap();
    let mut files = Vec::new();
    let mut previous = (String::new(), String::new());
    for shard in 0..4 {
        let path = dir.join(format!("shard{shard}.jsonl"));
        let mut out = String::new();
        for i in 0..5000 {
            let id = format!("s{shard}-{i:05}");
            let (title, text) = if i % 50 == 49 {
                previous.clone()
            } else {
                let title_len = rng.gen_range(2..8);
                let text_len = rng.gen_range(20..160);
                let mut words = |n: usize| {
                    (0..n)
                        .map(|_| vocab[zipf.sample(rng)].as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                (words(title_len), words(text_len))
            };
            out.push_str(&serde_json::json!({"id": id, "title": title, "text": text}).to_string());
            out.push('\n');
            previous = (title, text);
        }
        std::fs::write(&path, out).unwrap();
        files.push(path);
    }
    files
}

fn segment_count(collection_dir: &Path) -> usize {
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(collection_dir.join("tantivy/meta.json")).unwrap(),
    )
    .unwrap();
    meta["segments"].as_array().unwrap().len()
}

#[test]
fn pruned_equals_exhaustive_on_synthetic_segments() {
    let mut rng = StdRng::seed_from_u64(15);
    let vocab = synthetic_vocabulary(&mut rng, 3000);
    let input = tempfile::tempdir().unwrap();
    let files = write_synthetic_collection(input.path(), &mut rng, &vocab);
    let home = tempfile::tempdir().unwrap();
    let mut o = IndexOptions::new("synth", Format::Jsonl);
    o.inputs = files;
    o.threads = 2;
    o.heap_bytes = 32 << 20;
    o.commit_bytes = 1;
    index_collection(home.path(), &o).unwrap();
    let dir = CollectionRegistry::new(home.path()).root().join("synth");
    assert!(
        segment_count(&dir) >= 2,
        "one segment: cross-segment pruning untested"
    );
    let r = TantivyRetriever::open(&dir).unwrap();
    assert_eq!(r.num_passages(), 20_000);

    // Queries mixing frequent and rare words: 1 to 6 words, then PTKB-like weighted parts.
    let mut queries = Vec::new();
    for n in 1..=6 {
        for _ in 0..6 {
            let words: Vec<&str> = (0..n)
                .map(|j| {
                    // The first word from the 50 most frequent, the others from anywhere.
                    let bound = if j == 0 { 50 } else { vocab.len() };
                    vocab[rng.gen_range(0..bound)].as_str()
                })
                .collect();
            queries.push(words.join(" "));
        }
    }
    let mut weighted: Vec<WeightedQuery> = queries.iter().map(|q| WeightedQuery::text(q)).collect();
    for i in 0..12 {
        let statement = (0..8)
            .map(|_| vocab[rng.gen_range(0..vocab.len())].as_str())
            .collect::<Vec<_>>()
            .join(" ");
        weighted.push(
            WeightedQuery::text(&queries[i * 3])
                .with(&statement, 0.3)
                .with(&queries[i * 2 + 1], 0.7),
        );
    }
    // A rare word alone: many documents share its tf and length bucket, so ranks tie on score.
    weighted.push(WeightedQuery::text(&vocab[vocab.len() - 1]));
    let title_boost = Some(FieldWeights {
        body: 1.0,
        title: 0.5,
        headings: 0.0,
    });
    let (compared, with_ties) = assert_identical(
        &r,
        &weighted,
        &[
            options(0.9, 0.4, None),
            options(1.2, 0.75, None),
            options(0.9, 0.4, title_boost),
        ],
    );
    assert_eq!(compared, 3 * weighted.len() * DEPTHS.len());
    assert!(with_ties > 0, "no ranking with ties: tie-breaking untested");

    // The indexer wrote one impacts file per segment (the bounds used above) and listed them
    // in the checksum manifest.
    let impacts = dir.join("impacts");
    let written = std::fs::read_dir(&impacts).unwrap().count();
    assert_eq!(written, segment_count(&dir));
    assert!(convrag::index::checksum::verify(&dir).unwrap().is_empty());
    // Without them pruning falls back to tantivy's block maxima, and is still exact.
    std::fs::remove_dir_all(&impacts).unwrap();
    let r = TantivyRetriever::open(&dir).unwrap();
    assert_identical(&r, &weighted, &[options(0.9, 0.4, None)]);
}

/// Outside the bounds' assumptions (b > 1, a negatively weighted part) the default evaluation
/// still gives the exhaustive ranking.
#[test]
fn pruned_falls_back_to_exhaustive_outside_its_bounds() {
    let mut rng = StdRng::seed_from_u64(7);
    let vocab = synthetic_vocabulary(&mut rng, 500);
    let input = tempfile::tempdir().unwrap();
    let files = write_synthetic_collection(input.path(), &mut rng, &vocab);
    let home = tempfile::tempdir().unwrap();
    let r = index(home.path(), "odd", Format::Jsonl, files[..1].to_vec());
    let queries: Vec<WeightedQuery> = (0..10)
        .map(|i| WeightedQuery::text(&format!("{} {}", vocab[i], vocab[i * 7 + 3])))
        .collect();
    assert_identical(&r, &queries, &[options(0.9, 1.5, None)]);
    let subtracting: Vec<WeightedQuery> = (0..10)
        .map(|i| WeightedQuery::text(&vocab[i]).with(&vocab[i + 20], -0.5))
        .collect();
    assert_identical(&r, &subtracting, &[options(0.9, 0.4, None)]);
}

/// `convrag search --evaluation`: pruned (the default) and exhaustive write the same run file; an
/// unknown evaluation is refused, naming the option, and writes nothing.
#[test]
fn search_command_evaluations_agree_and_an_unknown_one_is_refused() {
    let data = crate::support::shared_data("classic-ir/cranfield");
    let home = tempfile::tempdir().unwrap();
    index(
        &home.path().join("collections"),
        "cran",
        Format::Smart,
        vec![data.join("cran.all.1400")],
    );
    let topics = home.path().join("topics.tsv");
    let lines: Vec<String> = cranfield_queries(&data.join("cran.qry"))
        .iter()
        .take(40)
        .enumerate()
        .map(|(i, q)| format!("{}\t{}", i + 1, q.trim()))
        .collect();
    std::fs::write(&topics, lines.join("\n") + "\n").unwrap();
    let search = |evaluation: &str, out: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_convrag"))
            .arg("--home")
            .arg(home.path())
            .args(["search", "--collection", "cran", "--k", "100", "--topics"])
            .arg(&topics)
            .arg("--output")
            .arg(out)
            .args(["--evaluation", evaluation])
            .output()
            .unwrap()
    };
    let (pruned, exhaustive) = (home.path().join("p.trec"), home.path().join("e.trec"));
    for (evaluation, out) in [("pruned", &pruned), ("exhaustive", &exhaustive)] {
        let o = search(evaluation, out);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let run = std::fs::read_to_string(&pruned).unwrap();
    assert_eq!(run.lines().count(), 40 * 100);
    assert_eq!(run, std::fs::read_to_string(&exhaustive).unwrap());

    let bogus = home.path().join("b.trec");
    let o = search("wand", &bogus);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--evaluation") && err.contains("wand"),
        "{err}"
    );
    assert!(!bogus.exists());
}
