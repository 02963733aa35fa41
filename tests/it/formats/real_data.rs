//! Round trips over the real public data in `../shared/data` (its absence fails the tests).

use std::collections::BTreeSet;

use convrag::formats::trec_rag::{self, AnswerFormat, Rag24Answer};
use convrag::formats::trec_run::{self, RunRules, ScoreFormat, TrecRunWriter};
use convrag::formats::{ikat, poleval, qrecc, ValidationContext};

use crate::support::shared_data;

#[test]
fn rag24_topics() {
    for (file, n) in [
        ("trec-rag/rag24/topics.rag24.test.txt", 301),
        ("trec-rag/rag24/topics.rag24.researchy-dev.txt", 600),
        ("trec-rag/rag24/topics.rag24.raggy-dev.txt", 120),
    ] {
        let p = shared_data(file);
        let topics = trec_rag::read_topics_tsv(&p).unwrap();
        assert_eq!(topics.len(), n, "{file}");
        // CRLF line ends are not part of the text.
        assert!(topics.iter().all(|t| !t.text.ends_with('\r')));
    }
    let p = shared_data("trec-rag/rag24/topics.rag24.test.txt");
    let topics = trec_rag::read_topics_tsv(&p).unwrap();
    assert_eq!(topics[0].id, "2024-145979");
    assert_eq!(
        topics[0].text,
        "what is vicarious trauma and how can it be coped with?"
    );
}

#[test]
fn rag25_topics_in_every_published_layout() {
    let p = shared_data("trec-rag/rag25/topics.rag25.test.jsonl");
    let topics = trec_rag::read_rag25_topics(&p).unwrap();
    assert_eq!(topics.len(), 105);
    assert_eq!(topics[0].id, "464");
    assert!(topics[0]
        .text
        .starts_with("I want a thorough understanding of what makes up a community"));
    let dev = shared_data("trec-rag/rag25/rag25-topics-dev.tsv");
    let dev = trec_rag::read_rag25_topics(&dev).unwrap();
    assert_eq!(dev.len(), 22);
    assert_eq!(dev[0].id, "14");
}

#[test]
fn rag24_researchy_dev_reranker_requests() {
    for file in [
        "trec-rag/rag24/ragnarok_data_bm25_rag24.researchy-dev_small_top100.jsonl.gz",
        "trec-rag/rag24/ragnarok_data_rankzephyrrho_rag24.researchy-dev_small_top100.jsonl.gz",
    ] {
        let p = shared_data(file);
        let reqs = trec_rag::read_rerank_requests(&p).unwrap();
        assert_eq!(reqs.len(), 10, "{file}");
        for r in &reqs {
            assert_eq!(r.candidates.len(), 100);
            assert!(!r.query.id.is_empty() && !r.query.text.is_empty());
            for c in &r.candidates {
                let doc = c.doc.as_ref().expect("segment fields");
                assert!(c.docid.starts_with("msmarco_v2.1_doc_"));
                assert!(!doc.segment.is_empty() && !doc.url.is_empty());
                assert!(doc.start_char.is_some() && doc.end_char.is_some());
            }
        }
        let q: BTreeSet<&str> = reqs.iter().map(|r| r.query.id.as_str()).collect();
        assert!(q.contains("230274"));
    }
}

#[test]
fn rag24_bm25_run_reads_validates_and_rewrites() {
    let p =
        shared_data("trec-rag/rag24/run.msmarco-v2.1-doc-segmented.bm25.rag24.raggy-dev.txt.gz");
    let tp = shared_data("trec-rag/rag24/topics.rag24.raggy-dev.txt");
    let text = convrag::formats::read_text(&p).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("run.txt");
    std::fs::write(&plain, &text).unwrap();
    let lines = trec_run::read_run(&plain).unwrap();
    assert_eq!(lines.len(), 12_000);
    let lists = trec_run::group_by_topic(&lines);
    assert_eq!(lists.len(), 120);
    let topics: Vec<String> = trec_rag::read_topics_tsv(&tp)
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    let rules = RunRules {
        max_per_topic: 100,
        topics: Some(topics),
    };
    let report = trec_run::validate_text(&text, &rules, &ValidationContext::default());
    assert!(
        report.is_clean(),
        "{:?}",
        &report.problems[..report.problems.len().min(5)]
    );
    // Re-written with Anserini's %.6f: the same (topic, docid, score) lines; only the order of
    // tied hits may change (Anserini puts ties in ascending docid order, trec_eval descending).
    let mut w = TrecRunWriter::new("Anserini", 100);
    w.score_format = ScoreFormat::Fixed(6);
    let out = w.render(&lists).unwrap();
    let key = |t: &str| -> BTreeSet<(String, String, String)> {
        t.lines()
            .map(|l| {
                let c: Vec<&str> = l.split(' ').collect();
                (c[0].to_string(), c[2].to_string(), c[4].to_string())
            })
            .collect()
    };
    assert_eq!(key(&out), key(&text));
    let report = trec_run::validate_text(&out, &rules, &ValidationContext::default());
    assert!(report.is_clean());
}

