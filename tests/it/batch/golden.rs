//! `convrag run ...` on small made-up fixtures (tests/fixtures/ikat, trec_rag, qrecc, poleval):
//! every output format byte for byte against tests/golden/batch, the stored records behind it, the sidecar, resumption rules and
//! bad input. BM25 order and the extractive generator (the data directory holds no model), so the
//! goldens do not depend on the machine's floating point.
//! Regenerate with `CONVRAG_UPDATE_GOLDEN=1 cargo test --test it batch::golden` and review the diff.

use crate::batch_support;

use crate::support::{fixture, golden};
use batch_support::{s, Env};
use convrag::formats::{ikat, poleval, qrecc, trec_rag, trec_run, ValidationContext};
use serde_json::Value;

fn meta(env: &Env, output: &str) -> Value {
    serde_json::from_str(&env.read(&format!("{output}.meta.json"))).unwrap()
}

#[tokio::test]
async fn ikat_runs_of_every_type() {
    let env = Env::new(false).await;
    env.index(
        "ikat-fixture",
        "ikat-passages",
        &fixture("ikat/passages.jsonl"),
        None,
    );
    let topics = fixture("ikat/topics_2023.json");
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
        "automatic.json",
        "--trec-output",
        "automatic.trec",
    ]);
    run(&[
        "--collection",
        "ikat-fixture",
        "--run-type",
        "manual",
        "--output",
        "manual.json",
    ]);
    run(&[
        "--collection",
        "ikat-fixture",
        "--run-type",
        "only_response",
        "--ranking",
        s(&fixture("ikat/given_ranking.trec")),
        "--output",
        "only_response.json",
    ]);
    run(&["--stages", "ptkb,rewrite", "--output", "ptkb.json"]);

    let parsed = ikat::read_topics(&topics).unwrap();
    let ctx = ValidationContext::default();
    for name in ["automatic.json", "manual.json", "only_response.json"] {
        let text = env.read(name);
        let report = ikat::validate_run_text(&text, Some(&parsed), &ctx);
        assert!(report.is_clean(), "{name}: {:?}", report.problems);
        golden(&format!("batch/ikat_{name}"), &text);
    }
    // The PTKB-only run has no passages: valid except for the passage rule it does not claim.
    let ptkb = env.read("ptkb.json");
    assert!(ikat::validate_run_text_with(&ptkb, Some(&parsed), &ctx, false).is_clean());
    assert!(ikat::validate_run_text(&ptkb, Some(&parsed), &ctx).has_errors());
    golden("batch/ikat_ptkb.json", &ptkb);
    let trec = env.read("automatic.trec");
    let rules = trec_run::RunRules {
        max_per_topic: 1000,
        topics: Some(vec![
            "1-1_1".into(),
            "1-1_2".into(),
            "1-1_3".into(),
            "2-1_1".into(),
            "2-1_2".into(),
        ]),
    };
    assert!(trec_run::validate_text(&trec, &rules, &ctx).is_clean());
    golden("batch/ikat_automatic.trec", &trec);

    // The turns are ordinary conversations of the `batch` user, with the topic's references.
    let pool = env.db.store.pool();
    type StoredTurnRow = (
        String,
        Option<String>,
        Option<Vec<String>>,
        Option<String>,
        Option<String>,
    );
    let (utterance, reference, ptkb_ref, canonical, rewrite): StoredTurnRow = sqlx::query_as(
        "SELECT t.utterance, t.reference_rewrite, t.reference_ptkb, t.canonical_response, t.rewritten_utterance \
         FROM turns t JOIN conversations c ON c.id = t.conversation_id JOIN users u ON u.id = c.user_id \
         WHERE u.name = 'batch' AND c.external_id = 'manual/1-1' AND t.external_turn_id = '1-1_2'",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(utterance, "How do I get enough protein from it?");
    assert_eq!(
        reference.as_deref(),
        Some("How does a vegetarian marathon runner get enough protein?")
    );
    assert_eq!(ptkb_ref, Some(vec!["1".to_string()]));
    assert!(canonical.unwrap().starts_with("Lentils, tofu"));
    // A manual run works from the resolved utterance.
    assert_eq!(rewrite, reference);
    let statements: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM ptkb_statements p JOIN conversations c ON c.id = p.conversation_id \
         WHERE c.external_id = 'automatic/1-1'",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(statements, 4);

    // Database row and sidecar hold the same facts.
    let m = meta(&env, "automatic.json");
    assert_eq!(m["name"], "automatic");
    assert_eq!(m["task"], "ikat");
    assert_eq!(m["settings"]["run_type"], "automatic");
    assert_eq!(m["settings"]["turn"]["depth"], 20);
    assert_eq!(
        m["settings"]["stages"],
        serde_json::json!(["ptkb", "rewrite", "retrieve", "generate"])
    );
    assert_eq!(m["model"], Value::Null);
    assert_eq!(m["convrag_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(m["collections"]["ikat-fixture"]["state"]["passages"], 12);
    assert_eq!(m["inputs"]["topics"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(m["turns"]["total"], 5);
    let (settings, sha, finished): (Value, String, bool) = sqlx::query_as(
        "SELECT settings, output_sha256, finished_at IS NOT NULL FROM batch_runs WHERE name = 'automatic'",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(settings, m["settings"]);
    assert_eq!(sha, m["output"]["sha256"].as_str().unwrap());
    assert!(finished);
}

#[tokio::test]
async fn trec_rag_2024_r_ag_and_rag() {
    let env = Env::new(false).await;
    env.index(
        "marco",
        "msmarco-v2.1-segmented",
        &fixture("trec_rag/segments.jsonl"),
        None,
    );
    let topics = fixture("trec_rag/topics_2024.tsv");
    let t = s(&topics);
    let base = [
        "run", "trec-rag", "--year", "2024", "--topics", t, "--quiet",
    ];
    let run = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend(extra);
        env.ok(&args)
    };
    run(&["--task", "r", "--collection", "marco", "--output", "r.trec"]);
    run(&[
        "--task",
        "rag",
        "--collection",
        "marco",
        "--output",
        "rag.jsonl",
        "--trec-output",
        "rag.trec",
    ]);
    // AG: the given order and segments; a segment missing from the requests is read from the
    // collection.
    run(&[
        "--task",
        "ag",
        "--ranking",
        s(&fixture("trec_rag/ag_ranking.tsv")),
        "--requests",
        s(&fixture("trec_rag/ag_requests.jsonl")),
        "--collection",
        "marco",
        "--references",
        "3",
        "--output",
        "ag.jsonl",
    ]);
    let err = env.fails(&[
        "run",
        "trec-rag",
        "--year",
        "2024",
        "--topics",
        t,
        "--task",
        "ag",
        "--ranking",
        s(&fixture("trec_rag/ag_ranking.tsv")),
        "--requests",
        s(&fixture("trec_rag/ag_requests.jsonl")),
        "--output",
        "ag-no-text.jsonl",
    ]);
    assert!(
        err.contains("ag_ranking.tsv:10: segment msmarco_v2.1_doc_14_500#1_5001"),
        "{err}"
    );
    assert!(!env.path("ag-no-text.jsonl").exists());

    let parsed = trec_rag::read_topics_tsv(&topics).unwrap();
    let ctx = ValidationContext::default();
    for name in ["rag.jsonl", "ag.jsonl"] {
        let text = env.read(name);
        let report = trec_rag::validate_answers_text(
            &text,
            trec_rag::AnswerFormat::Rag24,
            Some(&parsed),
            &ctx,
        );
        assert!(report.is_clean(), "{name}: {:?}", report.problems);
        golden(&format!("batch/rag24_{name}"), &text);
    }
    let ag: Vec<Value> = env
        .read("ag.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        ag[0]["references"],
        serde_json::json!([
            "msmarco_v2.1_doc_10_100#1_1001",
            "msmarco_v2.1_doc_11_200#0_2000",
            "msmarco_v2.1_doc_10_100#0_1000"
        ])
    );
    let rules = trec_run::RunRules {
        max_per_topic: 100,
        topics: Some(parsed.iter().map(|t| t.id.clone()).collect()),
    };
    for name in ["r.trec", "rag.trec"] {
        let text = env.read(name);
        assert!(trec_run::validate_text(&text, &rules, &ctx).is_clean());
    }
    golden("batch/rag24_r.trec", &env.read("r.trec"));
    // The RAG run's ranking is the same retrieval as the R run (only the tag differs).
    assert_eq!(
        env.read("rag.trec").replace(" rag\n", "\n"),
        env.read("r.trec").replace(" r\n", "\n")
    );
}

#[tokio::test]
async fn trec_rag_2025_formats_from_one_run() {
    let env = Env::new(false).await;
    env.index(
        "marco",
        "msmarco-v2.1-segmented",
        &fixture("trec_rag/segments.jsonl"),
        None,
    );
    let topics = fixture("trec_rag/topics_2025.jsonl");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "trec-rag",
            "--year",
            "2025",
            "--task",
            "rag",
            "--topics",
            s(&topics),
            "--collection",
            "marco",
            "--team-id",
            "convrag-team",
            "--run-name",
            "rag25",
            "--quiet",
        ];
        args.extend(extra);
        env.ok(&args)
    };
    run(&["--output", "f1.jsonl"]);
    // Output options only: the stored turns are written again, nothing is recomputed.
    let second = run(&["--format", "2", "--output", "f2.jsonl"]);
    assert!(
        second.contains("0 computed now, 2 stored before"),
        "{second}"
    );
    run(&["--checker-layout", "--output", "checker.jsonl"]);
    let parsed = trec_rag::read_rag25_topics(&topics).unwrap();
    let ctx = ValidationContext::default();
    for (name, format) in [
        ("f1.jsonl", trec_rag::AnswerFormat::Rag25Format1),
        ("f2.jsonl", trec_rag::AnswerFormat::Rag25Format2),
        ("checker.jsonl", trec_rag::AnswerFormat::Rag25Format1),
    ] {
        let text = env.read(name);
        let report = trec_rag::validate_answers_text(&text, format, Some(&parsed), &ctx);
        assert!(report.is_clean(), "{name}: {:?}", report.problems);
        golden(&format!("batch/rag25_{name}"), &text);
    }
    // Citations are sorted from highest to lowest support (the cited segment's score).
    let f1: Value = serde_json::from_str(env.read("f1.jsonl").lines().next().unwrap()).unwrap();
    for sentence in f1["answer"].as_array().unwrap() {
        let c: Vec<u64> = sentence["citations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert!(c.windows(2).all(|w| w[0] < w[1]), "{c:?}");
    }
    // A setting that changes the turns is refused, naming it.
    let err = env.fails(&[
        "run",
        "trec-rag",
        "--year",
        "2025",
        "--task",
        "rag",
        "--topics",
        s(&topics),
        "--collection",
        "marco",
        "--team-id",
        "convrag-team",
        "--run-name",
        "rag25",
        "--depth",
        "7",
        "--output",
        "f3.jsonl",
    ]);
    assert!(
        err.contains("settings.turn.depth: recorded 100, now 7"),
        "{err}"
    );
    assert!(!env.path("f3.jsonl").exists());
}

#[tokio::test]
async fn qrecc_tira_convention_and_poleval_domains() {
    let env = Env::new(false).await;
    env.index(
        "qrecc-fixture",
        "jsonl",
        &fixture("qrecc/passages.jsonl"),
        None,
    );
    env.index(
        "wiki-trivia",
        "poleval",
        &fixture("poleval/passages_wiki.jl"),
        Some("polish"),
    );
    env.index(
        "legal",
        "poleval",
        &fixture("poleval/passages_legal.jl"),
        Some("polish"),
    );
    let out_dir = env.path("tira-out");
    env.ok(&[
        "run",
        "qrecc",
        s(&fixture("qrecc/run_input")),
        s(&out_dir),
        "--collection",
        "qrecc-fixture",
        "--quiet",
    ]);
    let run = env.read("tira-out/run.json");
    let questions = qrecc::read_questions(&fixture("qrecc/run_input/questions.json")).unwrap();
    let report = qrecc::validate_run_text(&run, Some(&questions), &ValidationContext::default());
    assert!(report.is_clean(), "{:?}", report.problems);
    golden("batch/qrecc_run.json", &run);
    // Follow-up questions are rewritten from the conversation so far.
    let parsed: Value = serde_json::from_str(&run).unwrap();
    assert!(
        parsed[1]["Model_rewrite"]
            .as_str()
            .unwrap()
            .contains("sourdough"),
        "{}",
        parsed[1]
    );

    // PolEval: in.tsv's domains routed to their collections; the fourth question matches no
    // passage, so its line is filled from the collection to keep ten ids.
    std::fs::copy(fixture("poleval/questions.tsv"), env.path("in.tsv")).unwrap();
    env.ok(&[
        "run",
        "poleval",
        "--input",
        "in.tsv",
        "--collection",
        "legal-questions=legal",
        "--quiet",
    ]);
    let out = env.read("out.tsv");
    let qs = poleval::read_questions(&env.path("in.tsv")).unwrap();
    let report = poleval::validate_out_text(&out, Some(&qs), &ValidationContext::default());
    assert!(report.is_clean(), "{:?}", report.problems);
    golden("batch/poleval_out.tsv", &out);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("w-1-0\t"), "{out}");
    assert!(lines[1].starts_with("l-1\t"), "{out}");
    assert!(lines[2].starts_with("w-2-0\t"), "{out}");
    // Filled with the smallest ids, whatever the index's segment layout.
    assert_eq!(
        lines[3],
        "w-1-0\tw-10-0\tw-11-0\tw-12-0\tw-2-0\tw-3-0\tw-4-0\tw-5-0\tw-6-0\tw-7-0"
    );
    let filled: i64 = sqlx::query_scalar(
        "SELECT (diagnostics->>'filled_passages')::bigint FROM turns WHERE external_turn_id = '4'",
    )
    .fetch_one(env.db.store.pool())
    .await
    .unwrap();
    assert_eq!(filled, 10);
}

#[tokio::test]
async fn bad_input_and_options_fail_cleanly() {
    let env = Env::new(false).await;
    env.index(
        "ikat-fixture",
        "ikat-passages",
        &fixture("ikat/passages.jsonl"),
        None,
    );
    let broken = env.path("broken.json");
    std::fs::write(
        &broken,
        "[\n  {\"number\": \"1-1\",\n   \"turns\": [\n    {\"turn_id\": \"x\"}]}\n]\n",
    )
    .unwrap();
    let err = env.fails(&[
        "run",
        "ikat",
        "--topics",
        s(&broken),
        "--collection",
        "ikat-fixture",
        "--output",
        "out.json",
    ]);
    assert!(err.contains("broken.json:4:"), "{err}");
    assert!(!env.path("out.json").exists());

    let topics = fixture("ikat/topics_2023.json");
    let err = env.fails(&[
        "run",
        "ikat",
        "--topics",
        s(&topics),
        "--output",
        "out.json",
    ]);
    assert!(err.contains("--collection: is required"), "{err}");
    let err = env.fails(&[
        "run",
        "ikat",
        "--topics",
        s(&topics),
        "--collection",
        "nope",
        "--output",
        "out.json",
    ]);
    assert!(err.contains("no collection named \"nope\""), "{err}");
    let err = env.fails(&[
        "run",
        "ikat",
        "--topics",
        s(&topics),
        "--collection",
        "ikat-fixture",
        "--stages",
        "ptkb,rewrite,rerank",
        "--output",
        "out.json",
    ]);
    assert!(err.contains("--stages"), "{err}");
    // The LLM rewriter needs an endpoint; none is configured here.
    let err = env.fails(&[
        "run",
        "ikat",
        "--topics",
        s(&topics),
        "--collection",
        "ikat-fixture",
        "--rewriter",
        "llm",
        "--output",
        "out.json",
    ]);
    assert!(
        err.contains("--rewriter: llm needs an LLM endpoint"),
        "{err}"
    );
    assert!(!env.path("out.json").exists());
    let err = env.fails(&[
        "pipeline",
        "rewrite",
        "--topics",
        s(&topics),
        "--llm",
        "--output",
        "rewrites.tsv",
    ]);
    assert!(
        err.contains("--llm: no LLM endpoint is configured"),
        "{err}"
    );
    assert!(!env.path("rewrites.tsv").exists());
    let err = env.fails(&[
        "run",
        "ikat",
        "--topics",
        s(&topics),
        "--collection",
        "ikat-fixture",
        "--passages",
        "1001",
        "--output",
        "out.json",
    ]);
    assert!(
        err.contains("--passages: must be between 1 and 1000"),
        "{err}"
    );
    let err = env.fails(&[
        "run",
        "ikat",
        "--topics",
        s(&topics),
        "--collection",
        "ikat-fixture",
        "--max-words",
        "300",
        "--output",
        "out.json",
    ]);
    assert!(err.contains("--max-words"), "{err}");
    // A ranking naming a passage the collection lacks: file and line.
    let ranking = env.path("given.trec");
    std::fs::write(
        &ranking,
        "1-1_1 Q0 clueweb22-en0001-00-00001:0 1 2 x\n1-1_1 Q0 clueweb22-en9999-00-00001:0 2 1 x\n",
    )
    .unwrap();
    let err = env.fails(&[
        "run",
        "ikat",
        "--topics",
        s(&topics),
        "--collection",
        "ikat-fixture",
        "--run-type",
        "only_response",
        "--ranking",
        s(&ranking),
        "--output",
        "out.json",
    ]);
    assert!(
        err.contains("given.trec:2: passage clueweb22-en9999-00-00001:0 is not in the collection"),
        "{err}"
    );
    assert!(!env.path("out.json").exists());

    // --restart discards the stored run; without it, changed inputs are refused.
    env.ok(&[
        "run",
        "ikat",
        "--topics",
        s(&topics),
        "--stages",
        "ptkb,rewrite",
        "--output",
        "p.json",
        "--quiet",
    ]);
    let fewer = env.path("fewer.json");
    let mut t: Value = serde_json::from_str(&std::fs::read_to_string(&topics).unwrap()).unwrap();
    t.as_array_mut().unwrap().truncate(1);
    std::fs::write(&fewer, t.to_string()).unwrap();
    let args = [
        "run",
        "ikat",
        "--topics",
        s(&fewer),
        "--stages",
        "ptkb,rewrite",
        "--output",
        "p.json",
        "--quiet",
    ];
    let err = env.fails(&args);
    assert!(
        err.contains("input file topics (SHA-256): recorded"),
        "{err}"
    );
    let mut restart = args.to_vec();
    restart.push("--restart");
    env.ok(&restart);
    assert_eq!(env.stored_turns("p").await, 3);
}
