//! Golden-file tests: every writer renders a small hand-made input (mostly the guidelines' own
//! examples) and the bytes must equal the checked-in file under `tests/golden/formats/`.
//! Regenerate with `CONVRAG_UPDATE_GOLDEN=1 cargo test --test it formats::golden`, then
//! review the diff by hand against the guidelines.

use convrag::formats::ikat::{
    self, IkatResponse, IkatRun, IkatRunTurn, PassageProvenance, RunType,
};
use convrag::formats::poleval;
use convrag::formats::qrecc::{self, QreccAnswer};
use convrag::formats::trec_rag::{
    self, AnswerFormat, Rag24Answer, Rag25Answer, Rag25Metadata, Sentence,
};
use convrag::formats::trec_run::{RankedList, ScoreFormat, TrecRunWriter};
use convrag::formats::ValidationContext;
use serde_json::Value;

use crate::support::{fixture, golden};

fn json(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
}

/// The guidelines' R example (topic 2027497, first five hits) plus a tie and an extra topic.
#[test]
fn trec_run_golden() {
    let lists = vec![
        RankedList {
            topic_id: "2027497".into(),
            hits: vec![
                (
                    "msmarco_v2.1_doc_51_766815931#1_1606876582".into(),
                    0.9996673,
                ),
                (
                    "msmarco_v2.1_doc_51_766815931#2_1606878413".into(),
                    0.99986017,
                ),
                (
                    "msmarco_v2.1_doc_51_766815931#5_1606882767".into(),
                    0.99931216,
                ),
                (
                    "msmarco_v2.1_doc_51_766815931#3_1606879951".into(),
                    0.99862224,
                ),
                (
                    "msmarco_v2.1_doc_51_766815931#6_1606884302".into(),
                    0.99923867,
                ),
                (
                    "msmarco_v2.1_doc_51_766815931#4_1606881348".into(),
                    0.99862224,
                ),
            ],
        },
        RankedList {
            topic_id: "300986".into(),
            hits: vec![
                ("msmarco_v2.1_doc_00_1#0_1".into(), 12.0),
                ("msmarco_v2.1_doc_00_1#1_2".into(), 11.5),
            ],
        },
    ];
    let w = TrecRunWriter::new("rank_zephyr_best", 5);
    golden("formats/trec_run.txt", &w.render(&lists).unwrap());
    let mut fixed = w.clone();
    fixed.score_format = ScoreFormat::Fixed(6);
    golden(
        "formats/trec_run_fixed6.txt",
        &fixed.render(&lists).unwrap(),
    );
    // The writer's output passes its validator and is written atomically.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.txt");
    w.write(&out, &lists).unwrap();
    assert_eq!(
        std::fs::read_to_string(out).unwrap(),
        w.render(&lists).unwrap()
    );
}

/// The 2024 guidelines' AG/RAG example answer; its `response_length` (192) is what the
/// guidelines print.
#[test]
fn rag24_answer_golden() {
    let topics =
        trec_rag::read_topics_tsv(&fixture("trec_rag/topics_2024_numeric_ids.tsv")).unwrap();
    let ex = json("trec_rag/example_input_2024.json");
    let refs: Vec<String> = serde_json::from_value(ex["references"].clone()).unwrap();
    let sentences: Vec<Sentence> = serde_json::from_value(ex["sentences"].clone()).unwrap();
    let a = Rag24Answer::new(ex["run_id"].as_str().unwrap(), &topics[0], refs, sentences);
    assert_eq!(
        a.response_length, 192,
        "the guidelines' example says 192 words"
    );
    let text = trec_rag::render_jsonl(std::slice::from_ref(&a)).unwrap();
    golden("formats/rag24_answer.jsonl", &text);
    let report = trec_rag::validate_answers_text(
        &text,
        AnswerFormat::Rag24,
        Some(&topics[..1]),
        &ValidationContext::default(),
    );
    assert!(report.is_clean(), "{report:?}");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ag.jsonl");
    trec_rag::write_answers(
        &out,
        &[a],
        AnswerFormat::Rag24,
        Some(&topics[..1]),
        &ValidationContext::default(),
    )
    .unwrap();
    assert_eq!(std::fs::read_to_string(out).unwrap(), text);
}

