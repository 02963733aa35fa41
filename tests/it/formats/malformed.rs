//! Every reader and validator fed malformed input: the error names the file and the line.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::fixture;
use convrag::formats::trec_rag::{self, AnswerFormat};
use convrag::formats::trec_run::{self, RunRules};
use convrag::formats::{ikat, poleval, qrecc, FormatError, ValidationContext};

struct Tmp {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn file(name: &str, content: &str) -> Tmp {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    Tmp { _dir: dir, path }
}

/// The error is a parse error for `path` at `line`, and its message says so.
fn assert_at(err: FormatError, path: &Path, line: usize, contains: &str) {
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("{}:{line}: ", path.display())),
        "{msg}"
    );
    assert!(msg.contains(contains), "{msg}");
    assert!(matches!(err, FormatError::Parse { line: l, .. } if l == line));
}

#[test]
fn topics_tsv_reader() {
    let t = file("topics.tsv", "1\tfirst\n2 no tab here\n");
    assert_at(
        trec_rag::read_topics_tsv(&t.path).unwrap_err(),
        &t.path,
        2,
        "topic_id<TAB>text",
    );
    let t = file("topics.tsv", "1\tfirst\r\n1\tagain\r\n");
    assert_at(
        trec_rag::read_topics_tsv(&t.path).unwrap_err(),
        &t.path,
        2,
        "duplicate",
    );
    let t = file("topics.tsv", "1\tok\n\u{0}\u{ff}");
    std::fs::write(&t.path, b"1\tok\n2\t\xff\n").unwrap();
    assert_at(
        trec_rag::read_topics_tsv(&t.path).unwrap_err(),
        &t.path,
        2,
        "UTF-8",
    );
}

#[test]
fn rag25_topics_reader() {
    let t = file(
        "t.jsonl",
        "{\"id\": \"1\", \"title\": \"a\"}\n{\"id\": \"2\", \"title\": }\n",
    );
    assert_at(
        trec_rag::read_rag25_topics(&t.path).unwrap_err(),
        &t.path,
        2,
        "column",
    );
    let t = file(
        "t.jsonl",
        "{\"id\": \"1\", \"title\": \"a\"}\n\n{\"id\": [2], \"title\": \"b\"}\n",
    );
    assert_at(
        trec_rag::read_rag25_topics(&t.path).unwrap_err(),
        &t.path,
        3,
        "id",
    );
    let t = file(
        "t.json",
        "[\n  {\"id\": \"1\", \"narrative\": \"a\"},\n  {\"id\": \"2\"}\n]\n",
    );
    assert_at(
        trec_rag::read_rag25_topics(&t.path).unwrap_err(),
        &t.path,
        3,
        "topic #2",
    );
    let t = file(
        "t.json",
        "[\n  {\"id\": \"1\", \"narrative\": \"a\"},\n  {\"id\": \"2\" \"narrative\": \"b\"}\n]\n",
    );
    assert_at(
        trec_rag::read_rag25_topics(&t.path).unwrap_err(),
        &t.path,
        3,
        "column",
    );
    // A JSON array as in the guidelines, with an integer id, is fine.
    let t = file("t.json", "[{\"id\": 7, \"narrative\": \"n\"}]");
    assert_eq!(trec_rag::read_rag25_topics(&t.path).unwrap()[0].id, "7");
}

#[test]
fn rerank_request_reader() {
    let good = r#"{"query": {"qid": "1", "text": "q"}, "candidates": [{"docid": "d", "score": 1.5, "doc": {"segment": "s"}}]}"#;
    let alt = r#"{"query": {"id": 2, "text": "q"}, "candidates": []}"#;
    let bad =
        r#"{"query": {"qid": "3", "text": "q"}, "candidates": [{"docid": "d", "score": "high"}]}"#;
    let t = file("req.jsonl", &format!("{good}\n{alt}\n{bad}\n"));
    let err = trec_rag::read_rerank_requests(&t.path).unwrap_err();
    assert_at(err, &t.path, 3, "candidates[0].score");
    let t = file("req.jsonl", &format!("{good}\n{alt}\n"));
    let reqs = trec_rag::read_rerank_requests(&t.path).unwrap();
    assert_eq!(
        (reqs[0].query.id.as_str(), reqs[1].query.id.as_str()),
        ("1", "2")
    );
    assert_eq!(reqs[1].line, 2);
}

