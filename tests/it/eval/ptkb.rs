//! PTKB evaluation on the real iKAT 2023 judgments.

use crate::eval_common;
use crate::support::{fixture, shared_data};
use eval_common::*;

use std::path::Path;

use convrag::eval::ptkb::{default_measures, evaluate_ptkb, ptkb_qrels_from_topics, read_ptkb_run};
use convrag::eval::trec::read_qrels;

#[test]
fn topics_provenance_equals_organizers_qrels() {
    let (topics, org) = (
        shared_data("ikat/official/2023_test_topics.json"),
        shared_data("ikat/qrels/2023_ptkb_qrels_org.txt"),
    );
    let from_topics = ptkb_qrels_from_topics(&topics).unwrap();
    let org = read_qrels(&org).unwrap();
    assert_eq!(from_topics.len(), 112);
    assert_eq!(from_topics, org);
}

#[test]
fn overlap_run_matches_trec_eval_on_nist_qrels() {
    let nist = shared_data("ikat/qrels/2023_ptkb_qrels_nist.txt");
    let qrels = read_qrels(&nist).unwrap();
    let run = read_ptkb_run(&fixture("ikat/ptkb_overlap_run.json")).unwrap();
    let report = evaluate_ptkb(&qrels, &run, &default_measures());
    assert_eq!(report.evaluation.num_q, 98);
    let json = report.to_json();
    let reference =
        std::fs::read_to_string(fixture("trec_eval/ptkb_overlap.nist.trec_eval.txt")).unwrap();
    let mut checked = 0;
    for line in reference.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let (name, qid, value) = (f[0].trim(), f[1], f[2]);
        if name == "num_q" {
            assert_eq!(value, "98");
        } else if qid == "all" {
            let ours = json["all"][name].as_f64().unwrap();
            assert_eq!(format!("{ours:.4}"), value, "{name}");
        } else {
            // Per-turn values at full precision.
            let ours = json["per_query"][qid][name].as_f64().unwrap();
            assert_eq!(ours, value.parse::<f64>().unwrap(), "{name} {qid}");
        }
        checked += 1;
    }
    assert!(checked > 500, "{checked}");
    assert!(report.micro.selected > 0 && report.micro.precision() > 0.0);
}

#[test]
fn ptkb_cli_with_topics_and_qrels() {
    let (topics, org) = (
        shared_data("ikat/official/2023_test_topics.json"),
        shared_data("ikat/qrels/2023_ptkb_qrels_org.txt"),
    );
    let run = |judg: &str, path: &Path| {
        let run = fixture("ikat/ptkb_overlap_run.json");
        convrag_eval([
            "ptkb".as_ref(),
            judg.as_ref(),
            path.as_os_str(),
            "--run".as_ref(),
            run.as_os_str(),
        ] as [&std::ffi::OsStr; 5])
        .unwrap()
    };
    let a = run("--topics", &topics);
    let b = run("--qrels", &org);
    assert_eq!(a, b);
    assert!(a.contains("num_q                 \tall\t112\n"), "{a}");
    assert!(a.contains("micro_set_F"), "{a}");
    // A broken run names its file and line.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("run.json");
    std::fs::write(&bad, "{\"run_name\": \"x\", \"turns\": [\n{\"turn_id\": \"9-1_1\", \"responses\": [{\"ptkb_provenance\": [1.5]}]}]}").unwrap();
    let err = convrag_eval([
        "ptkb".as_ref(),
        "--topics".as_ref(),
        topics.as_os_str(),
        "--run".as_ref(),
        bad.as_os_str(),
    ] as [&std::ffi::OsStr; 5])
    .unwrap_err();
    assert!(
        err.starts_with(&format!("error: {}:2: ", bad.display())),
        "{err}"
    );
}
