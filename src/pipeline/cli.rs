//! `convrag pipeline ...`: runs stages 1 and 2 over a topics file, for measurement with
//! `convrag eval ptkb` and `convrag eval rewrite`.
//!
//! Topics: iKAT (any year, [`crate::formats::ikat::read_topics`]) or CAsT 2019/2020 topics
//! (`number` + `turn[].number` + `raw_utterance`; `manual_rewritten_utterance` is the manual
//! rewrite, CAsT has no canonical response text and no PTKB).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::Value;

use super::context::ConversationContext;
use super::ptkb::{
    HybridScorer, LexicalScorer, PtkbRanker, PtkbRanking, QueryWeights, ScoringRanker, Selection,
    SimilarityScorer, StatementScorer, TermCosine,
};
use super::rewrite::{HistoryRewriter, ManualRewriter, Rewriter};
use super::{PipelineError, Result};
use crate::formats::ikat::{
    read_topics, IkatResponse, IkatRun, IkatRunTurn, IkatTopic, IkatTurn, RunType,
};
use crate::rerank::Reranker;

#[derive(Debug, Args)]
pub struct PipelineArgs {
    #[command(subcommand)]
    pub command: PipelineCommand,
}

/// Which context a run may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunTypeArg {
    /// Utterances and canonical responses of earlier turns, the PTKB.
    Automatic,
    /// Also the manually resolved utterance of the current turn.
    Manual,
}

impl From<RunTypeArg> for RunType {
    fn from(r: RunTypeArg) -> Self {
        match r {
            RunTypeArg::Automatic => RunType::Automatic,
            RunTypeArg::Manual => RunType::Manual,
        }
    }
}

/// PTKB ranker settings.
#[derive(Debug, Args, Clone)]
pub struct PtkbOptions {
    /// Selection rule: top:K, threshold:X or relative:RATIO:MIN_SCORE:MAX.
    #[arg(long, default_value = "relative:0.6:0.3:3")]
    pub select: String,
    /// Query weight of the previous utterance.
    #[arg(long, default_value_t = QueryWeights::default().history)]
    pub history: f32,
    /// Decay per further turn back.
    #[arg(long, default_value_t = QueryWeights::default().decay)]
    pub decay: f32,
    /// Lower bound of the first utterance's weight.
    #[arg(long, default_value_t = QueryWeights::default().first)]
    pub first: f32,
    /// Weight of earlier canonical responses (automatic runs may use them).
    #[arg(long, default_value_t = QueryWeights::default().response)]
    pub response: f32,
    #[arg(long, default_value_t = 1.2)]
    pub k1: f32,
    #[arg(long, default_value_t = 0.75)]
    pub b: f32,
    /// Weight of a TF-IDF cosine scorer combined (min-max normalized) with BM25; 0 = BM25 only.
    #[arg(long, default_value_t = 0.0)]
    pub cosine: f32,
    /// Weight of the neural model's similarity (the installed reranking model, see
    /// `convrag config`) combined (min-max normalized) with BM25; 0 = no model.
    #[arg(long, default_value_t = 0.0)]
    pub neural: f32,
    /// Earlier utterances put before the current one in the neural model's query.
    #[arg(long, default_value_t = 1)]
    pub neural_history: usize,
}

impl PtkbOptions {
    /// The ranker these options describe.
    /// `model`: the neural model, needed when `neural` > 0.
    pub fn ranker(&self, model: Option<Arc<dyn Reranker>>) -> Result<Box<dyn PtkbRanker>> {
        let selection = Selection::parse(&self.select)?;
        let lexical = LexicalScorer {
            k1: self.k1,
            b: self.b,
            query: QueryWeights {
                history: self.history,
                decay: self.decay,
                first: self.first,
                response: self.response,
            },
        };
        if self.cosine > 0.0 || self.neural > 0.0 {
            let mut parts: Vec<(Box<dyn StatementScorer>, f32)> = vec![(Box::new(lexical), 1.0)];
            if self.cosine > 0.0 {
                parts.push((
                    Box::new(SimilarityScorer {
                        similarity: TermCosine,
                        history_turns: 1,
                    }),
                    self.cosine,
                ));
            }
            if self.neural > 0.0 {
                let model = model.ok_or_else(|| {
                    PipelineError::Input(
                        "--neural needs the reranking model (scripts/fetch-models.sh)".into(),
                    )
                })?;
                parts.push((
                    Box::new(SimilarityScorer {
                        similarity: super::turn::ModelSimilarity(model),
                        history_turns: self.neural_history,
                    }),
                    self.neural,
                ));
            }
            let scorer = HybridScorer { parts };
            return Ok(Box::new(ScoringRanker { scorer, selection }));
        }
        Ok(Box::new(ScoringRanker {
            scorer: lexical,
            selection,
        }))
    }
}

