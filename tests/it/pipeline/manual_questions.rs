//! Questions about the PostgreSQL 15 manual, asked as the chat asks them (extractive answers,
//! reranked, the chat's default length), in two sets scored side by side:
//! - development (`tests/fixtures/expected_answers/manual-questions.jsonl`, 72 questions rules were tuned on);
//! - frozen test (`tests/fixtures/expected_answers/manual-questions-test.jsonl`, 70 questions written before any
//!   run of issue 55's changes and never tuned on), scored once per change.
//!
//! Each set's answers must show the expected command (and inside code) at least as often as
//! measured less one question, with a median answer of at most 120 words; issue 55's targets on
//! the test set (85 % shown, 80 % as code) are not reached yet (BENCHMARKS.md). Beside the
//! figures it prints how many questions have a passage among the answer's ten that holds the
//! expected command: what the first stage and reranker gave the answer to choose from.
//!
//! `CONVRAG_MANUAL_SETS=dev` (or `test`) asks one set only, and the targets of a set are asserted
//! only when it was asked; unset, both are asked. `scripts/test.sh` asks the frozen test set. `CONVRAG_MANUAL_RETRIEVAL=hybrid`
//! computes the manual's passage vectors first (about 4 minutes) and retrieves as a turn asking
//! for hybrid retrieval does; the chat's default, and so this test's, is BM25.
//! `CONVRAG_MANUAL_DEPTH=N` reranks N first-stage candidates instead of the chat's default, and
//! `CONVRAG_MANUAL_MAX_WORDS=N` answers in at most N words instead of the chat's default length.
//!
//! The manual's HTML directory comes from `CONVRAG_TEST_MANUAL_DIR` (`scripts/test.sh` sets it from
//! `scripts/fetch-manual.sh`); without it the cached copy fetch-manual.sh unpacks is used, and
//! when there is none (or `CI` is set and the variable is not) the test fails.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use convrag::collection::Format;
use convrag::config::Config;
use convrag::dense::DiskEmbeddingCache;
use convrag::dense::{Retrieval, VectorSearch};
use convrag::eval::expected::{read_expected, shown, summarize, ExpectedAnswer, ExpectedSummary};
use convrag::index::{index_collection, IndexOptions, TantivyRetriever};
use convrag::pipeline::context::ConversationContext;
use convrag::pipeline::turn::{PassageSource, RetrievalTarget, TurnSettings};
use convrag::rerank::{EmbeddingCache, EmbeddingLog, PassageRef};
use convrag::service::turns::TurnService;
use convrag::service::WithoutVectors;

use crate::common;
use crate::support::fixture;

fn manual_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("CONVRAG_TEST_MANUAL_DIR") {
        if !dir.trim().is_empty() {
            return PathBuf::from(dir);
        }
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CONVRAG_TEST_MANUAL_DIR is not set (scripts/test.sh sets it from scripts/fetch-manual.sh)"
    );
    let root = cache_root().join("postgresql-doc-15");
    let current = std::fs::read_to_string(root.join("current")).unwrap_or_else(|_| {
        panic!("no PostgreSQL manual: run scripts/fetch-manual.sh or set CONVRAG_TEST_MANUAL_DIR")
    });
    root.join(current.trim())
        .join("usr/share/doc/postgresql-doc-15/html")
}

/// `scripts/`' cache directory (`CONVRAG_CACHE`, else `~/.cache/convrag`).
fn cache_root() -> PathBuf {
    std::env::var("CONVRAG_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/convrag"))
}

/// What one set's questions gave.
struct Asked {
    summary: ExpectedSummary,
    /// The first stage's times, in the order asked.
    retrieve_ms: Vec<f64>,
    generate_ms: Vec<f64>,
    weighed: usize,
    encoded: usize,
    /// Questions whose expected command one of the ten passages an answer is read from holds:
    /// what an extractive answer cannot exceed.
    held_in_top_10: usize,
}

/// The count `name` sets for a measurement, if it is set.
fn count_from_env(name: &str) -> Option<usize> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?}: not a count")),
    )
}

/// The model's embedding cache in this test: vectors kept on disk ([`EmbeddingLog`]) under the
/// SHA-256 of the text encoded, whatever collection or id asks for it. A fresh index of the same
/// manual (every run builds one) gives its passages new cache keys in the served cache; here
/// their vectors are found again. A text's vector is the model's for that text alone, so the
/// figures are those an empty cache gives.
struct TextAddressedCache {
    log: EmbeddingLog,
    /// The text hash of each id asked for, since `put_many` names ids only.
    hashes: Mutex<HashMap<String, String>>,
}

impl TextAddressedCache {
    /// The log's one collection.
    const TEXTS: &'static str = "texts";