/// The 2025 guidelines' Format 1 and Format 2 examples. Citations are given in reverse with
/// support scores; the writer must restore the guidelines' highest-support-first order.
#[test]
fn rag25_answer_golden() {
    let topics = trec_rag::read_rag25_topics(&fixture("trec_rag/topics_2025.json")).unwrap();
    assert_eq!(topics.len(), 2);
    let ex = json("trec_rag/example_input_2025.json");
    let refs: Vec<String> = serde_json::from_value(ex["references"].clone()).unwrap();
    let sentences: Vec<(String, Vec<(usize, f64)>)> = ex["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let mut cites: Vec<(usize, f64)> =
                serde_json::from_value(s["citations"].clone()).unwrap();
            cites.reverse();
            (s["text"].as_str().unwrap().to_string(), cites)
        })
        .collect();
    let md = Rag25Metadata {
        team_id: "my-awesome-team".into(),
        run_id: "my-awesome-run".into(),
        run_type: "automatic".into(),
    };
    let a = Rag25Answer::new(md, &topics[0], refs, sentences);
    assert_eq!(a.answer[0].citations, vec![0, 8, 15]);
    let f1 = trec_rag::render_jsonl(std::slice::from_ref(&a)).unwrap();
    golden("formats/rag25_format1.jsonl", &f1);
    let f2 = trec_rag::render_jsonl(&[a.to_format2().unwrap()]).unwrap();
    golden("formats/rag25_format2.jsonl", &f2);
    let checker = trec_rag::render_jsonl(&[a.to_checker_layout()]).unwrap();
    golden("formats/rag25_format1_checker_layout.jsonl", &checker);
    let ctx = ValidationContext::default();
    let r3 = trec_rag::validate_answers_text(
        &checker,
        AnswerFormat::Rag25Format1,
        Some(&topics[..1]),
        &ctx,
    );
    assert!(r3.is_clean(), "{r3:?}");
    let r1 =
        trec_rag::validate_answers_text(&f1, AnswerFormat::Rag25Format1, Some(&topics[..1]), &ctx);
    assert!(r1.is_clean(), "{r1:?}");
    let r2 =
        trec_rag::validate_answers_text(&f2, AnswerFormat::Rag25Format2, Some(&topics[..1]), &ctx);
    assert!(r2.is_clean(), "{r2:?}");
}

fn ikat_sample_run(run_type: RunType) -> IkatRun {
    // The guidelines' sample submission (turn 1-2_3), scores and `used` as printed there.
    let text = "The University of British columbia in Vancouver has temperatures near 80 degrees Fahrenheit (27 degrees Celsius) in summer and up to 45 degrees Fahrenheit (about 7 degrees Celsius) in winter which is suitable for you. The university of Toronto is acceptable since has cold winters, average temperatures can drop below -10 \u{b0} C but not below 12 degrees for long. The Concordia university in Montreal is not suitable for you since in the winter, could reach minus 40 with the wind chill. University of Alberta is also not suitable for you. In winter the average temperature varies between -6.5\u{b0}C (20.3\u{b0}F) and -13.5\u{b0}C (7.7\u{b0}F). Simon Fraser university is not acceptable for you. The city which the university is located in will reach temperatures of -14 in the winter.";
    let prov = [
        ("clueweb22-en0000-94-02275:0", 0.6, false),
        ("clueweb22-en0027-06-08704:1", 0.5, true),
        ("clueweb22-en0005-63-12144:0", 0.4, false),
        ("clueweb22-en0013-01-17558:1", 0.38, true),
        ("clueweb22-en0014-39-04143:0", 0.3, false),
    ];
    let only = run_type == RunType::OnlyResponse;
    IkatRun {
        run_name: "sample_run".into(),
        run_type,
        eval_response: if only { None } else { Some(true) },
        turns: vec![IkatRunTurn {
            turn_id: "1-2_3".into(),
            responses: vec![IkatResponse {
                rank: 1,
                text: text.into(),
                ptkb_provenance: vec![1, 2],
                passage_provenance: prov
                    .iter()
                    .map(|(id, s, u)| PassageProvenance {
                        id: id.to_string(),
                        score: if only { None } else { Some(*s) },
                        used: *u,
                    })
                    .collect(),
            }],
        }],
    }
}