/// Rewriter settings.
#[derive(Debug, Args, Clone)]
pub struct RewriteOptions {
    #[arg(long, default_value_t = HistoryRewriter::default().base_terms)]
    pub base_terms: usize,
    #[arg(long, default_value_t = HistoryRewriter::default().anaphora_terms)]
    pub anaphora_terms: usize,
    #[arg(id = "rw_decay", long = "rw-decay", default_value_t = HistoryRewriter::default().decay)]
    pub decay: f32,
    #[arg(id = "rw_first", long = "rw-first", default_value_t = HistoryRewriter::default().first)]
    pub first: f32,
    #[arg(id = "rw_response", long = "rw-response", default_value_t = HistoryRewriter::default().response)]
    pub response: f32,
    /// Utterances with fewer content terms count as elliptic (and get anaphora terms).
    #[arg(long, default_value_t = HistoryRewriter::default().short_below)]
    pub short_below: usize,
    /// Append context terms instead of writing them in place of the first pronoun.
    #[arg(long)]
    pub append_only: bool,
    /// Content terms of the selected PTKB statements to append.
    #[arg(long, default_value_t = HistoryRewriter::default().ptkb_terms)]
    pub ptkb_terms: usize,
    /// Statement terms written into the rewrite when the utterance speaks of the user.
    #[arg(long, default_value_t = HistoryRewriter::default().ptkb_terms_first_person)]
    pub ptkb_terms_first_person: usize,
}

