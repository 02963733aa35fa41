//! ROUGE-1 and the Porter stemmer against rouge-score 0.1.2 and NLTK (fixtures made by
//! scripts/eval-reference.py from real rewrite pairs).

use crate::eval_common;
use crate::support::{fixture, shared_data};
use eval_common::*;

use std::collections::HashMap;

use convrag::eval::rewrite::{evaluate_rewrites, read_texts, TextRole};
use convrag::eval::rouge::rouge1;
use convrag::text::porter_nltk::stem;

fn fixture_text(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

#[test]
fn porter_matches_nltk_on_real_words() {
    let table = fixture_text("rouge/porter_nltk.tsv");
    let mut n = 0;
    let mut wrong = Vec::new();
    for line in table.lines() {
        let (w, s) = line.split_once('\t').unwrap();
        if stem(w) != s {
            wrong.push(format!("{w}: ours {} nltk {s}", stem(w)));
        }
        n += 1;
    }
    assert!(n > 3000, "{n} words");
    assert!(
        wrong.is_empty(),
        "{} of {n} differ: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(20)]
    );
}

/// (source, id) → [p, r, f, stem p, stem r, stem f] from rouge-score.
fn reference_scores() -> HashMap<(String, String), Vec<f64>> {
    fixture_text("rouge/rouge1_pairs.tsv")
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let v = f[2..].iter().map(|x| x.parse::<f64>().unwrap()).collect();
            ((f[0].to_string(), f[1].to_string()), v)
        })
        .collect()
}

#[test]
fn rouge1_equals_rouge_score_on_real_rewrites() {
    let sources = [
        (
            "cast2019",
            "trec-cast/2019/evaluation_topics_annotated_resolved_v1.0.tsv",
            "trec-cast/2019/evaluation_topics_v1.0.json",
        ),
        (
            "cast2020",
            "trec-cast/2020/2020_manual_evaluation_topics_v1.0.json",
            "trec-cast/2020/2020_manual_evaluation_topics_v1.0.json",
        ),
        (
            "ikat2023",
            "ikat/official/2023_test_topics.json",
            "ikat/official/2023_test_topics.json",
        ),
    ];
    let expected = reference_scores();
    let mut checked = 0;
    for (name, reference, raw) in sources {
        let (reference, raw) = (shared_data(reference), shared_data(raw));
        let refs = read_texts(&reference, TextRole::ReferenceRewrite).unwrap();
        let raws: HashMap<String, String> = read_texts(&raw, TextRole::RunRewrite)
            .unwrap()
            .into_iter()
            .collect();
        for (id, target) in &refs {
            let Some(pred) = raws.get(id) else { continue };
            let want = &expected[&(name.to_string(), id.clone())];
            let a = rouge1(target, pred, false);
            let s = rouge1(target, pred, true);
            let got = [
                a.precision,
                a.recall,
                a.fmeasure,
                s.precision,
                s.recall,
                s.fmeasure,
            ];
            assert_eq!(&got[..], &want[..], "{name} {id}");
            checked += 1;
        }
    }
    assert_eq!(checked, expected.len());
    assert_eq!(checked, 479 + 216 + 332);
}

#[test]
fn rewrite_cli_raw_baseline_on_ikat2023() {
    let topics = shared_data("ikat/official/2023_test_topics.json");
    let expected = reference_scores();
    let refs = read_texts(&topics, TextRole::ReferenceRewrite).unwrap();
    let mut sum = 0.0;
    for (id, _) in &refs {
        sum += expected[&("ikat2023".to_string(), id.clone())][4];
    }
    let mean_stemmed_recall = sum / refs.len() as f64;
    let report = evaluate_rewrites(
        &refs,
        &read_texts(&topics, TextRole::RunRewrite).unwrap(),
        true,
    );
    assert_eq!(report.all.recall, mean_stemmed_recall);
    let out = convrag_eval([
        "rewrite".as_ref(),
        "--stem".as_ref(),
        "--json".as_ref(),
        "--reference".as_ref(),
        topics.as_os_str(),
        "--run".as_ref(),
        topics.as_os_str(),
    ] as [&std::ffi::OsStr; 7])
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["all"]["rouge1_recall"].as_f64(),
        Some(mean_stemmed_recall)
    );
    assert_eq!(v["all"]["num_q"], 332);
    eprintln!(
        "iKAT 2023 raw utterance vs resolved: ROUGE-1 recall (stemmed) {mean_stemmed_recall:.4}"
    );
}
