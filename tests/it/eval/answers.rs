//! Answer measures on real data: SQuAD F1/EM on SCAI-QReCC answers, TREC RAG 2024 answer
//! statistics, PolEval NDCG@10 of the sample submissions (references by scripts/eval-reference.py).

use crate::eval_common;
use crate::support::{fixture, shared_data};
use eval_common::*;

use convrag::eval::answers::{answer_stats_file, exact_match, f1};
use convrag::eval::poleval::evaluate_poleval;

/// RFC 4180 records (quoted fields may hold commas, quotes and newlines).
fn csv_records(text: &str) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let (mut rec, mut field) = (Vec::new(), String::new());
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => rec.push(std::mem::take(&mut field)),
            (false, '\r') => {}
            (false, '\n') => {
                rec.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut rec));
            }
            (false, c) => field.push(c),
        }
    }
    if !field.is_empty() || !rec.is_empty() {
        rec.push(field);
        records.push(rec);
    }
    records
}

#[test]
fn squad_f1_em_equal_reference_script_on_scai_answers() {
    let csv = shared_data("qrecc-scai/scai_official/batch1.csv");
    let records = csv_records(&std::fs::read_to_string(csv).unwrap());
    let header = &records[0];
    let gt = header.iter().position(|h| h == "gt").unwrap();
    let pred = header.iter().position(|h| h == "predicted").unwrap();
    let reference = std::fs::read_to_string(fixture("qrecc/squad_batch1.tsv")).unwrap();
    let expected: Vec<(f64, f64)> = reference
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[1].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect();
    assert_eq!(records.len() - 1, expected.len());
    for (i, (rec, (want_f1, want_em))) in records[1..].iter().zip(&expected).enumerate() {
        assert_eq!(f1(&rec[pred], &rec[gt]), *want_f1, "row {}", i + 1);
        assert_eq!(exact_match(&rec[pred], &rec[gt]), *want_em, "row {}", i + 1);
    }
}

#[test]
fn rag24_baseline_answer_statistics() {
    let answers = shared_data("trec-rag/rag24/ragnarok_baseline_rag24.test_gpt-4o_top20.jsonl.gz");
    let r = answer_stats_file(&answers).unwrap();
    let want: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("trec_rag/gpt4o_stats_2024.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(r.answers as u64, want["answers"].as_u64().unwrap());
    assert_eq!(r.mean_words, want["mean_words"].as_f64().unwrap());
    assert_eq!(r.mean_sentences, want["mean_sentences"].as_f64().unwrap());
    assert_eq!(
        r.cited_sentence_share,
        want["cited_sentence_share"].as_f64().unwrap()
    );
    assert_eq!(
        r.citations_outside_references as u64,
        want["citations_outside_references"].as_u64().unwrap()
    );
    assert_eq!(
        r.length_mismatches as u64,
        want["length_mismatches"].as_u64().unwrap()
    );
    let text = convrag_eval(
        ["answers".as_ref(), "--rag".as_ref(), answers.as_os_str()] as [&std::ffi::OsStr; 3]
    )
    .unwrap();
    assert!(
        text.contains("answers               \tall\t301\n"),
        "{text}"
    );
}

#[test]
fn poleval_sample_submissions() {
    let dir = shared_data("poleval2022-passage-retrieval");
    let reference = std::fs::read_to_string(fixture("poleval/dev0_samples.tsv")).unwrap();
    for line in reference.lines() {
        let (sub, want) = line.split_once('\t').unwrap();
        let want: f64 = want.parse().unwrap();
        let out = dir.join("sample_submissions").join(sub);
        let r = evaluate_poleval(
            &dir.join("dev-0/expected.tsv"),
            &out,
            Some(&dir.join("dev-0/in.tsv")),
        )
        .unwrap();
        assert_eq!(r.per_line.len(), 599);
        assert_eq!(r.ndcg10, want, "{sub}");
        let (expected, input) = (dir.join("dev-0/expected.tsv"), dir.join("dev-0/in.tsv"));
        let text = convrag_eval([
            "poleval".as_ref(),
            "--expected".as_ref(),
            expected.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
            "--in".as_ref(),
            input.as_os_str(),
        ] as [&std::ffi::OsStr; 7])
        .unwrap();
        assert!(
            text.contains(&format!("NDCG@10               \tall\t{want:.4}\n")),
            "{text}"
        );
    }
    // test-A's in.tsv (lines start with a space) has 1200 lines: a dev-0 output does not fit.
    let e = evaluate_poleval(
        &dir.join("dev-0/expected.tsv"),
        &dir.join("sample_submissions/submission-00405.dev-0.out.tsv"),
        Some(&dir.join("test-A/in.tsv")),
    )
    .unwrap_err();
    assert!(e.to_string().contains("1200 lines"), "{e}");
}

#[test]
fn squad_cli_on_scai_ground_truth_sample_and_gpt3_run() {
    let (truth, gpt3) = (
        shared_data("qrecc-scai/scai_official/ground-truth.sample.json"),
        shared_data("qrecc-scai/scai_official/gpt3_run.json.gz"),
    );
    let out = convrag_eval([
        "answers".as_ref(),
        "--reference".as_ref(),
        truth.as_os_str(),
        "--run".as_ref(),
        gpt3.as_os_str(),
        "--json".as_ref(),
    ] as [&std::ffi::OsStr; 6])
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let reference = std::fs::read_to_string(fixture("qrecc/squad_scai_sample.tsv")).unwrap();
    let mut sum = 0.0;
    let mut n = 0;
    for line in reference.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        let want_f1: f64 = f[1].parse().unwrap();
        assert_eq!(
            v["per_query"][f[0]]["F1"].as_f64(),
            Some(want_f1),
            "{}",
            f[0]
        );
        assert_eq!(
            v["per_query"][f[0]]["EM"].as_f64(),
            Some(f[2].parse().unwrap())
        );
        sum += want_f1;
        n += 1;
    }
    assert_eq!(v["all"]["num_q"], n);
    assert_eq!(v["all"]["F1"].as_f64(), Some(sum / n as f64));
}