impl RewriteOptions {
    pub fn rewriter(&self) -> HistoryRewriter {
        HistoryRewriter {
            base_terms: self.base_terms,
            anaphora_terms: self.anaphora_terms,
            decay: self.decay,
            first: self.first,
            response: self.response,
            ptkb_terms: self.ptkb_terms,
            ptkb_terms_first_person: self.ptkb_terms_first_person,
            ptkb_query_terms: HistoryRewriter::default().ptkb_query_terms,
            short_below: self.short_below,
            replace_pronoun: !self.append_only,
            ..HistoryRewriter::default()
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum PipelineCommand {
    /// Rank every turn's PTKB statements; write an iKAT run whose `ptkb_provenance` lists them.
    /// The run has no passages, so it is for `convrag eval ptkb`, not a submission by itself.
    Ptkb {
        /// iKAT topics file.
        #[arg(long, value_name = "FILE")]
        topics: PathBuf,
        #[arg(long, value_enum, default_value = "automatic")]
        run_type: RunTypeArg,
        /// iKAT run JSON (one response per turn, empty text, no passages).
        #[arg(long, value_name = "FILE")]
        output: PathBuf,
        /// `ptkb_provenance` lists only the selected statements (the submission form) or all,
        /// ranked (to measure the ranking itself).
        #[arg(long, value_enum, default_value = "selected")]
        list: ListArg,
        /// Also write the full ranking with scores as a TREC run.
        #[arg(long, value_name = "FILE")]
        ranking: Option<PathBuf>,
        #[arg(long, default_value = "convrag-ptkb")]
        run_name: String,
        #[command(flatten)]
        ptkb: PtkbOptions,
    },
    /// Rewrite every turn; write TSV `turn_id<TAB>rewrite`.
    Rewrite {
        /// iKAT or CAsT topics file.
        #[arg(long, value_name = "FILE")]
        topics: PathBuf,
        #[arg(long, value_enum, default_value = "automatic")]
        run_type: RunTypeArg,
        #[arg(long, value_name = "FILE")]
        output: PathBuf,
        #[command(flatten)]
        rewrite: RewriteOptions,
        #[command(flatten)]
        ptkb: PtkbOptions,
        /// Rewrite with the configured LLM endpoint (llm.base_url, prompts/rewrite.*.md); a
        /// turn whose LLM rewrite fails or is unusable gets the history-aware rewrite.
        #[arg(long)]
        llm: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListArg {
    Selected,
    All,
}

/// Reads iKAT topics, or CAsT 2019/2020 topics converted to the same shape.
pub fn read_conversations(path: &Path) -> Result<Vec<IkatTopic>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        PipelineError::Format(crate::formats::FormatError::Io {
            path: path.to_path_buf(),
            source: e,
        })
    })?;
    let value: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        // The iKAT reader reports JSON errors with their line.
        Err(_) => return Ok(read_topics(path)?),
    };
    let is_cast = value
        .as_array()
        .and_then(|a| a.first())
        .is_some_and(|t| t.get("turn").is_some());
    if !is_cast {
        return Ok(read_topics(path)?);
    }
    // `number` keys in document order: each topic's, then its turns'.
    let lines = crate::formats::key_lines(&text, "number");
    let mut line_at = lines.into_iter();
    let mut out = Vec::new();
    for (i, t) in value.as_array().into_iter().flatten().enumerate() {
        let line = line_at.next().unwrap_or(1);
        let err = |line: usize, reason: String| PipelineError::Parse {
            path: path.to_path_buf(),
            line,
            reason,
        };
        let number = t
            .get("number")
            .and_then(|n| {
                n.as_u64()
                    .map(|n| n.to_string())
                    .or(n.as_str().map(String::from))
            })
            .ok_or_else(|| err(line, format!("topic #{}: missing `number`", i + 1)))?;
        let turns = t
            .get("turn")
            .and_then(Value::as_array)
            .ok_or_else(|| err(line, format!("topic {number}: `turn` must be an array")))?;
        let mut topic_turns = Vec::new();
        for (j, turn) in turns.iter().enumerate() {
            let tline = line_at.next().unwrap_or(line);
            let turn_id = turn
                .get("number")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    err(
                        tline,
                        format!("topic {number} turn #{}: missing `number`", j + 1),
                    )
                })?;
            let utterance = turn
                .get("raw_utterance")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    err(
                        tline,
                        format!("topic {number} turn {turn_id}: missing `raw_utterance`"),
                    )
                })?;
            topic_turns.push(IkatTurn {
                line: tline,
                turn_id,
                utterance: utterance.to_string(),
                resolved_utterance: turn
                    .get("manual_rewritten_utterance")
                    .and_then(Value::as_str)
                    .map(String::from),
                response: None,
                ptkb_provenance: Vec::new(),
                response_provenance: Vec::new(),
            });
        }
        out.push(IkatTopic {
            line,
            number,
            title: t
                .get("title")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            ptkb: Vec::new(),
            turns: topic_turns,
        });
    }
    Ok(out)
}

