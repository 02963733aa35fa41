//! PTKB ranking over the real iKAT 2023 test topics, measured with convrag's evaluator against
//! the NIST and organizers' PTKB qrels; run-type isolation; degenerate inputs.

use convrag::eval::ptkb::{default_measures, evaluate_ptkb, read_ptkb_judgments};
use convrag::eval::trec::Run;
use convrag::formats::ikat::{read_topics, IkatTopic, RunType};
use convrag::formats::topics::read_conversations;
use convrag::pipeline::context::ConversationContext;
use convrag::pipeline::ptkb::{default_ranker, PtkbRanker, PtkbRanking};
use convrag::tune::topics::{ptkb_run, rank_topics, ProvenanceList};

use crate::support::shared_data;

fn as_run(rankings: &[(String, PtkbRanking)], selected_only: bool) -> Run {
    Run::from_rankings(rankings.iter().map(|(k, r)| {
        let ids = r
            .statements
            .iter()
            .filter(|s| !selected_only || s.selected)
            .map(|s| s.id.clone())
            .collect::<Vec<_>>();
        (k.clone(), ids)
    }))
}

fn measure(qrels: &str, rankings: &[(String, PtkbRanking)], selected: bool, m: &str) -> f64 {
    let qrels = read_ptkb_judgments(&shared_data(qrels)).unwrap();
    let report = evaluate_ptkb(&qrels, &as_run(rankings, selected), &default_measures());
    report.evaluation.get(m).unwrap()
}

/// Measured (scripts/measure-pipeline-stages.sh): automatic NIST nDCG@3 0.6302, MRR 0.7320, selected set_F
/// 0.4895; org nDCG@3 0.4680. Manual NIST nDCG@3 0.6709, org 0.5326. Thresholds sit just under.
#[test]
fn ranking_quality_on_ikat_2023_stays_above_measured() {
    let topics = read_topics(&shared_data("ikat/official/2023_test_topics.json")).unwrap();
    let ranker = default_ranker();
    let auto = rank_topics(&topics, RunType::Automatic, &ranker).unwrap();
    let nist = "ikat/qrels/2023_ptkb_qrels_nist.txt";
    let org = "ikat/qrels/2023_ptkb_qrels_org.txt";
    assert!(measure(nist, &auto, false, "ndcg_cut_3") > 0.625);
    assert!(measure(nist, &auto, false, "recip_rank") > 0.725);
    assert!(measure(nist, &auto, true, "set_F") > 0.48);
    assert!(measure(org, &auto, false, "ndcg_cut_3") > 0.46);
    // Far above the reference points (random 0.294, BM25 on the resolved utterance 0.456).
    let manual = rank_topics(&topics, RunType::Manual, &ranker).unwrap();
    assert!(measure(nist, &manual, false, "ndcg_cut_3") > 0.665);
    assert!(measure(org, &manual, false, "ndcg_cut_3") > 0.525);
}

/// Garbles everything an automatic run must not read for turn `index`: every resolved
/// utterance and ptkb_provenance, the current turn's response, and all later turns.
fn scrambled(topic: &IkatTopic, index: usize) -> IkatTopic {
    let mut t = topic.clone();
    for (j, turn) in t.turns.iter_mut().enumerate() {
        turn.resolved_utterance = Some("vegetarian android phone allergic soybeans".into());
        turn.ptkb_provenance = vec!["1".into(), "2".into()];
        if j >= index {
            turn.response = Some("vegetarian android phone allergic soybeans yoga".into());
        }
        if j > index {
            turn.utterance = "vegetarian android phone allergic soybeans yoga".into();
        }
    }
    t
}

#[test]
fn automatic_ranking_never_reads_answers_or_later_turns() {
    let topics = shared_data("ikat/official/2023_test_topics.json");
    let topics = read_topics(&topics).unwrap();
    let ranker = default_ranker();
    let mut compared = 0;
    for topic in &topics {
        for i in 0..topic.turns.len() {
            let clean = ConversationContext::from_ikat(topic, i, RunType::Automatic).unwrap();
            let dirty_topic = scrambled(topic, i);
            let dirty =
                ConversationContext::from_ikat(&dirty_topic, i, RunType::Automatic).unwrap();
            assert_eq!(ranker.rank(&clean).unwrap(), ranker.rank(&dirty).unwrap());
            compared += 1;
        }
    }
    assert_eq!(compared, 332);
    // The scrambling is strong enough to matter where it is allowed: manual runs see it.
    let t = &topics[0];
    let clean = ConversationContext::from_ikat(t, 3, RunType::Manual).unwrap();
    let dirty_topic = scrambled(t, 3);
    let dirty = ConversationContext::from_ikat(&dirty_topic, 3, RunType::Manual).unwrap();
    assert_ne!(ranker.rank(&clean).unwrap(), ranker.rank(&dirty).unwrap());
}

#[test]
fn empty_ptkb_and_empty_utterance() {
    let ranker = default_ranker();
    let mut ctx = ConversationContext::new("Which diet suits me?");
    assert!(ranker.rank(&ctx).unwrap().statements.is_empty());
    ctx.utterance = String::new();
    ctx.ptkb = vec![convrag::pipeline::context::PtkbStatement {
        id: "1".into(),
        text: "I'm vegetarian.".into(),
    }];
    let r = ranker.rank(&ctx).unwrap();
    assert_eq!(r.statements.len(), 1);
    assert!(!r.statements[0].selected);
}

#[test]
fn ikat_run_output_round_trips_through_the_evaluator() {
    let path = shared_data("ikat/official/2023_test_topics.json");
    let topics = read_conversations(&path).unwrap();
    let rankings = rank_topics(&topics, RunType::Automatic, &default_ranker()).unwrap();
    let run = ptkb_run("t", RunType::Automatic, &rankings, ProvenanceList::Selected).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    std::fs::write(&out, run.render().unwrap()).unwrap();
    let read = convrag::eval::ptkb::read_ptkb_run(&out).unwrap();
    assert_eq!(read, as_run(&rankings, true));
}

/// The previous server ranker (still `convrag pipeline ptkb --learned`): the learned one with the real MiniLM bi-encoder, weights fitted by
/// `convrag tune ptkb --neural` on iKAT 2023 *train* only. Measured on the test topics (never
/// fitted on): NIST nDCG@3 0.6517, organizers' 0.5797 (the bar on unseen data: 0.55);
/// the learned ranker without the model: NIST 0.6071.
#[test]
fn learned_ranker_on_unseen_ikat_2023_test_topics() {
    use std::sync::Arc;
    let topics = read_topics(&shared_data("ikat/official/2023_test_topics.json")).unwrap();
    let model: Arc<dyn convrag::rerank::Reranker> = Arc::new(crate::common::default_model());
    let neural = convrag::pipeline::ptkb::learned_ranker(Some(model)).unwrap();
    let auto = rank_topics(&topics, RunType::Automatic, &neural).unwrap();
    let nist = "ikat/qrels/2023_ptkb_qrels_nist.txt";
    let org = "ikat/qrels/2023_ptkb_qrels_org.txt";
    let n = measure(nist, &auto, false, "ndcg_cut_3");
    let o = measure(org, &auto, false, "ndcg_cut_3");
    assert!(n > 0.651 && o > 0.579, "NIST {n} org {o}");
    let lexical = convrag::pipeline::ptkb::learned_ranker(None).unwrap();
    let auto = rank_topics(&topics, RunType::Automatic, &lexical).unwrap();
    let n = measure(nist, &auto, false, "ndcg_cut_3");
    assert!(n > 0.607, "NIST {n}");
}
