//! PTKB selection on small made-up PTKBs (`tests/fixtures/ptkb/small.json`: 35 turns, PTKBs of
//! 1–5 statements, 12 turns where nothing is relevant; labels written before any model was run;
//! never tuned on: the prior shift is chosen on `tests/fixtures/ptkb/small_dev.json`), through the
//! ranker a turn uses (`recommended_ranker`: the zero-shot order with the agreed ranker's
//! selection, with the real all-MiniLM-L6-v2 bi-encoder). Asserted, issue 32's bar: precision
//! >= 0.8, recall >= 0.6 and nothing selected where nothing is relevant.

use std::sync::Arc;

use crate::support::fixture;
use convrag::tune::ptkb_selection::SmallPtkbFile;

#[test]
fn served_ranker_selects_precisely_and_abstains_on_small_ptkbs() {
    let path = fixture("ptkb/small.json");
    let fixture: SmallPtkbFile =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(fixture.turns.len() >= 30);
    let model: Arc<dyn convrag::rerank::Reranker> = Arc::new(crate::common::default_model());
    let ranker = convrag::pipeline::ptkb_zero_shot::recommended_ranker(Some(model));
    let (mut selected, mut relevant, mut hits) = (0, 0, 0);
    let mut wrong_where_none = Vec::new();
    for t in &fixture.turns {
        let ranking = ranker.rank(&t.context()).unwrap();
        let chosen: Vec<usize> = ranking.selected().map(|s| s.id.parse().unwrap()).collect();
        selected += chosen.len();
        relevant += t.relevant.len();
        hits += chosen.iter().filter(|i| t.relevant.contains(i)).count();
        if t.relevant.is_empty() && !chosen.is_empty() {
            wrong_where_none.push((t.utterance.clone(), chosen.clone()));
        }
        let scores: Vec<String> = ranking
            .statements
            .iter()
            .map(|s| format!("{}:{:.2}", s.id, s.score))
            .collect();
        eprintln!(
            "{:?} -> {chosen:?} (relevant {:?}; {})",
            t.utterance,
            t.relevant,
            scores.join(" ")
        );
    }
    let precision = hits as f64 / selected.max(1) as f64;
    let recall = hits as f64 / relevant as f64;
    eprintln!("precision {precision:.3} recall {recall:.3} ({hits} of {selected} selected, {relevant} relevant)");
    assert!(
        wrong_where_none.is_empty(),
        "selected where nothing is relevant: {wrong_where_none:?}"
    );
    assert!(precision >= 0.8, "precision {precision:.3}");
    assert!(recall >= 0.6, "recall {recall:.3}");
}