    fn new(root: PathBuf) -> Self {
        Self {
            log: EmbeddingLog::new(root),
            hashes: Mutex::new(HashMap::new()),
        }
    }
}

impl EmbeddingCache for TextAddressedCache {
    fn get_many(
        &self,
        model: &str,
        _collection: &str,
        passages: &[PassageRef<'_>],
    ) -> convrag::rerank::Result<Vec<Option<Arc<[f32]>>>> {
        use sha2::{Digest, Sha256};
        let keys: Vec<String> = passages
            .iter()
            .map(|p| hex::encode(Sha256::digest(p.text.as_bytes())))
            .collect();
        let mut hashes = self.hashes.lock().unwrap();
        for (p, key) in passages.iter().zip(&keys) {
            hashes.insert(p.id.to_string(), key.clone());
        }
        drop(hashes);
        let by_text: Vec<PassageRef<'_>> = passages
            .iter()
            .zip(&keys)
            .map(|(p, key)| PassageRef {
                id: key,
                text: p.text,
                ordinal: None,
            })
            .collect();
        self.log.get_many(model, Self::TEXTS, &by_text)
    }

    fn put_many(
        &self,
        model: &str,
        _collection: &str,
        entries: &[(&str, &[f32])],
    ) -> convrag::rerank::Result<()> {
        let hashes = self.hashes.lock().unwrap();
        let keys: Vec<&str> = entries
            .iter()
            .map(|(id, _)| {
                hashes
                    .get(*id)
                    .map(String::as_str)
                    .expect("get_many named every id put_many stores")
            })
            .collect();
        let by_text: Vec<(&str, &[f32])> = keys
            .iter()
            .zip(entries)
            .map(|(key, (_, vector))| (*key, *vector))
            .collect();
        self.log.put_many(model, Self::TEXTS, &by_text)
    }
}

/// One set's questions asked through the chat's pipeline: each answer's (shown, words), and the
/// stages' times.
async fn ask_all(
    service: &TurnService,
    target: &RetrievalTarget,
    label: &str,
    questions: &[ExpectedAnswer],
) -> Asked {
    let defaults = service.chat_defaults();
    let depth = count_from_env("CONVRAG_MANUAL_DEPTH").unwrap_or(defaults.depth);
    let settings = TurnSettings {
        retrieval: target.retrieval,
        fusion: target.retrieval.recommended_fusion(),
        depth,
        ..defaults
    };
    assert!(settings.rerank);
    let mut results = Vec::new();
    let mut generate_ms = Vec::new();
    let mut retrieve_ms = Vec::new();
    let (mut weighed, mut encoded) = (0, 0);
    let mut held_in_top_10 = 0;
    for q in questions {
        let source = PassageSource::Collection(target.clone());
        let output = service
            .pipeline()
            .run(
                ConversationContext::new(q.question.clone()),
                Some(source),
                &settings,
                &mut |_| {},
            )
            .await
            .unwrap();
        generate_ms.extend(output.timings.generate);
        retrieve_ms.extend(output.timings.retrieve);
        let generation = output.generation.expect("an answer");
        weighed += generation.diagnostics.weighed_by_meaning.unwrap_or(0);
        encoded += generation.diagnostics.meaning_encoded.unwrap_or(0);
        let answer = generation.response_text();
        let s = shown(&answer, &q.expect);
        let words = answer.split_whitespace().count();
        let in_top_10 = output
            .passages
            .iter()
            .take(10)
            .any(|p| shown(&p.text, &q.expect).appears);
        held_in_top_10 += usize::from(in_top_10);
        let top: Vec<&str> = output
            .passages
            .iter()
            .take(10)
            .map(|p| p.id.as_str())
            .collect();
        println!(
            "--- [{label}] {} [{}{}{}] {} words\ntop 10: {}\n{}\n",
            q.question,
            if s.appears { "shown" } else { "missing" },
            if s.in_code { ", as code" } else { "" },
            if in_top_10 { "" } else { "; not in the top 10" },
            words,
            top.join(" "),
            answer
        );
        results.push((s, words));
    }
    Asked {
        summary: summarize(&results),
        retrieve_ms,
        generate_ms,
        weighed,
        encoded,
        held_in_top_10,
    }
}

fn expected_answers(name: &str) -> Vec<ExpectedAnswer> {
    read_expected(&fixture(&format!("expected_answers/{name}"))).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extractive_answers_over_the_manual_show_the_expected_commands() {
    let manual = manual_dir();
    assert!(
        manual.join("index.html").exists(),
        "{} holds no manual",
        manual.display()
    );
    let sets = std::env::var("CONVRAG_MANUAL_SETS").unwrap_or_default();
    let ask_dev = sets.is_empty() || sets.contains("dev");
    let ask_test = sets.is_empty() || sets.contains("test");
    let dev = expected_answers("manual-questions.jsonl");
    let test = expected_answers("manual-questions-test.jsonl");
    assert!(dev.len() >= 30);
    assert!(test.len() >= 40);

    let home = tempfile::tempdir().unwrap();
    let defaults = Config::default();
    let chat_max_words =
        count_from_env("CONVRAG_MANUAL_MAX_WORDS").unwrap_or(defaults.chat_max_words);
    let config = Config {
        home: home.path().to_path_buf(),
        chat_max_words,
        ..defaults
    };
    let mut opts = IndexOptions::new("manual", Format::Html);
    opts.inputs = vec![manual];
    opts.threads = 2;
    index_collection(&config.collections_dir(), &opts).unwrap();
    let retriever =
        Arc::new(TantivyRetriever::open(&config.collections_dir().join("manual")).unwrap());
    // The model's vectors persist between runs, addressed by the text encoded: only a machine's
    // first run encodes the candidate passages and sentences.
    let embeddings_root = cache_root().join("test-embeddings/manual-questions");
    let model = common::default_model().with_cache(Arc::new(TextAddressedCache::new(
        embeddings_root.join("by-text"),
    )));
    let embeddings = Arc::new(DiskEmbeddingCache::new(embeddings_root));
    let search = VectorSearch::new(Arc::new(model), embeddings);
    let hybrid = std::env::var("CONVRAG_MANUAL_RETRIEVAL").as_deref() == Ok("hybrid");
    if hybrid {
        search
            .embed("manual", &retriever, &convrag::progress::NoProgress)
            .unwrap();
    }
    let service = TurnService::from_config(&config, Some(search.reranker()))
        .unwrap()
        .with_vectors(Some(search));
    let mode = if hybrid {
        Retrieval::Hybrid
    } else {
        Retrieval::Bm25
    };
    let target = service
        .retrieval_target(None, "manual", mode, WithoutVectors::Refuse)
        .await
        .unwrap();

    let mut summaries: Vec<(&str, ExpectedSummary, usize)> = Vec::new();
    let mut generate_ms = Vec::new();
    let mut retrieve_ms = Vec::new();
    let (mut weighed, mut encoded) = (0, 0);
    for (label, asked, questions) in [("dev", ask_dev, &dev), ("test", ask_test, &test)] {
        if !asked {
            continue;
        }
        let asked = ask_all(&service, &target, label, questions).await;
        generate_ms.extend(asked.generate_ms);
        retrieve_ms.extend(asked.retrieve_ms);
        weighed += asked.weighed;
        encoded += asked.encoded;
        summaries.push((label, asked.summary, asked.held_in_top_10));
    }
    println!(
        "| set | questions | expected command shown | as code | median words \
         | held by a top-10 passage |"
    );
    println!("|---|---|---|---|---|---|");
    for (label, s, held) in &summaries {
        println!(
            "| {label} | {} | {:.0} % ({}) | {:.0} % ({}) | {} | {held} |",
            s.questions,
            s.appears * 100.0,
            (s.appears * s.questions as f64).round(),
            s.in_code * 100.0,
            (s.in_code * s.questions as f64).round(),
            s.median_words
        );
    }
    // The first turn opens the index's files.
    let first_retrieve = retrieve_ms[0];
    retrieve_ms.sort_by(f64::total_cmp);
    println!(
        "first stage: {first_retrieve:.0} ms on the first turn, median {:.0} ms over {} turns",
        retrieve_ms[retrieve_ms.len() / 2],
        retrieve_ms.len()
    );
    generate_ms.sort_by(f64::total_cmp);
    println!(
        "answer stage (sentence meaning included): median {:.0} ms over {} turns; \
         {encoded} of the {weighed} sentences weighed by meaning encoded, the rest cached",
        generate_ms[generate_ms.len() / 2],
        generate_ms.len()
    );
    // Each guard is the measured figure less one question (BENCHMARKS.md, "Answers that hold"):
    // dev 58 / 72 shown, 58 as code; test 45 / 70 shown, 42 as code. Issue 31 asked 80 % on dev,
    // which the rules tuned on it reached (58) and reference pages' purposes cost two of; issue
    // 55 asks 85 % shown and 80 % as code on the test set, not reached yet.
    for (label, s, _) in &summaries {
        let (min_shown, min_code) = match *label {
            "dev" => (57.0 / 72.0, 57.0 / 72.0),
            _ => (44.0 / 70.0, 41.0 / 70.0),
        };
        assert!(s.appears >= min_shown - 1e-9, "{label}: {s:?}");
        assert!(s.in_code >= min_code - 1e-9, "{label}: {s:?}");
        assert!(s.median_words <= 120.0, "{label}: {s:?}");
    }
}