#[test]
fn trec_run_reader() {
    let t = file("run.txt", "1 Q0 a 1 2.0 t\n1 Q0 b 2 t\n");
    assert_at(
        trec_run::read_run(&t.path).unwrap_err(),
        &t.path,
        2,
        "6 whitespace-separated columns",
    );
    let t = file("run.txt", "1 Q0 a 1 2.0 t\n1 Q0 b 2 NaN t\n");
    assert_at(
        trec_run::read_run(&t.path).unwrap_err(),
        &t.path,
        2,
        "finite",
    );
}

#[test]
fn ikat_topics_reader() {
    let t = file("ikat.json", "[\n {\"number\": \"1-1\", \"ptkb\": {}, \"turns\": [\n  {\"turn_id\": 1, \"utterance\": \"u\"},\n  {\"turn_id\": \"2\", \"utterance\": \"v\"}\n ]}\n]\n");
    assert_at(
        ikat::read_topics(&t.path).unwrap_err(),
        &t.path,
        4,
        "turn_id",
    );
    let t = file(
        "ikat.json",
        "[\n {\"number\": \"1-1\",\n  \"turns\": [}\n]\n",
    );
    assert_at(
        ikat::read_topics(&t.path).unwrap_err(),
        &t.path,
        3,
        "invalid JSON",
    );
    let t = file("ikat.json", "[\n {\"number\": 1.5, \"turns\": []}\n]\n");
    assert_at(
        ikat::read_topics(&t.path).unwrap_err(),
        &t.path,
        2,
        "number",
    );
    // 2024 (integer numbers) and 2025 (PTKB list, `responses`) layouts read into the same model.
    let t24 = ikat::read_topics(&fixture("ikat/layout_2024.json")).unwrap();
    assert_eq!(t24[0].turn_key(&t24[0].turns[1]), "0_2");
    assert_eq!(
        t24[0].ptkb.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(),
        ["1", "2", "10"]
    );
    assert_eq!(t24[0].turns[1].ptkb_provenance, ["2"]);
    let t25 = ikat::read_topics(&fixture("ikat/layout_2025.json")).unwrap();
    assert_eq!(t25[0].turn_key(&t25[0].turns[1]), "1-1_2");
    assert_eq!(t25[0].turns[1].ptkb_provenance, ["2"]);
    assert_eq!(t25[0].turns[1].utterance, "How about the fruits I like?");
    assert_eq!(
        t25[0].turns[1].response_provenance,
        ["clueweb22-en0026-73-16809:6"]
    );
}

#[test]
fn qrecc_questions_reader() {
    let t = file("questions.json", "[\n  {\"Conversation_no\": 1, \"Turn_no\": 1, \"Question\": \"a\"},\n  {\"Conversation_no\": 1, \"Turn_no\": \"2\", \"Question\": \"b\"}\n]\n");
    assert_at(
        qrecc::read_questions(&t.path).unwrap_err(),
        &t.path,
        3,
        "Turn_no",
    );
    let t = file("questions.json", "[\n  {\"Conversation_no\": 1, \"Turn_no\": 1, \"Question\": \"a\"},\n  {\"Conversation_no\": 1, \"Turn_no\": 1, \"Question\": \"b\"}\n]\n");
    assert_at(
        qrecc::read_questions(&t.path).unwrap_err(),
        &t.path,
        3,
        "duplicate",
    );
    let qs = qrecc::read_questions(&fixture("qrecc/questions.json")).unwrap();
    assert_eq!(qs.len(), 3);
    assert_eq!(qs[2].key(), "2775_1");
}

#[test]
fn poleval_reader() {
    let t = file("in.tsv", "wiki-trivia\tq1\n legal-questions\tq2\nno tab\n");
    assert_at(
        poleval::read_questions(&t.path).unwrap_err(),
        &t.path,
        3,
        "<domain><TAB><question>",
    );
    let t = file("in.tsv", "wiki-trivia\tq1\n\nwiki-trivia\tq3\n");
    assert_at(
        poleval::read_questions(&t.path).unwrap_err(),
        &t.path,
        2,
        "<domain>",
    );
}

