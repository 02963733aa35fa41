//! The PTKB and rewrite stages over whole topic files, for measurement with `convrag eval ptkb`
//! and `convrag eval rewrite`.
//!
//! Topics: iKAT or CAsT, as [`crate::formats::topics::read_conversations`] reads them.

use crate::formats::ikat::{
    distinct_turns, IkatResponse, IkatRun, IkatRunTurn, IkatTopic, RunType,
};
use crate::pipeline::context::ConversationContext;
use crate::pipeline::ptkb::{PtkbRanker, PtkbRanking};
use crate::pipeline::rewrite::Rewriter;
use crate::pipeline::rewrite_llm::LlmRewriter;
use crate::pipeline::{PipelineError, Result};
use crate::progress::Progress;

/// Which statements a PTKB run's `ptkb_provenance` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProvenanceList {
    /// Only the selected statements (the submission form).
    Selected,
    /// All statements, ranked (to measure the ranking itself).
    All,
}

/// Ranks the PTKB of every turn of every topic: (turn key, ranking).
pub fn rank_topics(
    topics: &[IkatTopic],
    run_type: RunType,
    ranker: &dyn PtkbRanker,
) -> Result<Vec<(String, PtkbRanking)>> {
    rank_topics_embedded(topics, run_type, ranker, None)
}

/// [`rank_topics`] with every text embedded through `vectors` when given: one memo for the whole
/// run, so a statement, which recurs in every turn of its conversation, is encoded once. The
/// rankings are those of [`PtkbRanker::rank`].
pub fn rank_topics_embedded(
    topics: &[IkatTopic],
    run_type: RunType,
    ranker: &dyn PtkbRanker,
    vectors: Option<&crate::rerank::QueryVectors>,
) -> Result<Vec<(String, PtkbRanking)>> {
    let mut out = Vec::new();
    for (topic, i) in distinct_turns(topics) {
        let ctx = ConversationContext::from_ikat(topic, i, run_type)
            .expect("index within the topic's turns");
        let ranking = match vectors {
            Some(v) => ranker.rank_embedded(&ctx, v)?,
            None => ranker.rank(&ctx)?,
        };
        out.push((topic.turn_key(&topic.turns[i]), ranking));
    }
    Ok(out)
}

/// Every turn of every topic in order: (turn key, what `rewrite` makes of its context and
/// selected statements).
fn map_turns(
    topics: &[IkatTopic],
    run_type: RunType,
    ranker: &dyn PtkbRanker,
    mut rewrite: impl FnMut(&str, &ConversationContext, &[&str]) -> Result<String>,
) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (topic, i) in distinct_turns(topics) {
        let ctx = ConversationContext::from_ikat(topic, i, run_type)
            .expect("index within the topic's turns");
        let ranking = ranker.rank(&ctx)?;
        let selected: Vec<&str> = ranking.selected().map(|s| s.text.as_str()).collect();
        let key = topic.turn_key(&topic.turns[i]);
        let text = rewrite(&key, &ctx, &selected)?;
        out.push((key, text));
    }
    Ok(out)
}

/// Rewrites every turn of every topic: (turn key, rewrite text).
pub fn rewrite_topics(
    topics: &[IkatTopic],
    run_type: RunType,
    ranker: &dyn PtkbRanker,
    rewriter: &dyn Rewriter,
) -> Result<Vec<(String, String)>> {
    map_turns(topics, run_type, ranker, |_, ctx, selected| {
        Ok(rewriter.rewrite(ctx, selected)?.text)
    })
}

/// What [`llm_rewrite_topics`] made: the rewrites and the turns whose LLM rewrite fell back.
#[derive(Debug, Clone, Default)]
pub struct LlmRewrites {
    /// (turn key, rewrite text), every turn in order.
    pub rewrites: Vec<(String, String)>,
    /// Turns the LLM was asked to rewrite (the others had a manual rewrite).
    pub asked: usize,
    /// (turn key, why): turns that got the fallback rewrite instead of the LLM's.
    pub fallbacks: Vec<(String, String)>,
}

/// [`rewrite_topics`] with the LLM rewriter (manual rewrites, when the run type gives them, win);
/// a turn whose LLM rewrite fails gets `rewriter`'s. Reports turns done to `progress`.
pub fn llm_rewrite_topics(
    topics: &[IkatTopic],
    run_type: RunType,
    ranker: &dyn PtkbRanker,
    rewriter: &dyn Rewriter,
    llm: &LlmRewriter,
    progress: &dyn Progress,
) -> Result<LlmRewrites> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| PipelineError::Input(format!("cannot start the async runtime: {e}")))?;
    progress.set_length(distinct_turns(topics).count() as u64);
    let (mut asked, mut fallbacks) = (0, Vec::new());
    let rewrites = map_turns(topics, run_type, ranker, |key, ctx, selected| {
        let base = rewriter.rewrite(ctx, selected)?;
        progress.inc(1);
        if base.method == crate::pipeline::rewrite::RewriteMethod::Manual {
            return Ok(base.text);
        }
        asked += 1;
        let outcome = runtime.block_on(llm.rewrite(ctx, selected, base))?;
        if let Some(f) = &outcome.fallback {
            fallbacks.push((key.to_string(), format!("{}: {}", f.kind, f.reason)));
        }
        Ok(outcome.rewrite.text)
    })?;
    progress.finish();
    Ok(LlmRewrites {
        rewrites,
        asked,
        fallbacks,
    })
}

/// The PTKB rankings as an iKAT run: one response per turn, empty text, no passages.
pub fn ptkb_run(
    run_name: &str,
    run_type: RunType,
    rankings: &[(String, PtkbRanking)],
    list: ProvenanceList,
) -> Result<IkatRun> {
    let mut turns = Vec::new();
    for (key, ranking) in rankings {
        let ids = ranking
            .statements
            .iter()
            .filter(|s| list == ProvenanceList::All || s.selected)
            .map(|s| {
                s.id.parse::<u32>().map_err(|_| {
                    PipelineError::Input(format!(
                        "turn {key}: PTKB id {:?} is not a number, which iKAT runs require",
                        s.id
                    ))
                })
            })
            .collect::<Result<Vec<u32>>>()?;
        turns.push(IkatRunTurn {
            turn_id: key.clone(),
            responses: vec![IkatResponse {
                rank: 1,
                text: String::new(),
                ptkb_provenance: ids,
                passage_provenance: Vec::new(),
            }],
        });
    }
    Ok(IkatRun {
        run_name: run_name.to_string(),
        run_type,
        eval_response: Some(false),
        turns,
    })
}

/// The full rankings as a TREC run (`turn Q0 statement rank score run_name`).
pub fn ptkb_trec_run(run_name: &str, rankings: &[(String, PtkbRanking)]) -> String {
    let mut s = String::new();
    for (key, ranking) in rankings {
        for (r, st) in ranking.statements.iter().enumerate() {
            s.push_str(&format!(
                "{key} Q0 {} {} {} {run_name}\n",
                st.id,
                r + 1,
                st.score
            ));
        }
    }
    s
}

/// Rewrites as TSV `turn_id<TAB>rewrite`, tabs and line breaks inside a rewrite made spaces.
pub fn rewrites_tsv(rewrites: &[(String, String)]) -> String {
    let mut tsv = String::new();
    for (key, text) in rewrites {
        let one_line: String = text
            .chars()
            .map(|c| {
                if matches!(c, '\t' | '\n' | '\r') {
                    ' '
                } else {
                    c
                }
            })
            .collect();
        tsv.push_str(&format!("{key}\t{one_line}\n"));
    }
    tsv
}
