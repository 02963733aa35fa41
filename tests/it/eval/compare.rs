//! `convrag eval compare`, `compare-ptkb`, `compare-rewrite`: the command line, the JSON, the
//! HTML page, per-topic values equal to `convrag eval ...`, and bad input. The p-values themselves
//! are checked against SciPy by scripts/compare-scipy.sh (scripts/test.sh runs it).

use crate::eval_common;
use crate::support::{fixture, golden, shared_data};
use eval_common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn convrag(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_convrag"))
        .arg("eval")
        .args(args)
        .env("RUST_LOG", "off")
        .output()
        .unwrap()
}

fn os<S: AsRef<std::ffi::OsStr> + ?Sized>(s: &S) -> &std::ffi::OsStr {
    s.as_ref()
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn failed(o: &Output) -> String {
    assert!(!o.status.success(), "expected failure");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

const QRELS: &str = "t1 0 a 1\nt1 0 b 0\nt2 0 c 2\nt2 0 x 0\nt3 0 d 1\nt3 0 e 1\nt4 0 f 1\n";

/// Three small runs: A finds most, B reorders and misses t4, C equals A but for t3.
fn small_runs(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let qrels = dir.join("qrels.txt");
    std::fs::write(&qrels, QRELS).unwrap();
    let runs = [
        ("a.trec", "t1 Q0 a 1 3 A\nt1 Q0 b 2 2 A\nt2 Q0 c 1 3 A\nt3 Q0 z 1 3 A\nt3 Q0 d 2 2 A\nt4 Q0 f 1 1 A\n"),
        ("b.trec", "t1 Q0 b 1 3 B\nt1 Q0 a 2 2 B\nt2 Q0 x 1 3 B\nt2 Q0 c 2 2 B\nt3 Q0 d 1 3 B\nt3 Q0 e 2 2 B\nt9 Q0 f 1 1 B\n"),
        ("c.trec", "t1 Q0 a 1 3 C\nt2 Q0 c 1 3 C\nt3 Q0 d 1 3 C\nt4 Q0 f 1 1 C\n"),
    ];
    let paths = runs
        .iter()
        .map(|(n, text)| {
            let p = dir.join(n);
            std::fs::write(&p, text).unwrap();
            p
        })
        .collect();
    (qrels, paths)
}

#[test]
fn three_runs_text_json_and_html() {
    let dir = tempfile::tempdir().unwrap();
    let (qrels, runs) = small_runs(dir.path());
    let json = dir.path().join("cmp.json");
    let html = dir.path().join("cmp.html");
    fn cli<'a>(
        qrels: &'a Path,
        runs: &'a [PathBuf],
        json: &'a Path,
        html: &'a Path,
    ) -> Vec<&'a std::ffi::OsStr> {
        let mut v: Vec<&std::ffi::OsStr> = vec![os("compare"), os("--qrels"), qrels.as_os_str()];
        for r in runs {
            v.extend([os("--run"), r.as_os_str()]);
        }
        v.extend([os("-m"), os("recip_rank"), os("-m"), os("ndcg_cut.10")]);
        v.extend([
            os("--json"),
            json.as_os_str(),
            os("--html"),
            html.as_os_str(),
        ]);
        v
    }
    let text = ok(&convrag(&cli(&qrels, &runs, &json, &html)));
    let v = read_json(&json);
    assert_eq!(v["kind"], "ranking");
    assert_eq!(v["topics"], serde_json::json!(["t1", "t2", "t3", "t4"]));
    assert_eq!(v["runs"][1]["missing_topics"], 1);
    assert_eq!(v["randomization"]["permutations"], 10000);
    assert_eq!(v["randomization"]["seed"], 42);
    let rr = &v["measures"][0];
    assert_eq!(rr["measure"], "recip_rank");
    let a = runs[0].display().to_string();
    let b = runs[1].display().to_string();
    // Reciprocal ranks: A 1, 1, 0.5, 1; B 0.5, 0.5, 1, 0 (t4 missing).
    assert_eq!(rr["means"][&a], 0.875);
    assert_eq!(rr["means"][&b], 0.5);
    assert_eq!(rr["per_topic"][&b]["t4"], 0.0);
    assert_eq!(rr["pairs"].as_array().unwrap().len(), 3);
    let ab = &rr["pairs"][0];
    assert_eq!((ab["a"].as_str(), ab["b"].as_str()), (Some(&*a), Some(&*b)));
    assert_eq!(ab["mean_delta"], -0.375);
    assert_eq!(
        ab["deltas"],
        serde_json::json!({"t1": -0.5, "t2": -0.5, "t3": 0.5, "t4": -1.0})
    );
    assert_eq!(
        (
            ab["wins"].as_u64(),
            ab["ties"].as_u64(),
            ab["losses"].as_u64()
        ),
        (Some(1), Some(0), Some(3))
    );
    assert_eq!(
        ab["largest"][0],
        serde_json::json!({"topic": "t4", "delta": -1.0})
    );
    // Four non-zero differences: all 16 sign assignments are enumerated.
    assert_eq!(ab["randomization_exact"], true);
    assert_eq!(ab["randomization_permutations"], 16);
    for key in [
        "t_test_p",
        "t_test_p_holm",
        "randomization_p",
        "randomization_p_holm",
        "t_statistic",
    ] {
        assert!(ab[key].as_f64().is_some(), "{key}: {ab}");
    }
    // Holm over three pairs: the corrected value is never below the raw one.
    for p in rr["pairs"].as_array().unwrap() {
        assert!(p["t_test_p_holm"].as_f64() >= p["t_test_p"].as_f64());
        assert!(p["randomization_p_holm"].as_f64() >= p["randomization_p"].as_f64());
    }
    // The text table: means, one line per pair and measure, the largest differences.
    assert!(text.contains("3 runs (ranking), 4 topics"), "{text}");
    assert!(
        text.contains("recip_rank             0.8750   0.5000"),
        "{text}"
    );
    assert!(
        text.contains("recip_rank           B − A     -0.3750"),
        "{text}"
    );
    assert!(text.contains("t4 -1.0000"), "{text}");
    // The page: self-contained, one bar plot per pair and measure, one box plot per measure.
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert_eq!(page.matches("<svg").count(), 2 * (1 + 3));
    assert!(!page.contains("<script") && !page.contains("src=") && !page.contains("href="));
    // Same seed, same output.
    let json2 = dir.path().join("cmp2.json");
    ok(&convrag(&cli(&qrels, &runs, &json2, &html)));
    assert_eq!(
        std::fs::read_to_string(&json).unwrap(),
        std::fs::read_to_string(&json2).unwrap()
    );
}

