//! `convrag tune` refuses unreadable training data: non-zero exit naming the file (and the line
//! for malformed JSON), and no weights file written.

use crate::support::fixture;
use std::process::Command;

/// `convrag <args>` with the test models' home (`--neural` loads the bi-encoder from it).
fn tune(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_convrag"))
        .env("CONVRAG_HOME", crate::common::data_home())
        .args(args)
        .output()
        .expect("run convrag")
}

/// Runs `convrag tune <args> --output <dir>/<weights>` and returns its output with the fitted
/// file and the committed `src/pipeline/weights/<weights>`.
fn tune_committed(
    dir: &std::path::Path,
    args: &[&str],
    weights: &str,
) -> (std::process::Output, String, String) {
    let output = dir.join(weights);
    let mut all = args.to_vec();
    all.extend(["--output", output.to_str().unwrap()]);
    let r = tune(&all);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let fitted = std::fs::read_to_string(&output).unwrap();
    let committed = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/pipeline/weights")
            .join(weights),
    )
    .unwrap();
    (r, fitted, committed)
}

#[test]
fn a_missing_or_malformed_training_file_is_named_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("weights.json");
    let out_arg = output.to_str().unwrap();

    let missing = dir.path().join("missing.json");
    let r = tune(&[
        "tune",
        "rewrite",
        "--train",
        missing.to_str().unwrap(),
        "--output",
        out_arg,
    ]);
    assert!(!r.status.success());
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("missing.json"), "{stderr}");

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"bad json").unwrap();
    let r = tune(&[
        "tune",
        "ptkb",
        "--train",
        bad.to_str().unwrap(),
        "--output",
        out_arg,
    ]);
    assert!(!r.status.success());
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("bad.json:1: invalid JSON"), "{stderr}");
    assert!(!output.exists());
}

/// `tune extractive --meaning` with no model installed says so at once, before any tuning, and
/// writes nothing.
#[test]
fn choosing_the_meaning_share_without_a_model_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("stop.json");
    let topics = crate::support::shared_data("ikat/official/2023_train_topics.json");
    let passages = crate::support::shared_data("ikat/official/2023_train_topics_psg_text.jsonl");
    let r = Command::new(env!("CARGO_BIN_EXE_convrag"))
        .env("CONVRAG_HOME", dir.path().join("empty-home"))
        .args([
            "tune",
            "extractive",
            "--meaning",
            "--train",
            &format!("{}={}", topics.display(), passages.display()),
            "--output",
            output.to_str().unwrap(),
        ])
        .output()
        .expect("run convrag");
    assert!(!r.status.success());
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(
        stderr.contains("--meaning: no reranking model could be loaded"),
        "{stderr}"
    );
    assert!(r.stdout.is_empty(), "tuned before refusing");
    assert!(!output.exists());
}

/// The committed term selector of the rewriter (and its count of first-person PTKB words) is
/// exactly what the documented command fits on iKAT 2023 train + CAsT 2019 + CAsT 2022
/// (BENCHMARKS.md); CAsT 2022 is kept with the weights (`src/tune/training/`).
#[test]
fn the_committed_rewrite_selector_is_the_tuning_output() {
    let dir = tempfile::tempdir().unwrap();
    let ikat = crate::support::shared_data("ikat/official/2023_train_topics.json");
    let cast = crate::support::shared_data("trec-cast/2019/evaluation_topics_v1.0.json");
    let cast_refs =
        crate::support::shared_data("trec-cast/2019/evaluation_topics_annotated_resolved_v1.0.tsv");
    let cast_train = format!("{}={}", cast.display(), cast_refs.display());
    let cast2022 = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/tune/training/cast2022_evaluation_topics_tree_v1.0.json");
    let (r, fitted, committed) = tune_committed(
        dir.path(),
        &[
            "tune",
            "rewrite",
            "--train",
            ikat.to_str().unwrap(),
            "--train",
            &cast_train,
            "--train",
            cast2022.to_str().unwrap(),
        ],
        "rewrite_terms.json",
    );
    assert_eq!(fitted, committed, "re-run the command in BENCHMARKS.md");
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(stdout.contains("chosen by cross-validated F2"), "{stdout}");
    // Each training set's cross-validated figures are reported beside the pooled ones.
    assert_eq!(stdout.matches("  training set ").count(), 3, "{stdout}");
    // CAsT 2022 is read as its topic trees: 205 user turns, each once.
    assert!(stdout.contains("training: 779 turns"), "{stdout}");
}

