//! Ranking measures against the references: the published iKAT 2024 scores, Anserini's DL19 BM25
//! nDCG@10, and trec_eval's full output (per query and `all`) for DL19, a run derived from the
//! iKAT 2023 qrels and a Cranfield BM25 run (fixtures made by scripts/eval-reference.py).

use crate::eval_common;
use crate::support::{fixture, shared_data};
use eval_common::*;

use std::path::Path;

use convrag::eval::measures::{evaluate, EvalOptions, Measure};
use convrag::eval::trec::{read_qrels, read_run, Run};

/// The measures of the fixtures, in their order (see scripts/eval-reference.py).
fn fixture_measures() -> Vec<Measure> {
    Measure::parse_all(&[
        "ndcg_cut.5,10,20,100,1000",
        "P.5,10,20,100",
        "recall.5,10,100,1000",
        "map",
        "map_cut.10,100,1000",
        "recip_rank",
        "Rprec",
        "success.1,5,10",
        "set_P",
        "set_recall",
        "set_F",
        "num_ret",
        "num_rel",
        "num_rel_ret",
    ])
    .unwrap()
}

fn level(l: i64) -> EvalOptions {
    EvalOptions {
        relevance_level: l,
        average_complete: false,
    }
}

/// Compares convrag's trec_eval text with the reference, line by line (clear failure messages).
fn assert_same_output(ours: &str, reference_file: &str) {
    let reference = std::fs::read_to_string(fixture(reference_file)).unwrap();
    let (a, b): (Vec<&str>, Vec<&str>) = (ours.lines().collect(), reference.lines().collect());
    assert_eq!(a.len(), b.len(), "{reference_file}: line count");
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "{reference_file}: line {}", i + 1);
    }
}

#[test]
fn ikat2024_third_party_run_reproduces_published_scores() {
    let (qrels, run, perf) = (
        shared_data("ikat/qrels/2024-qrels.txt"),
        shared_data("ikat/third_party_run/cfda_gpt4o_splade_rerank_deberta_ikat2024.run.json.gz"),
        shared_data("ikat/third_party_run/cfda_gpt4o_splade_rerank_deberta_ikat2024.perf.json"),
    );
    let q = read_qrels(&qrels).unwrap();
    let r = read_run(&run).unwrap();
    let ndcg = Measure::parse_all(&["ndcg_cut"]).unwrap();
    let e = evaluate(&q, &r, &ndcg, &level(1));
    assert_eq!(e.num_q, 116);
    assert_eq!(e.get("ndcg_cut_10"), Some(0.4155147416985168));
    let recall = Measure::parse_all(&["recall"]).unwrap();
    let e2 = evaluate(&q, &r, &recall, &level(2));
    let r10 = e2.get("recall_10").unwrap();
    assert_eq!(format!("{r10:.11}"), "0.11263672666");
    // Every published nDCG (linear gains) and recall (grade >= 2) value, to the last bit.
    let perf: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(perf).unwrap()).unwrap();
    let mut checked = 0;
    for (name, v) in perf.as_object().unwrap() {
        let ours = if name.starts_with("ndcg_cut_") {
            e.get(name)
        } else if name.starts_with("recall_") {
            e2.get(name)
        } else {
            continue; // mrr_* is the publisher's own measure, not trec_eval's.
        };
        assert_eq!(ours, v.as_f64(), "{name}");
        checked += 1;
    }
    assert_eq!(checked, 18);
}

#[test]
fn dl19_bm25_matches_trec_eval() {
    let (qrels, json) = (
        shared_data("trec-dl-rerank/qrels.dl19-passage.txt"),
        shared_data("trec-dl-rerank/rank_llm_data_bm25_dl19_top100.json.gz"),
    );
    let q = read_qrels(&qrels).unwrap();
    // rank_llm candidate lists, read as a run (scores as given).
    let run = read_run(&json).unwrap();
    assert_eq!(run.len(), 43);
    for l in [1, 2] {
        let e = evaluate(&q, &run, &fixture_measures(), &level(l));
        assert_eq!(format!("{:.4}", e.get("ndcg_cut_10").unwrap()), "0.5058");
        assert_same_output(
            &e.to_trec_text(true),
            &format!("trec_eval/dl19_bm25.l{l}.trec_eval.txt"),
        );
    }
}