/// Ranks the PTKB of every turn of every topic: (turn key, ranking).
pub fn rank_topics(
    topics: &[IkatTopic],
    run_type: RunType,
    ranker: &dyn PtkbRanker,
) -> Result<Vec<(String, PtkbRanking)>> {
    let mut out = Vec::new();
    for topic in topics {
        for (i, turn) in topic.turns.iter().enumerate() {
            let ctx = ConversationContext::from_ikat(topic, i, run_type)
                .expect("index within the topic's turns");
            out.push((topic.turn_key(turn), ranker.rank(&ctx)?));
        }
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
    for topic in topics {
        for (i, turn) in topic.turns.iter().enumerate() {
            let ctx = ConversationContext::from_ikat(topic, i, run_type)
                .expect("index within the topic's turns");
            let ranking = ranker.rank(&ctx)?;
            let selected: Vec<&str> = ranking.selected().map(|s| s.text.as_str()).collect();
            let key = topic.turn_key(turn);
            let text = rewrite(&key, &ctx, &selected)?;
            out.push((key, text));
        }
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

/// [`rewrite_topics`] with the LLM rewriter (manual rewrites, when the run type gives them, win);
/// reports how many turns fell back to `rewriter`'s rewrite, with a progress bar.
pub fn llm_rewrite_topics(
    topics: &[IkatTopic],
    run_type: RunType,
    ranker: &dyn PtkbRanker,
    rewriter: &dyn Rewriter,
    llm: &super::rewrite_llm::LlmRewriter,
) -> Result<Vec<(String, String)>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| PipelineError::Input(format!("cannot start the async runtime: {e}")))?;
    let total: usize = topics.iter().map(|t| t.turns.len()).sum();
    let bar = indicatif::ProgressBar::new(total as u64).with_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} turns, ETA {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let (mut asked, mut fallbacks) = (0usize, 0usize);
    let out = map_turns(topics, run_type, ranker, |key, ctx, selected| {
        let base = rewriter.rewrite(ctx, selected)?;
        bar.inc(1);
        if base.method == "manual" {
            return Ok(base.text);
        }
        asked += 1;
        let outcome = runtime.block_on(llm.rewrite(ctx, selected, base))?;
        if let Some(f) = &outcome.fallback {
            fallbacks += 1;
            bar.suspend(|| eprintln!("{key}: {}: {}", f.kind, f.reason));
        }
        Ok(outcome.rewrite.text)
    })?;
    bar.finish_and_clear();
    eprintln!(
        "{total} turns: {asked} rewritten by the LLM, {fallbacks} of them fell back to the \
         history-aware rewrite"
    );
    Ok(out)
}

/// The PTKB rankings as an iKAT run: one response per turn, empty text, no passages.
pub fn ptkb_run(
    run_name: &str,
    run_type: RunType,
    rankings: &[(String, PtkbRanking)],
    list: ListArg,
) -> Result<IkatRun> {
    let mut turns = Vec::new();
    for (key, ranking) in rankings {
        let ids = ranking
            .statements
            .iter()
            .filter(|s| list == ListArg::All || s.selected)
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

fn write(path: &Path, text: &str) -> Result<()> {
    Ok(crate::formats::atomic::write_atomic(path, text.as_bytes())?)
}

/// Runs `convrag pipeline ...`.
pub fn run(config: &crate::Config, args: PipelineArgs) -> anyhow::Result<()> {
    let model = |ptkb: &PtkbOptions| -> anyhow::Result<Option<Arc<dyn Reranker>>> {
        if ptkb.neural <= 0.0 {
            return Ok(None);
        }
        crate::service::load_reranker(config)
            .map(Some)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--neural: no reranking model could be loaded (scripts/fetch-models.sh)"
                )
            })
    };
    match args.command {
        PipelineCommand::Ptkb {
            topics,
            run_type,
            output,
            list,
            ranking,
            run_name,
            ptkb,
        } => {
            let topics = read_conversations(&topics)?;
            let ranker = ptkb.ranker(model(&ptkb)?)?;
            let rankings = rank_topics(&topics, run_type.into(), ranker.as_ref())?;
            let run = ptkb_run(&run_name, run_type.into(), &rankings, list)?;
            write(&output, &run.render()?)?;
            if let Some(p) = ranking {
                write(&p, &ptkb_trec_run(&run_name, &rankings))?;
            }
        }
        PipelineCommand::Rewrite {
            topics,
            run_type,
            output,
            rewrite,
            ptkb,
            llm,
        } => {
            let topics = read_conversations(&topics)?;
            let ranker = ptkb.ranker(model(&ptkb)?)?;
            let history = rewrite.rewriter();
            let llm_rewriter = if llm {
                Some(
                    super::rewrite_llm::llm_stages_from_config(&config.llm)?.map(|s| s.rewriter).ok_or_else(
                        || anyhow::anyhow!("--llm: no LLM endpoint is configured (llm.base_url / CONVRAG_LLM_BASE_URL)"),
                    )?,
                )
            } else {
                None
            };
            let rewrites = match (run_type, llm_rewriter) {
                (run_type, Some(llm)) => {
                    let rewriter = ManualRewriter { fallback: history };
                    let run_type = RunType::from(run_type);
                    llm_rewrite_topics(&topics, run_type, ranker.as_ref(), &rewriter, &llm)?
                }
                (run_type, None) => match run_type {
                    RunTypeArg::Automatic => {
                        rewrite_topics(&topics, RunType::Automatic, ranker.as_ref(), &history)?
                    }
                    RunTypeArg::Manual => rewrite_topics(
                        &topics,
                        RunType::Manual,
                        ranker.as_ref(),
                        &ManualRewriter { fallback: history },
                    )?,
                },
            };
            let mut tsv = String::new();
            for (key, text) in rewrites {
                let one_line: String = text
                    .chars()
                    .map(|c| {
                        if c == '\t' || c == '\n' || c == '\r' {
                            ' '
                        } else {
                            c
                        }
                    })
                    .collect();
                tsv.push_str(&format!("{key}\t{one_line}\n"));
            }
            write(&output, &tsv)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        command: PipelineCommand,
    }

    #[test]
    fn command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