/// The committed stopping rule of the extractive answer is exactly what the documented command
/// fits on the iKAT 2023 training topics (the test topics are only reported, never fitted on).
#[test]
fn the_committed_extractive_stopping_rule_is_the_tuning_output() {
    let dir = tempfile::tempdir().unwrap();
    let topics = crate::support::shared_data("ikat/official/2023_train_topics.json");
    let passages = crate::support::shared_data("ikat/official/2023_train_topics_psg_text.jsonl");
    let train = format!("{}={}", topics.display(), passages.display());
    let (_, fitted, committed) = tune_committed(
        dir.path(),
        &["tune", "extractive", "--train", &train],
        "extractive_stop.json",
    );
    assert_eq!(fitted, committed, "re-run the command in src/cli/tune.rs");

    // A passage file with a broken line is refused, naming it and the line.
    let bad = dir.path().join("passages.jsonl");
    std::fs::write(
        &bad,
        "{\"doc_id\": \"d\", \"passage_id\": \"0\", \"passage_text\": \"x\"}\n{oops\n",
    )
    .unwrap();
    let spec = format!("{}={}", topics.display(), bad.display());
    let out2 = dir.path().join("second.json");
    let r = tune(&[
        "tune",
        "extractive",
        "--train",
        &spec,
        "--output",
        out2.to_str().unwrap(),
    ]);
    assert!(!r.status.success());
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("passages.jsonl:2"), "{stderr}");
    assert!(!out2.exists());
}

/// Every number of two weight files within `tolerance` (bi-encoder cosines may differ in their
/// last bits between ONNX Runtime's thread schedules), every other value equal.
fn assert_same_weights(fitted: &str, committed: &str, tolerance: f64, name: &str) {
    fn walk(a: &serde_json::Value, b: &serde_json::Value, tolerance: f64, path: &str) {
        use serde_json::Value;
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                assert!(
                    (x - y).abs() <= tolerance,
                    "{path}: fitted {x}, committed {y}"
                );
            }
            (Value::Array(x), Value::Array(y)) => {
                assert_eq!(x.len(), y.len(), "{path}");
                for (i, (x, y)) in x.iter().zip(y).enumerate() {
                    walk(x, y, tolerance, &format!("{path}[{i}]"));
                }
            }
            (Value::Object(x), Value::Object(y)) => {
                assert_eq!(
                    x.keys().collect::<Vec<_>>(),
                    y.keys().collect::<Vec<_>>(),
                    "{path}"
                );
                for (k, v) in x {
                    walk(v, &y[k], tolerance, &format!("{path}.{k}"));
                }
            }
            _ => assert_eq!(a, b, "{path}"),
        }
    }
    let parse = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
    walk(&parse(fitted), &parse(committed), tolerance, name);
}

fn small_ptkb_dev() -> String {
    fixture("ptkb/small_dev.json")
        .to_string_lossy()
        .into_owned()
}