/// The iKAT 2023 derived run of scripts/eval-reference.py (`ikat2023_derived_run`).
fn ikat2023_derived_run(qrels: &Path) -> Run {
    let mut run = Run::default();
    for line in std::fs::read_to_string(qrels).unwrap().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 4 {
            continue;
        }
        let b: u64 = f[2].bytes().map(u64::from).sum();
        if !b.is_multiple_of(4) {
            let rel: i64 = f[3].parse().unwrap();
            run.push(
                f[0],
                f[2].to_string(),
                (3 * rel + (b % 7) as i64) as f64 / 2.0,
            );
        }
    }
    let qids: Vec<String> = run.iter().map(|(q, _)| q.to_string()).collect();
    for qid in qids {
        for i in 0..3 {
            run.push(&qid, format!("unjudged-{qid}-{i}"), i as f64);
        }
    }
    run
}

#[test]
fn ikat2023_derived_run_with_ties_matches_trec_eval() {
    let qrels = shared_data("ikat/qrels/2023-qrels.all-turns.txt");
    let q = read_qrels(&qrels).unwrap();
    let run = ikat2023_derived_run(&qrels);
    for l in [1, 2] {
        let e = evaluate(&q, &run, &fixture_measures(), &level(l));
        assert_same_output(
            &e.to_trec_text(true),
            &format!("trec_eval/ikat2023_derived.l{l}.trec_eval.txt"),
        );
    }
}

#[test]
fn cranfield_bm25_matches_trec_eval() {
    let qrels = shared_data("classic-ir/cranfield/QRelsCorrectedforTRECeval");
    let q = read_qrels(&qrels).unwrap();
    let run = read_run(&fixture("trec_eval/cranfield_bm25.run.gz")).unwrap();
    let e = evaluate(&q, &run, &fixture_measures(), &level(1));
    assert_same_output(
        &e.to_trec_text(true),
        "trec_eval/cranfield_bm25.l1.trec_eval.txt",
    );
}

#[test]
fn cli_prints_trec_eval_output_and_json() {
    let qrels = shared_data("classic-ir/cranfield/QRelsCorrectedforTRECeval");
    let mut args = vec![
        "ranking".to_string(),
        "--qrels".into(),
        qrels.display().to_string(),
        "--run".into(),
        fixture("trec_eval/cranfield_bm25.run.gz")
            .display()
            .to_string(),
        "-q".into(),
    ];
    for m in [
        "ndcg_cut.5,10,20,100,1000",
        "P.5,10,20,100",
        "recall.5,10,100,1000",
        "map",
        "map_cut.10,100,1000",
        "recip_rank",
        "Rprec",
        "success.1,5,10",
        "set_P",
        "set_recall",
        "set_F",
        "num_ret",
        "num_rel",
        "num_rel_ret",
    ] {
        args.push("-m".into());
        args.push(m.into());
    }
    let out = convrag_eval(args.clone()).unwrap();
    assert_same_output(&out, "trec_eval/cranfield_bm25.l1.trec_eval.txt");

    args.push("--json".into());
    let v: serde_json::Value = serde_json::from_str(&convrag_eval(args).unwrap()).unwrap();
    assert_eq!(v["all"]["num_q"], 225);
    assert_eq!(v["per_query"].as_object().unwrap().len(), 225);
    assert!(v["per_query"]["1"]["ndcg_cut_10"].is_f64());
}

#[test]
fn cli_reports_file_and_line_of_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let qrels = dir.path().join("qrels.txt");
    let run = dir.path().join("run.txt");
    std::fs::write(&qrels, "1 0 d1 1\n1 0 d2 0\n").unwrap();
    std::fs::write(&run, "1 Q0 d1 1 3.5 t\n1 Q0 d2 2 high t\n").unwrap();
    let err = convrag_eval([
        "ranking".as_ref(),
        "--qrels".as_ref(),
        qrels.as_os_str(),
        "--run".as_ref(),
        run.as_os_str(),
    ] as [&std::ffi::OsStr; 5])
    .unwrap_err();
    assert_eq!(
        err,
        format!(
            "error: {}:2: score `high` is not a finite number",
            run.display()
        )
    );
}
