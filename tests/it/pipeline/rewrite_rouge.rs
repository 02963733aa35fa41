//! Query rewriting over real conversations (iKAT 2023, CAsT 2019 and 2020), measured with
//! convrag's ROUGE-1 against the manual rewrites; run-type isolation; malformed topics.

use convrag::eval::rewrite::{evaluate_rewrites, read_texts, TextRole};
use convrag::formats::ikat::{read_topics, RunType};
use convrag::formats::topics::read_conversations;
use convrag::pipeline::context::ConversationContext;
use convrag::pipeline::ptkb::default_ranker;
use convrag::pipeline::rewrite::{HistoryRewriter, Rewriter};
use convrag::tune::topics::rewrite_topics;

use crate::support::shared_data;

/// (recall, F1) of the default automatic rewrites of `topics` against `reference`.
fn rouge(topics: &str, reference: &str) -> (f64, f64) {
    let (t, r) = (shared_data(topics), shared_data(reference));
    let convs = read_conversations(&t).unwrap();
    let run = rewrite_topics(
        &convs,
        RunType::Automatic,
        &default_ranker(),
        &HistoryRewriter::default(),
    )
    .unwrap();
    let reference = read_texts(&r, TextRole::ReferenceRewrite).unwrap();
    let report = evaluate_rewrites(&reference, &run, false);
    assert_eq!(report.turns, run.len());
    (report.all.recall, report.all.fmeasure)
}

/// Raw utterances score recall 0.7006 (iKAT 2023 test) / 0.7565 (CAsT 2019) / 0.6573 (CAsT 2020).
/// The default rewriter carries the history terms its learned selector picks (weights fitted by
/// `convrag tune rewrite` on iKAT 2023 train + CAsT 2019 + CAsT 2022 only, see BENCHMARKS.md),
/// with two more slots for words only earlier answers said, written as the phrases they came in,
/// writes out references to a list of the previous answer (numbered items included) and the
/// subject of an accepted offer, and keeps the place the user named: measured recall
/// 0.7525 / 0.8830 / 0.7669, F1 0.7149 / 0.8239 / 0.7445 (the selector's setting is chosen by
/// cross-validated ROUGE-1 F2, which trades precision for recall). CAsT 2019 was fitted on (a
/// regression guard, not a figure); iKAT 2023 test and CAsT 2020 were not. Thresholds sit just
/// under.
#[test]
fn rewrite_quality_stays_above_measured() {
    let (r, f) = rouge(
        "ikat/official/2023_test_topics.json",
        "ikat/official/2023_test_topics.json",
    );
    // 0.752 is above the bar, 0.05 over the raw utterance (0.7006), on a set not tuned on.
    assert!(r > 0.752 && f > 0.714, "iKAT recall {r} F1 {f}");
    let (r, f) = rouge(
        "trec-cast/2019/evaluation_topics_v1.0.json",
        "trec-cast/2019/evaluation_topics_annotated_resolved_v1.0.tsv",
    );
    assert!(r > 0.882 && f > 0.823, "CAsT 2019 recall {r} F1 {f}");
    let (r, f) = rouge(
        "trec-cast/2020/2020_manual_evaluation_topics_v1.0.json",
        "trec-cast/2020/2020_manual_evaluation_topics_v1.0.json",
    );
    // 0.761 is above the bar, 0.05 over the raw utterance (0.6573), on a set not tuned on.
    assert!(r > 0.766 && f > 0.744, "CAsT 2020 recall {r} F1 {f}");
}

#[test]
fn automatic_rewrites_never_read_resolutions_or_later_turns() {
    let path = shared_data("ikat/official/2023_test_topics.json");
    let topics = read_topics(&path).unwrap();
    let rw = HistoryRewriter {
        ptkb_terms: 2,
        response: 0.5,
        ..Default::default()
    };
    let selected = ["I'm vegetarian."];
    for topic in &topics {
        for i in 0..topic.turns.len() {
            let mut dirty = topic.clone();
            for (j, turn) in dirty.turns.iter_mut().enumerate() {
                turn.resolved_utterance = Some("garbage resolution words".into());
                turn.ptkb_provenance = vec!["3".into()];
                if j >= i {
                    turn.response = Some("garbage response words".into());
                }
                if j > i {
                    turn.utterance = "garbage later utterance".into();
                }
            }
            let a = ConversationContext::from_ikat(topic, i, RunType::Automatic).unwrap();
            let b = ConversationContext::from_ikat(&dirty, i, RunType::Automatic).unwrap();
            assert_eq!(
                rw.rewrite(&a, &selected).unwrap(),
                rw.rewrite(&b, &selected).unwrap()
            );
        }
    }
}

#[test]
fn history_changes_the_rewrite_of_a_real_elliptic_turn() {
    let path = shared_data("trec-cast/2019/evaluation_topics_v1.0.json");
    let convs = read_conversations(&path).unwrap();
    // 31_2 "Is it treatable?" after "What is throat cancer?".
    let t = convs.iter().find(|t| t.number == "31").unwrap();
    let ctx = ConversationContext::from_ikat(t, 1, RunType::Automatic).unwrap();
    assert_eq!(ctx.utterance, "Is it treatable?");
    let r = HistoryRewriter::default().rewrite(&ctx, &[]).unwrap();
    assert_eq!(r.text, "Is throat cancer treatable?");
}

#[test]
fn malformed_cast_topics_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cast.json");
    std::fs::write(
        &p,
        "[\n {\"number\": 1,\n  \"turn\": [\n   {\"number\": 1, \"raw_utterance\": \"a\"},\n   {\"number\": 2}\n  ]}\n]\n",
    )
    .unwrap();
    let e = read_conversations(&p).unwrap_err().to_string();
    assert!(e.contains("cast.json:5:"), "{e}");
    assert!(e.contains("raw_utterance"), "{e}");
    std::fs::write(&p, "[{\"number\": 1, \"turn\": 3}]").unwrap();
    let e = read_conversations(&p).unwrap_err().to_string();
    assert!(e.contains("cast.json:1:"), "{e}");
    std::fs::write(&p, "[{\"number\": ").unwrap();
    let e = read_conversations(&p).unwrap_err().to_string();
    assert!(e.contains("cast.json:1"), "{e}");
}