fn lines_of(report: &convrag::formats::Report) -> Vec<(usize, String)> {
    report
        .problems
        .iter()
        .map(|p| (p.line, p.message.clone()))
        .collect()
}

fn has(report: &convrag::formats::Report, line: usize, contains: &str) -> bool {
    report
        .problems
        .iter()
        .any(|p| p.line == line && p.message.contains(contains))
}

#[test]
fn rag24_validator() {
    let topics =
        trec_rag::read_topics_tsv(&fixture("trec_rag/topics_2024_numeric_ids.tsv")).unwrap();
    let r = |refs: &str, answer: &str, len: usize, topic: &str| {
        format!(
            r#"{{"run_id": "r", "topic_id": "{topic}", "topic": "how many years in jail for money laundering", "references": [{refs}], "response_length": {len}, "answer": [{answer}]}}"#
        )
    };
    let seg = "\"msmarco_v2.1_doc_00_1#0_2\"";
    let text = [
        r(
            seg,
            r#"{"text": "Ten years.", "citations": [0]}"#,
            2,
            "300986",
        ),
        "{not json".to_string(),
        r(
            seg,
            r#"{"text": "Ten years.", "citations": [1]}"#,
            2,
            "835760",
        ),
        r(
            &format!("{seg}, {seg}, \"doc9\""),
            r#"{"text": "Ten  years.", "citations": ["0"]}"#,
            3,
            "999",
        ),
        r(&vec![seg; 21].join(", "), r#"{"text": "x"}"#, 1, "300986"),
    ]
    .join("\n");
    let ctx = ValidationContext::default();
    let rep = trec_rag::validate_answers_text(&text, AnswerFormat::Rag24, Some(&topics), &ctx);
    assert!(
        rep.problems.iter().all(|p| p.line != 1),
        "{:?}",
        lines_of(&rep)
    );
    assert!(has(&rep, 2, "invalid JSON"));
    assert!(has(&rep, 3, "does not match the official text"));
    assert!(has(&rep, 3, "outside references"));
    assert!(has(&rep, 4, "unknown topic"));
    assert!(has(&rep, 4, "duplicate"));
    assert!(has(&rep, 4, "not an MS MARCO v2.1 segment id"));
    assert!(has(&rep, 4, "must be integers"));
    assert!(has(
        &rep,
        4,
        "response_length 3 differs from the word count 2"
    ));
    assert!(has(&rep, 5, "21 references"));
    assert!(has(&rep, 5, "second answer for topic \"300986\""));
    assert!(has(&rep, 5, "citations is missing"));
    assert!(has(&rep, 0, "no answer for topic \"2027497\""));
    // A 401-word answer breaks the 400-word limit.
    let long = format!(
        r#"{{"text": "{}", "citations": []}}"#,
        vec!["w"; 401].join(" ")
    );
    let rep = trec_rag::validate_answers_text(
        &r(seg, &long, 401, "300986"),
        AnswerFormat::Rag24,
        None,
        &ctx,
    );
    assert!(has(&rep, 1, "401 words"));
    // Ids outside a given collection.
    let ctx = ValidationContext {
        collection_ids: Some(["x".to_string()].into()),
    };
    let rep =
        trec_rag::validate_answers_text(&r(seg, "", 0, "300986"), AnswerFormat::Rag24, None, &ctx);
    assert!(has(&rep, 1, "not in the collection"));
}

#[test]
fn rag25_validator() {
    let topics = trec_rag::read_rag25_topics(&fixture("trec_rag/topics_2025.json")).unwrap();
    let line1 = r#"{"metadata": {"team_id": "t", "run_id": "r", "type": "automatic"}, "narrative_id": "1", "narrative": "wrong", "references": ["msmarco_v2.1_doc_00_1#0_2"], "response_length": 1, "answer": [{"text": "x", "citations": [3]}]}"#;
    let line2 = r#"{"metadata": {"team_id": "t2", "run_id": "r", "type": "semi", "narrative_id": 2}, "references": [], "answer": []}"#;
    let rep = trec_rag::validate_answers_text(
        &format!("{line1}\n{line2}\n"),
        AnswerFormat::Rag25Format1,
        Some(&topics),
        &ValidationContext::default(),
    );
    assert!(has(&rep, 1, "does not match the official text"));
    assert!(has(&rep, 1, "outside references"));
    assert!(has(&rep, 2, "team_id"));
    assert!(has(&rep, 2, "metadata.type"));
    assert!(has(&rep, 2, "missing `narrative`"), "{:?}", lines_of(&rep));
    // Format 2: citations are ids.
    let f2 = r#"{"metadata": {"team_id": "t", "run_id": "r", "type": "manual"}, "narrative_id": "1", "response_length": 1, "answer": [{"text": "x", "citations": [0]}]}"#;
    let rep = trec_rag::validate_answers_text(
        f2,
        AnswerFormat::Rag25Format2,
        None,
        &ValidationContext::default(),
    );
    assert!(has(&rep, 1, "must be segment ids"));
}

#[test]
fn trec_run_validator_with_topics_and_ids() {
    let text = "1 Q0 a 1 2.0 t\n2 Q0 b 1 1.0 t\n1 Q0 c 2 1.0 t\n";
    let rules = RunRules {
        max_per_topic: 100,
        topics: Some(vec!["1".into(), "3".into()]),
    };
    let ctx = ValidationContext {
        collection_ids: Some(["a".to_string(), "b".to_string()].into()),
    };
    let rep = trec_run::validate_text(text, &rules, &ctx);
    assert!(has(&rep, 2, "unknown topic"));
    assert!(has(&rep, 3, "not contiguous"));
    assert!(has(&rep, 3, "not in the collection"));
    assert!(has(&rep, 0, "no results for topic \"3\""));
}

#[test]
fn ikat_validator() {
    let topics = ikat::read_topics(&fixture("ikat/topics_guideline.json")).unwrap();
    let text = r#"{
  "run_name": "", "run_type": "automatic", "extra": 1,
  "turns": [
    {"turn_id": "1-1_1", "responses": [{"rank": 1, "text": "ok", "ptkb_provenance": [12],
      "passage_provenance": [{"id": "clueweb22-en0000-94-02275:0", "score": 0.5, "used": false},
                             {"id": "bad-id", "score": 0.9, "used": "yes"}]}]},
    {"turn_id": "1-1_1", "responses": [{"rank": 1, "text": "ok", "passage_provenance": []}]},
    {"turn_id": "7-1_9", "responses": []},
    {"turn_id": "1-1", "responses": [{"rank": 0, "text": "ok", "ptkb_provenance": [], "passage_provenance": [{"id": "clueweb22-en0000-94-02275:0", "used": true}]}]}
  ]
}"#;
    let rep = ikat::validate_run_text(text, Some(&topics), &ValidationContext::default());
    assert!(has(&rep, 1, "`run_name` is empty"), "{:?}", lines_of(&rep));
    assert!(has(&rep, 1, "unknown field `extra`"));
    assert!(has(&rep, 1, "missing `eval_response`"));
    assert!(has(&rep, 4, "PTKB id 12 outside 1..=11"));
    assert!(has(&rep, 4, "higher than the previous"));
    assert!(has(&rep, 4, "`used` must be true or false"));
    assert!(has(&rep, 4, "not `clueweb22-...:<passage>`"));
    assert!(has(&rep, 7, "appears twice"));
    assert!(has(&rep, 7, "missing `ptkb_provenance`"));
    assert!(has(&rep, 7, "no passage provenance"));
    assert!(has(&rep, 8, "not in the topics"));
    assert!(has(&rep, 9, "not `<topic number>_<turn number>`"));
    assert!(has(&rep, 9, "missing `score`"));
    assert!(has(&rep, 0, "\"1-2_3\" of the topics is missing"));
    // Over 250 words (spaCy whitespace tokens: the double space counts).
    let long = format!(
        r#"{{"run_name": "r", "run_type": "only_response", "turns": [{{"turn_id": "1-1_1", "responses": [{{"rank": 1, "text": "{}  end", "ptkb_provenance": [], "passage_provenance": [{{"id": "clueweb22-en0000-94-02275:0", "used": true}}]}}]}}]}}"#,
        vec!["w"; 249].join(" ")
    );
    let rep = ikat::validate_run_text(&long, None, &ValidationContext::default());
    assert!(has(&rep, 1, "251 words"), "{:?}", lines_of(&rep));
    let rep = ikat::validate_run_text(
        "{\"run_name\": \"r\",\n \"turns\": [}",
        None,
        &ValidationContext::default(),
    );
    assert!(has(&rep, 2, "invalid JSON"));
}