#[test]
fn per_topic_values_are_those_of_eval_ranking_c() {
    let (qrels, bm25) = (
        shared_data("trec-dl-rerank/qrels.dl19-passage.txt"),
        shared_data("trec-dl-rerank/rank_llm_data_bm25_dl19_top100.json.gz"),
    );
    // A deterministic re-ordering of BM25 (scores negated), without its first query.
    let dir = tempfile::tempdir().unwrap();
    let run = convrag::eval::trec::read_run(&bm25).unwrap();
    let mut lines = String::new();
    for (qid, docs) in run.iter().skip(1) {
        for (i, (d, s)) in docs.iter().enumerate() {
            lines.push_str(&format!("{qid} Q0 {d} {} {} rev\n", i + 1, -s));
        }
    }
    let reversed = dir.path().join("reversed.trec");
    std::fs::write(&reversed, lines).unwrap();
    let json = dir.path().join("cmp.json");
    let measures = ["-m", "ndcg_cut.10", "-m", "recall.100", "-m", "map"];
    let mut args = vec![
        os("compare"),
        os("--qrels"),
        qrels.as_os_str(),
        os("-l"),
        os("2"),
    ];
    args.extend([
        os("--run"),
        bm25.as_os_str(),
        os("--run"),
        reversed.as_os_str(),
    ]);
    args.extend(measures.iter().map(os));
    args.extend([os("--json"), json.as_os_str()]);
    ok(&convrag(&args));
    let cmp = read_json(&json);
    assert_eq!(cmp["topics"].as_array().unwrap().len(), 43);
    let name = reversed.display().to_string();
    let mut eval_args = vec![
        os("ranking"),
        os("--qrels"),
        qrels.as_os_str(),
        os("-l"),
        os("2"),
    ];
    eval_args.extend([os("--run"), reversed.as_os_str(), os("-c"), os("--json")]);
    eval_args.extend(measures.iter().map(os));
    let eval: Value = serde_json::from_str(&convrag_eval(eval_args).unwrap()).unwrap();
    let missing = run.iter().next().unwrap().0;
    for (mi, m) in ["ndcg_cut_10", "recall_100", "map"].iter().enumerate() {
        let c = &cmp["measures"][mi];
        assert_eq!(c["measure"], *m);
        assert_eq!(c["means"][&name], eval["all"][*m], "{m}");
        for (qid, v) in c["per_topic"][&name].as_object().unwrap() {
            if qid == missing {
                assert_eq!(v.as_f64(), Some(0.0));
            } else {
                assert_eq!(v, &eval["per_query"][qid][*m], "{m} {qid}");
            }
        }
        let pair = &c["pairs"][0];
        assert!(pair["mean_delta"].as_f64().unwrap() < 0.0, "{m}");
        // Enumerated exactly when the non-zero differences have at most 10,000 sign assignments
        // (recall@100 of a reversed top 100 differs only on the missing query).
        let nonzero = pair["deltas"]
            .as_object()
            .unwrap()
            .values()
            .filter(|d| d.as_f64() != Some(0.0))
            .count();
        assert_eq!(pair["randomization_exact"], nonzero <= 13, "{m}");
    }
}