#[test]
fn gpt4o_baseline_answers_validate_and_rewrite_byte_for_byte() {
    let p = shared_data("trec-rag/rag24/ragnarok_baseline_rag24.test_gpt-4o_top20.jsonl.gz");
    let tp = shared_data("trec-rag/rag24/topics.rag24.test.txt");
    let topics = trec_rag::read_topics_tsv(&tp).unwrap();
    let report = trec_rag::validate_answers_file(
        &p,
        AnswerFormat::Rag24,
        Some(&topics),
        &ValidationContext::default(),
    )
    .unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let text = convrag::formats::read_text(&p).unwrap();
    let answers: Vec<Rag24Answer> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), 301);
    // Our writer reproduces the organizers' file exactly, and our word count its response_length.
    assert_eq!(trec_rag::render_jsonl(&answers).unwrap(), text);
    for a in &answers {
        let rebuilt = Rag24Answer::new(
            &a.run_id,
            topics.iter().find(|t| t.id == a.topic_id).unwrap(),
            a.references.clone(),
            a.answer.clone(),
        );
        assert_eq!(&rebuilt, a);
    }
}

#[test]
fn ikat_2023_topics() {
    for (file, entries, turns) in [
        ("ikat/official/2023_train_topics.json", 11, 95),
        ("ikat/official/2023_test_topics.json", 25, 332),
    ] {
        let p = shared_data(file);
        let topics = ikat::read_topics(&p).unwrap();
        assert_eq!(topics.len(), entries, "{file}");
        assert_eq!(
            topics.iter().map(|t| t.turns.len()).sum::<usize>(),
            turns,
            "{file}"
        );
    }
    let p = shared_data("ikat/official/2023_test_topics.json");
    let topics = ikat::read_topics(&p).unwrap();
    assert_eq!(topics[0].number, "9-1");
    assert_eq!(topics[0].ptkb[0].0, "1");
    assert_eq!(
        topics
            .iter()
            .flat_map(|t| &t.turns)
            .filter(|t| !t.ptkb_provenance.is_empty())
            .count(),
        112
    );
    // Every judged turn id of the PTKB qrels is a turn key of the topics.
    let q = shared_data("ikat/qrels/2023_ptkb_qrels_org.txt");
    let keys: BTreeSet<String> = topics
        .iter()
        .flat_map(|t| t.turns.iter().map(|u| t.turn_key(u)))
        .collect();
    let qrels = std::fs::read_to_string(q).unwrap();
    for l in qrels.lines() {
        let turn = l.split_whitespace().next().unwrap();
        assert!(keys.contains(turn), "{turn}");
    }
    // A run covering every turn passes the validator against the topics.
    let run = ikat::IkatRun {
        run_name: "r".into(),
        run_type: ikat::RunType::Automatic,
        eval_response: Some(false),
        turns: keys
            .iter()
            .map(|k| ikat::IkatRunTurn {
                turn_id: k.clone(),
                responses: vec![ikat::IkatResponse {
                    rank: 1,
                    text: String::new(),
                    ptkb_provenance: vec![1],
                    passage_provenance: vec![ikat::PassageProvenance {
                        id: "clueweb22-en0000-00-00000:0".into(),
                        score: Some(1.0),
                        used: true,
                    }],
                }],
            })
            .collect(),
    };
    let report = ikat::validate_run_text(
        &run.render().unwrap(),
        Some(&topics),
        &ValidationContext::default(),
    );
    assert!(report.is_clean(), "{:?}", report.problems);
}

#[test]
fn poleval_inputs_and_sample_submissions() {
    let dev = shared_data("poleval2022-passage-retrieval/dev-0/in.tsv");
    let dev = poleval::read_questions(&dev).unwrap();
    assert_eq!(dev.len(), 599);
    assert!(dev.iter().all(|q| q.domain == "wiki-trivia"));
    let test = shared_data("poleval2022-passage-retrieval/test-A/in.tsv");
    let test = poleval::read_questions(&test).unwrap();
    assert_eq!(test.len(), 1200);
    for d in ["wiki-trivia", "legal-questions", "allegro-faq"] {
        assert_eq!(test.iter().filter(|q| q.domain == d).count(), 400, "{d}");
    }
    for s in [
        "submission-00405.dev-0.out.tsv",
        "submission-00407.dev-0.out.tsv",
    ] {
        let p = shared_data(&format!(
            "poleval2022-passage-retrieval/sample_submissions/{s}"
        ));
        let report =
            poleval::validate_out_file(&p, Some(&dev), &ValidationContext::default()).unwrap();
        assert!(report.is_clean(), "{s}: {:?}", report.problems);
        // Misaligned against test-A.
        let report =
            poleval::validate_out_file(&p, Some(&test), &ValidationContext::default()).unwrap();
        assert!(report.has_errors());
    }
}

#[test]
fn scai_samples() {
    let p = shared_data("qrecc-scai/scai_official/run.sample.json");
    let report = qrecc::validate_run_file(&p, None, &ValidationContext::default()).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let g = shared_data("qrecc-scai/scai_official/gpt3_run.json.gz");
    let report = qrecc::validate_run_file(&g, None, &ValidationContext::default()).unwrap();
    assert!(
        report.is_clean(),
        "{:?}",
        &report.problems[..report.problems.len().min(5)]
    );
    // Re-rendering the GPT-3 run keeps every record (Python's indent=4 layout aside).
    let text = convrag::formats::read_text(&g).unwrap();
    let v: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(v.len(), 16_451);
    let answers: Vec<qrecc::QreccAnswer> = v
        .iter()
        .map(|r| qrecc::QreccAnswer {
            conversation_no: r["Conversation_no"].as_u64().unwrap(),
            turn_no: r["Turn_no"].as_u64().unwrap(),
            model_rewrite: None,
            model_passages: None,
            model_answer: r["Model_answer"].as_str().map(str::to_string),
        })
        .collect();
    let rendered = qrecc::render_run(&answers).unwrap();
    let back: Vec<serde_json::Value> = serde_json::from_str(&rendered).unwrap();
    assert_eq!(back, v);
}