#[test]
fn qrecc_validator() {
    let qs = qrecc::read_questions(&fixture("qrecc/questions.json")).unwrap();
    let text = "[\n {\"Conversation_no\": 1, \"Turn_no\": 1, \"Model_passages\": [\"p\"]},\n {\"Conversation_no\": 1, \"Turn_no\": 1, \"Model_answer\": 3},\n {\"Conversation_no\": 9, \"Turn_no\": \"1\"},\n {\"Conversation_no\": 9, \"Turn_no\": 1}\n]";
    let rep = qrecc::validate_run_text(text, Some(&qs), &ValidationContext::default());
    assert!(has(&rep, 2, "Model_passages"), "{:?}", lines_of(&rep));
    assert!(has(&rep, 3, "appears twice"));
    assert!(has(&rep, 3, "Model_answer"));
    assert!(has(&rep, 4, "Turn_no"));
    assert!(has(&rep, 5, "not among the questions"));
    assert!(has(&rep, 0, "no answer for turn 1_2"));
}

#[test]
fn poleval_validator() {
    let qs = poleval::read_questions(&fixture("poleval/questions_three_tasks.tsv")).unwrap();
    let ten = |p: &str| {
        (0..10)
            .map(|k| format!("{p}{k}"))
            .collect::<Vec<_>>()
            .join("\t")
    };
    let text = format!(
        "{}\n{}\ta\n{}\n",
        ten("a"),
        ten("b"),
        ten("c").replacen("c1", "c0", 1)
    );
    let rep = poleval::validate_out_text(&text, Some(&qs[..2]), &ValidationContext::default());
    assert!(
        has(&rep, 2, "11 tab-separated columns"),
        "{:?}",
        lines_of(&rep)
    );
    assert!(has(&rep, 3, "appears twice"));
    assert!(has(&rep, 3, "in.tsv has 2 questions"));
}