#[test]
fn ptkb_and_rewrite_comparisons_use_their_evaluators() {
    let (nist, topics) = (
        shared_data("ikat/qrels/2023_ptkb_qrels_nist.txt"),
        shared_data("ikat/official/2023_test_topics.json"),
    );
    let dir = tempfile::tempdir().unwrap();
    // PTKB: the overlap run of the eval fixtures against the same run cut to its first statement.
    let overlap = fixture("ikat/ptkb_overlap_run.json");
    let run = convrag::eval::ptkb::read_ptkb_run(&overlap).unwrap();
    let mut first = String::new();
    for (qid, docs) in run.iter() {
        if let Some((d, _)) = docs.first() {
            first.push_str(&format!("{qid} Q0 {d} 1 1 first\n"));
        }
    }
    let first_path = dir.path().join("first.trec");
    std::fs::write(&first_path, first).unwrap();
    let json = dir.path().join("ptkb.json");
    let mut args = vec![os("compare-ptkb"), os("--qrels"), nist.as_os_str()];
    args.extend([
        os("--run"),
        overlap.as_os_str(),
        os("--run"),
        first_path.as_os_str(),
    ]);
    args.extend([
        os("-m"),
        os("P.1"),
        os("-m"),
        os("set_F"),
        os("--json"),
        json.as_os_str(),
    ]);
    let text = ok(&convrag(&args));
    assert!(text.contains("2 runs (ptkb), 98 topics"), "{text}");
    let cmp = read_json(&json);
    let eval: Value = serde_json::from_str(
        &convrag_eval([
            os("ptkb"),
            os("--qrels"),
            nist.as_os_str(),
            os("--run"),
            overlap.as_os_str(),
            os("-m"),
            os("P.1"),
            os("-m"),
            os("set_F"),
            os("--json"),
        ])
        .unwrap(),
    )
    .unwrap();
    let name = overlap.display().to_string();
    for (mi, m) in ["P_1", "set_F"].iter().enumerate() {
        let c = &cmp["measures"][mi];
        assert_eq!(c["means"][&name], eval["all"][*m]);
        for (qid, v) in eval["per_query"].as_object().unwrap() {
            assert_eq!(c["per_topic"][&name][qid], v[*m], "{m} {qid}");
        }
    }
    // Same first statement: precision at 1 never differs.
    assert_eq!(cmp["measures"][0]["pairs"][0]["ties"], 98);
    assert_eq!(cmp["measures"][0]["pairs"][0]["t_test_p"], Value::Null);
    assert_eq!(cmp["measures"][0]["pairs"][0]["randomization_p"], 1.0);

    // Rewrites: raw utterances (the topics file as run) against the resolved ones.
    let all: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&topics).unwrap()).unwrap();
    let mut tsv = String::new();
    for t in &all {
        for turn in t["turns"].as_array().unwrap() {
            let id = format!("{}_{}", t["number"].as_str().unwrap(), turn["turn_id"]);
            tsv.push_str(&format!(
                "{id}\t{}\n",
                turn["resolved_utterance"].as_str().unwrap()
            ));
        }
    }
    let resolved = dir.path().join("resolved.tsv");
    std::fs::write(&resolved, tsv).unwrap();
    let json = dir.path().join("rw.json");
    let mut args = vec![os("compare-rewrite"), os("--reference"), topics.as_os_str()];
    args.extend([
        os("--run"),
        topics.as_os_str(),
        os("--run"),
        resolved.as_os_str(),
    ]);
    args.extend([
        os("-m"),
        os("rouge1_recall"),
        os("--json"),
        json.as_os_str(),
    ]);
    ok(&convrag(&args));
    let cmp = read_json(&json);
    assert_eq!(cmp["topics"].as_array().unwrap().len(), 332);
    let eval: Value = serde_json::from_str(
        &convrag_eval([
            os("rewrite"),
            os("--reference"),
            topics.as_os_str(),
            os("--run"),
            resolved.as_os_str(),
            os("--json"),
        ])
        .unwrap(),
    )
    .unwrap();
    let c = &cmp["measures"][0];
    let name = resolved.display().to_string();
    assert_eq!(c["means"][&name], eval["all"]["rouge1_recall"]);
    for (qid, v) in eval["per_query"].as_object().unwrap() {
        assert_eq!(c["per_topic"][&name][qid], v["rouge1_recall"], "{qid}");
    }
    let pair = &c["pairs"][0];
    assert!(pair["mean_delta"].as_f64().unwrap() > 0.0);
    assert_eq!(
        pair["losses"], 0,
        "a resolved utterance recalls all of itself: {pair}"
    );
}