/// The committed calibrated PTKB model without the bi-encoder is exactly what the documented
/// command fits on iKAT 2023 train + test and the made-up development turns (BENCHMARKS.md, "PTKB
/// selection that abstains").
#[test]
fn the_committed_calibrated_lexical_ptkb_model_is_the_tuning_output() {
    let dir = tempfile::tempdir().unwrap();
    let train = crate::support::shared_data("ikat/official/2023_train_topics.json");
    let test = crate::support::shared_data("ikat/official/2023_test_topics.json");
    let dev = small_ptkb_dev();
    let (r, fitted, committed) = tune_committed(
        dir.path(),
        &[
            "tune",
            "ptkb-selection",
            "--judged-only",
            "--train",
            train.to_str().unwrap(),
            "--train",
            test.to_str().unwrap(),
            "--dev",
            &dev,
        ],
        "ptkb_calibrated_lexical.json",
    );
    assert_eq!(fitted, committed);
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(stdout.contains("cross-validated, all sets"), "{stdout}");
    assert!(stdout.contains("prior shift"), "{stdout}");

    // Development turns naming a statement the PTKB lacks are refused, naming file and turn.
    let bad = dir.path().join("dev.json");
    std::fs::write(
        &bad,
        r#"{"turns": [{"history": [], "utterance": "Which tent?", "ptkb": ["I camp."], "relevant": [3]}]}"#,
    )
    .unwrap();
    let out = dir.path().join("refused.json");
    let r = tune(&[
        "tune",
        "ptkb-selection",
        "--judged-only",
        "--train",
        train.to_str().unwrap(),
        "--dev",
        bad.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(!r.status.success());
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(
        stderr.contains("dev.json") && stderr.contains("turn 1"),
        "{stderr}"
    );
    assert!(!out.exists());
}

/// The served PTKB model (calibrated, with the bi-encoder) is what the documented command fits
/// (BENCHMARKS.md): the real all-MiniLM-L6-v2 over iKAT 2023 train + test and the development
/// turns.
#[test]
fn the_committed_calibrated_neural_ptkb_model_is_the_tuning_output() {
    let dir = tempfile::tempdir().unwrap();
    let train = crate::support::shared_data("ikat/official/2023_train_topics.json");
    let test = crate::support::shared_data("ikat/official/2023_test_topics.json");
    crate::common::model_dir("all-MiniLM-L6-v2");
    let (_, fitted, committed) = tune_committed(
        dir.path(),
        &[
            "tune",
            "ptkb-selection",
            "--neural",
            "--judged-only",
            "--train",
            train.to_str().unwrap(),
            "--train",
            test.to_str().unwrap(),
            "--dev",
            &small_ptkb_dev(),
        ],
        "ptkb_calibrated_model.json",
    );
    assert_same_weights(&fitted, &committed, 1e-6, "ptkb_calibrated_model");
}

/// The learned PTKB ranker's committed weights (the server's ranker without a bi-encoder) are
/// what `convrag tune ptkb` fits on iKAT 2023 train (BENCHMARKS.md, "PTKB statement ranking").
#[test]
fn the_committed_learned_ptkb_models_are_the_tuning_output() {
    let dir = tempfile::tempdir().unwrap();
    let train = crate::support::shared_data("ikat/official/2023_train_topics.json");
    let (_, fitted, committed) = tune_committed(
        dir.path(),
        &["tune", "ptkb", "--train", train.to_str().unwrap()],
        "ptkb_lexical.json",
    );
    assert_same_weights(&fitted, &committed, 0.0, "ptkb_lexical");
    crate::common::model_dir("all-MiniLM-L6-v2");
    let (_, fitted, committed) = tune_committed(
        dir.path(),
        &[
            "tune",
            "ptkb",
            "--neural",
            "--train",
            train.to_str().unwrap(),
        ],
        "ptkb_model.json",
    );
    assert_same_weights(&fitted, &committed, 1e-6, "ptkb_model");
}

/// `convrag tune ptkb-transfer` on iKAT 2023 train and test (BENCHMARKS.md, "PTKB ranking that
/// transfers"): the correction fitted on either split does not beat the zero-shot base on the
/// other everywhere, so the base is what turns serve.
#[test]
fn the_ptkb_transfer_check_keeps_the_zero_shot_base() {
    let d = |rel: &str| {
        crate::support::shared_data(rel)
            .to_str()
            .unwrap()
            .to_string()
    };
    let test = format!(
        "{}={}",
        d("ikat/official/2023_test_topics.json"),
        d("ikat/qrels/2023_ptkb_qrels_nist.txt")
    );
    let train = d("ikat/official/2023_train_topics.json");
    let r = tune(&["tune", "ptkb-transfer", "--split", &train, "--split", &test]);
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    eprintln!("{stdout}");
    assert_eq!(stdout.matches("zero-shot base").count(), 4, "{stdout}");
    assert!(stdout.contains("zero-shot base 0.7343"), "{stdout}");
    assert!(stdout.contains("serve: the zero-shot base"), "{stdout}");
    let one = tune(&["tune", "ptkb-transfer", "--split", &train]);
    assert!(!one.status.success());
}