#[test]
fn ikat_run_golden() {
    let run = ikat_sample_run(RunType::Automatic);
    let text = run.render().unwrap();
    golden("formats/ikat_run.json", &text);
    golden(
        "formats/ikat_run_only_response.json",
        &ikat_sample_run(RunType::OnlyResponse).render().unwrap(),
    );
    let report = ikat::validate_run_text(&text, None, &ValidationContext::default());
    assert!(report.is_clean(), "{report:?}");
    let dir = tempfile::tempdir().unwrap();
    let trec = dir.path().join("run.trec");
    run.write_trec_run(&trec).unwrap();
    golden(
        "formats/ikat_run.trec",
        &std::fs::read_to_string(&trec).unwrap(),
    );
    // Against the guideline topics, every other turn is missing: the validator says so.
    let topics = ikat::read_topics(&fixture("ikat/topics_guideline.json")).unwrap();
    let report = ikat::validate_run_text(&text, Some(&topics), &ValidationContext::default());
    assert_eq!(report.errors().count(), 5, "{report:?}");
    assert!(report
        .errors()
        .all(|p| p.message.contains("missing from the run")));
}

#[test]
fn qrecc_run_golden() {
    let questions = qrecc::read_questions(&fixture("qrecc/questions.json")).unwrap();
    let answers: Vec<QreccAnswer> = questions
        .iter()
        .enumerate()
        .map(|(i, q)| QreccAnswer {
            conversation_no: q.conversation_no,
            turn_no: q.turn_no,
            model_rewrite: Some(format!("{} (rewritten)", q.question)),
            model_passages: (i != 2).then(|| {
                vec![
                    (
                        format!("http://web.archive.org/web/2020/http://example.org/{i}_p3"),
                        12.5,
                    ),
                    (
                        format!("http://web.archive.org/web/2020/http://example.org/{i}_p0"),
                        3.0,
                    ),
                ]
            }),
            model_answer: Some(format!("Answer {i} \u{2013} caf\u{e9}.")),
        })
        .collect();
    let text = qrecc::render_run(&answers).unwrap();
    golden("formats/qrecc_run.json", &text);
    let report = qrecc::validate_run_text(&text, Some(&questions), &ValidationContext::default());
    assert!(report.is_clean(), "{report:?}");
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = qrecc::tira_paths(&fixture("qrecc"), dir.path());
    assert!(input.ends_with("questions.json"));
    qrecc::write_run(
        &output,
        &answers,
        Some(&questions),
        &ValidationContext::default(),
    )
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("run.json")).unwrap(),
        text
    );
}

#[test]
fn poleval_out_golden() {
    let questions = poleval::read_questions(&fixture("poleval/questions_three_tasks.tsv")).unwrap();
    assert_eq!(questions[1].domain, "legal-questions");
    let rankings: Vec<Vec<String>> = questions
        .iter()
        .map(|q| (0..10).map(|k| format!("{}-{k}", q.line * 100)).collect())
        .collect();
    let text = poleval::render_out(&rankings).unwrap();
    golden("formats/poleval_out.tsv", &text);
    let report = poleval::validate_out_text(&text, Some(&questions), &ValidationContext::default());
    assert!(report.is_clean(), "{report:?}");
    assert!(poleval::render_out(&[vec!["1-0".into(); 9]]).is_err());
}