#[test]
fn html_escapes_names_and_topics_from_input_files() {
    let dir = tempfile::tempdir().unwrap();
    let qrels = dir.path().join("q.txt");
    std::fs::write(&qrels, "<img>&1 0 d1 1\n\"q2\" 0 d2 1\n").unwrap();
    let a = dir.path().join("<b>run&a.trec");
    let b = dir.path().join("run'b\".trec");
    std::fs::write(&a, "<img>&1 Q0 d1 1 1 x\n\"q2\" Q0 zz 1 1 x\n").unwrap();
    std::fs::write(&b, "<img>&1 Q0 zz 1 1 x\n\"q2\" Q0 d2 1 1 x\n").unwrap();
    let html = dir.path().join("page.html");
    let args = [
        os("compare"),
        os("--qrels"),
        qrels.as_os_str(),
        os("--run"),
        a.as_os_str(),
        os("--run"),
        b.as_os_str(),
        os("-m"),
        os("P.1"),
        os("--html"),
        html.as_os_str(),
    ];
    ok(&convrag(&args));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        !page.contains("<img>") && !page.contains("<b>run"),
        "{page}"
    );
    assert!(page.contains("&lt;img&gt;&amp;1"), "{page}");
    assert!(page.contains("&lt;b&gt;run&amp;a.trec"));
    assert!(page.contains("run&#39;b&quot;.trec"));
    assert!(page.contains("&quot;q2&quot;"));
    // Written atomically: nothing else in the directory.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 4, "{names:?}");
}

#[test]
fn bad_input_names_file_line_or_field() {
    let dir = tempfile::tempdir().unwrap();
    let (qrels, runs) = small_runs(dir.path());
    let json = dir.path().join("never.json");
    let base = |extra: &[&std::ffi::OsStr]| {
        let mut v = vec![os("compare"), os("--qrels"), qrels.as_os_str()];
        v.extend_from_slice(extra);
        v.extend([os("--json"), json.as_os_str()]);
        convrag(&v)
    };
    let (r0, r1) = (runs[0].as_os_str(), runs[1].as_os_str());
    let e = failed(&base(&[
        os("--run"),
        r0,
        os("--run"),
        r1,
        os("-m"),
        os("ndcg_cutt.10"),
    ]));
    assert!(e.contains("unknown measure `ndcg_cutt.10`"), "{e}");
    let e = failed(&base(&[
        os("--run"),
        r0,
        os("--run"),
        r1,
        os("-m"),
        os("num_ret"),
    ]));
    assert!(e.contains("`num_ret` is a count"), "{e}");
    let e = failed(&base(&[os("--run"), r0]));
    assert!(e.contains("at least two runs"), "{e}");
    let e = failed(&base(&[os("--run"), r0, os("--run"), r0]));
    assert!(e.contains("is given twice"), "{e}");
    let e = failed(&base(&[
        os("--run"),
        r0,
        os("--run"),
        r1,
        os("--permutations"),
        os("0"),
    ]));
    assert!(e.contains("--permutations"), "{e}");
    let bad = dir.path().join("bad.trec");
    std::fs::write(&bad, "t1 Q0 a 1 3 X\nt1 Q0 b 2 high X\n").unwrap();
    let e = failed(&base(&[os("--run"), r0, os("--run"), bad.as_os_str()]));
    assert!(
        e.contains(&format!("{}:2: score `high`", bad.display())),
        "{e}"
    );
    let e = failed(&convrag(&[
        os("compare-rewrite"),
        os("--reference"),
        qrels.as_os_str(),
        os("--run"),
        r0,
        os("--run"),
        r1,
        os("-m"),
        os("rouge2"),
    ]));
    assert!(e.contains("unknown measure `rouge2`"), "{e}");
    assert!(!json.exists(), "no output after an error");
}

/// The three output formats of the small three-run comparison, byte for byte (regenerate with
/// `CONVRAG_UPDATE_GOLDEN=1 cargo test --test it eval::compare` and review the diff).
#[test]
fn small_comparison_matches_golden_files() {
    let dir = tempfile::tempdir().unwrap();
    small_runs(dir.path());
    let o = Command::new(env!("CARGO_BIN_EXE_convrag"))
        .args(["eval", "compare", "--qrels", "qrels.txt"])
        .args(["--run", "a.trec", "--run", "b.trec", "--run", "c.trec"])
        .args(["-m", "recip_rank", "-m", "ndcg_cut.10", "-m", "P.2"])
        .args(["--top", "2", "--json", "out.json", "--html", "out.html"])
        .current_dir(dir.path())
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    let text = ok(&o);
    golden("eval/compare_small.txt", &text);
    let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap();
    golden("eval/compare_small.json", &read("out.json"));
    golden("eval/compare_small.html", &read("out.html"));
}
