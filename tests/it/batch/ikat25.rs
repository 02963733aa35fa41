//! `convrag run ikat` over made-up topics in the 2025 layout (tests/fixtures/ikat/topics_2025.json,
//! the batch fixture's topics rewritten) writes the 2025 JSONL: automatic, manual and
//! generation-only runs, byte for byte against tests/golden/batch/ikat25_*.jsonl, each of which
//! the organizers' checker accepts with nothing to fix. BM25 order and the extractive generator,
//! as in batch_golden.rs. Regenerate with `CONVRAG_UPDATE_GOLDEN=1`, then record the official
//! tools' outputs again (commands below).
//!
//! The official tools (irlabamsterdam/iKAT, 2025/scripts, commit
//! 05399308a3cf4eb56b35bed8bee0771e4f8f1404; MIT; not part of this repository) were run on the
//! golden files, in a directory holding them and the topics, with Python 3.11.7:
//!
//! ```text
//! PYTHONHASHSEED=0 python3 validate_trec_ikat25.py --input ikat25_automatic.jsonl --topics ikat25_topics.json
//!   → tests/golden/batch/ikat25_automatic.validate.txt (likewise manual, generation_only;
//!     stdout, then `[exit] N` and `[fixed] yes|no`: whether a .fixed file was written)
//! python3 generate_run.py --submission ikat25_automatic.jsonl --output ikat25_automatic.generate_run.run
//!   → tests/golden/batch/ikat25_automatic.generate_run.run
//! ```

use crate::batch_support;

use crate::support::{fixture, golden, golden_text};
use batch_support::{s, Env};
use convrag::formats::ikat;
use convrag::formats::ikat25_validate::check_text;
use convrag::formats::ValidationContext;
use serde_json::Value;

#[tokio::test]
async fn ikat_2025_submissions_pass_the_official_checker() {
    let env = Env::new(false).await;
    env.index(
        "ikat-fixture",
        "ikat-passages",
        &fixture("ikat/passages.jsonl"),
        None,
    );
    let topics = fixture("ikat/topics_2025.json");
    let common = ["--depth", "20", "--passages", "5", "--quiet"];
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "ikat", "--topics", s(&topics)];
        args.extend(extra);
        args.extend(common);
        env.ok(&args)
    };
    run(&[
        "--collection",
        "ikat-fixture",
        "--output",
        "automatic.jsonl",
        "--trec-output",
        "automatic.trec",
    ]);
    run(&[
        "--collection",
        "ikat-fixture",
        "--run-type",
        "manual",
        "--team-id",
        "made-up-team",
        "--output",
        "manual.jsonl",
    ]);
    run(&[
        "--collection",
        "ikat-fixture",
        "--run-type",
        "generation-only",
        "--ranking",
        s(&fixture("ikat/given_ranking.trec")),
        "--output",
        "generation_only.jsonl",
    ]);
    let parsed = ikat::read_topics(&topics).unwrap();
    for name in ["automatic", "manual", "generation_only"] {
        let text = env.read(&format!("{name}.jsonl"));
        // Nothing for the organizers' checker to report or fix.
        assert_eq!(check_text(&text, &parsed), vec![], "{name}");
        golden(&format!("batch/ikat25_{name}.jsonl"), &text);
    }
    let trec = env.read("automatic.trec");
    for name in ["automatic", "manual", "generation_only"] {
        let official = golden_text(&format!("batch/ikat25_{name}.validate.txt"));
        assert!(
            official.contains("All required turn_ids are present")
                && official.contains("Validation completed: all lines passed.\n")
                && official.ends_with("[exit] 0\n[fixed] no\n"),
            "{name}: {official}"
        );
        assert!(!official.contains("WARNING") && !official.contains("Fix-"));
    }
    let lines: Vec<Value> = env
        .read("manual.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0]["metadata"]["team_id"], "made-up-team");
    assert_eq!(lines[0]["metadata"]["run_type"], "manual");
    // PTKB provenance is the statements' text, ranked: what the 2024 manual run lists as [1, 2].
    assert_eq!(
        lines[2]["responses"][0]["ptkb_provenance"],
        serde_json::json!(["I am vegetarian.", "I am allergic to peanuts."])
    );
    let first: Value =
        serde_json::from_str(env.read("generation_only.jsonl").lines().next().unwrap()).unwrap();
    assert_eq!(first["metadata"]["run_type"], "generation-only");
    assert_eq!(first["metadata"]["team_id"], "convrag");
    // The given ranking, its scores kept.
    assert_eq!(first["references"]["clueweb22-en0001-00-00001:0"], 10.0);

    // The TREC run is what the organizers' generate_run.py makes of the submission.
    assert_eq!(trec, golden_text("batch/ikat25_automatic.generate_run.run"));
    assert!(!trec.is_empty());

    // --format 2024 writes the 2024 run JSON from the same topics.
    run(&[
        "--collection",
        "ikat-fixture",
        "--format",
        "2024",
        "--output",
        "automatic24.json",
    ]);
    let text = env.read("automatic24.json");
    let report = ikat::validate_run_text(&text, Some(&parsed), &ValidationContext::default());
    assert!(report.is_clean(), "{:?}", report.problems);
    // And --format 2025 the JSONL from 2023-layout topics.
    let old = fixture("ikat/topics_2023.json");
    env.ok(&[
        "run",
        "ikat",
        "--topics",
        s(&old),
        "--collection",
        "ikat-fixture",
        "--format",
        "2025",
        "--output",
        "from2023.jsonl",
        "--depth",
        "20",
        "--passages",
        "5",
        "--quiet",
    ]);
    let from2023 = env.read("from2023.jsonl");
    let old_topics = ikat::read_topics(&old).unwrap();
    assert_eq!(check_text(&from2023, &old_topics), vec![]);
    // Same content, same answers: only the run name differs.
    assert_eq!(
        from2023.replace("\"from2023\"", "\"automatic\""),
        env.read("automatic.jsonl")
    );
}