#[test]
fn cli_prints_file_line_and_fails() {
    let bin = env!("CARGO_BIN_EXE_convrag");
    let t = file("run.txt", "1 Q0 a 1 1.0 t\n1 Q0 b 2 2.0 t\n");
    let out = Command::new(bin)
        .args(["validate", "trec-run"])
        .arg(&t.path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with(&format!("{}:2: error: ", t.path.display())),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("error: ") && stderr.contains("1 error(s)"),
        "{stderr}"
    );
    // A reader error of the --topics file names that file and line.
    let topics = file("topics.tsv", "1\tok\nbroken\n");
    let out = Command::new(bin)
        .args(["validate", "trec-run"])
        .arg(&t.path)
        .arg("--topics")
        .arg(&topics.path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("error: {}:2: ", topics.path.display())),
        "{stderr}"
    );
    // A clean file exits 0.
    let ok = file("ok.txt", "1 Q0 a 1 2.0 t\n1 Q0 b 2 1.0 t\n");
    let out = Command::new(bin)
        .args(["validate", "trec-run"])
        .arg(&ok.path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn validate_entry_point_reports_file_and_line() {
    use convrag::formats::check::{check_file, FileCheck, FormatName};
    let t = file("run.txt", "1 Q0 a 1 1.0 t\n1 Q0 b 2 2.0 t\n");
    let ids = file("ids.txt", "a\nb\n");
    let args = FileCheck {
        format: FormatName::TrecRun,
        file: t.path.clone(),
        topics: None,
        collection_ids: Some(ids.path.clone()),
        max_per_topic: None,
    };
    let shown = check_file(&args)
        .unwrap()
        .sorted()
        .display(&t.path)
        .to_string();
    assert_eq!(
        shown,
        format!(
            "{}:2: error: score 2.0 is higher than the previous score 1 of topic \"1\" (scores must be non-increasing)\n",
            t.path.display()
        )
    );
}
