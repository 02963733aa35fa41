//! `convrag pipeline ...`: runs stages 1 and 2 over a topics file, for measurement with
//! `convrag eval ptkb` and `convrag eval rewrite` (the loops are `convrag::pipeline::topics`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use convrag::formats::atomic::write_atomic;
use convrag::formats::ikat::RunType;
use convrag::formats::topics::read_conversations;
use convrag::pipeline::ptkb::ModelSimilarity;
use convrag::pipeline::ptkb::{
    HybridScorer, LexicalScorer, PtkbRanker, QueryWeights, ScoringRanker, Selection,
    SimilarityScorer, StatementScorer, TermCosine,
};
use convrag::pipeline::rewrite::{HistoryRewriter, ManualRewriter, TermSelection};
use convrag::pipeline::rewrite_llm::llm_stages_from_config;
use convrag::rerank::Reranker;
use convrag::tune::topics::{
    llm_rewrite_topics, ptkb_run, ptkb_trec_run, rank_topics_embedded, rewrite_topics,
    rewrites_tsv, ProvenanceList,
};
use convrag::Config;

use super::progress::Bar;

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
    /// The learned ranker (weights of `convrag tune ptkb`; the server's when no bi-encoder is
    /// installed), with the bi-encoder when `--neural` > 0; the other ranker options are then
    /// ignored.
    #[arg(long)]
    pub learned: bool,
    /// The calibrated ranker that abstains (weights of `convrag tune ptkb-selection`), with the
    /// bi-encoder when `--neural` > 0; the other ranker options are then ignored.
    #[arg(long, conflicts_with = "learned")]
    pub calibrated: bool,
    /// The learned ranker's order, selecting what both it and the calibrated ranker select (with
    /// the bi-encoder when `--neural` > 0); the server's selection.
    #[arg(long, conflicts_with_all = ["learned", "calibrated"])]
    pub agreed: bool,
    /// A named ranker (`--learned`, `--calibrated` and `--agreed` are `--ranker learned` and so
    /// on); `zero-shot` and `served` always use the bi-encoder; the other ranker options are then
    /// ignored.
    #[arg(long, value_enum, conflicts_with_all = ["learned", "calibrated", "agreed"])]
    pub ranker: Option<RankerArg>,
}

/// The named PTKB rankers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RankerArg {
    /// The bi-encoder's weighted cosine with the conversation, no fitted weights; selects its
    /// best statement (untuned).
    ZeroShot,
    /// What turns serve with the bi-encoder: the zero-shot order, the agreed selection.
    Served,
    /// Logistic model of `convrag tune ptkb` (bi-encoder features with `--neural` > 0).
    Learned,
    /// The calibrated ranker that abstains (`convrag tune ptkb-selection`).
    Calibrated,
    /// The learned order, selecting what the learned and the calibrated ranker both select.
    Agreed,
}

impl PtkbOptions {
    /// The named ranker, from `--ranker` or its older flags.
    pub fn named(&self) -> Option<RankerArg> {
        self.ranker.or(if self.agreed {
            Some(RankerArg::Agreed)
        } else if self.calibrated {
            Some(RankerArg::Calibrated)
        } else if self.learned {
            Some(RankerArg::Learned)
        } else {
            None
        })
    }

    /// Whether the ranker needs the bi-encoder whatever `--neural` says.
    fn needs_model(&self) -> bool {
        matches!(self.named(), Some(RankerArg::ZeroShot | RankerArg::Served))
    }
}

impl PtkbOptions {
    /// The ranker these options describe.
    /// `model`: the neural model, needed when `neural` > 0.
    pub fn ranker(&self, model: Option<Arc<dyn Reranker>>) -> anyhow::Result<Box<dyn PtkbRanker>> {
        use convrag::pipeline::{ptkb_calibrated, ptkb_zero_shot};
        let bi_encoder = || model.clone().context("the ranker needs the bi-encoder");
        match self.named() {
            Some(RankerArg::ZeroShot) => {
                return Ok(Box::new(ptkb_zero_shot::zero_shot_ranker(bi_encoder()?)))
            }
            Some(RankerArg::Served) => {
                return Ok(Box::new(ptkb_zero_shot::served_ranker(bi_encoder()?)?))
            }
            Some(RankerArg::Agreed) => return Ok(Box::new(ptkb_calibrated::agreed_ranker(model)?)),
            Some(RankerArg::Calibrated) => {
                return Ok(Box::new(ptkb_calibrated::calibrated_ranker(model)?))
            }
            Some(RankerArg::Learned) => {
                return Ok(Box::new(convrag::pipeline::ptkb::learned_ranker(model)?))
            }
            None => {}
        }
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
                let model = model
                    .context("--neural needs the reranking model (scripts/fetch-models.sh)")?;
                parts.push((
                    Box::new(SimilarityScorer {
                        similarity: ModelSimilarity(model),
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
    /// Choose history terms by the decayed weights and the term budget (`--base-terms`,
    /// `--anaphora-terms`) instead of the learned selector (`convrag tune rewrite`).
    #[arg(long)]
    pub decayed: bool,
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
            selection: if self.decayed {
                TermSelection::Decayed
            } else {
                TermSelection::Learned
            },
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
    #[cfg(feature = "bench")]
    /// Turn latency per stage (p50/p95), cold and with the embedding cache warm.
    BenchTurns(super::bench::BenchTurnsArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListArg {
    Selected,
    All,
}

impl From<ListArg> for ProvenanceList {
    fn from(l: ListArg) -> Self {
        match l {
            ListArg::Selected => ProvenanceList::Selected,
            ListArg::All => ProvenanceList::All,
        }
    }
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    Ok(write_atomic(path, text.as_bytes())?)
}

/// Runs `convrag pipeline ...`.
pub fn run(config: &Config, args: PipelineArgs) -> anyhow::Result<()> {
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
            let model = neural_model(config, &ptkb)?;
            let ranker = ptkb.ranker(model.clone())?;
            // One embedding memo for the run: each statement is encoded once, not once a turn.
            let vectors = model.map(convrag::rerank::QueryVectors::new);
            let rankings =
                rank_topics_embedded(&topics, run_type.into(), ranker.as_ref(), vectors.as_ref())?;
            let run = ptkb_run(&run_name, run_type.into(), &rankings, list.into())?;
            write(&output, &run.render()?)?;
            if let Some(p) = ranking {
                write(&p, &ptkb_trec_run(&run_name, &rankings))?;
            }
        }
        #[cfg(feature = "bench")]
        PipelineCommand::BenchTurns(args) => super::bench::run(config, args)?,
        PipelineCommand::Rewrite {
            topics,
            run_type,
            output,
            rewrite,
            ptkb,
            llm,
        } => {
            let topics = read_conversations(&topics)?;
            let ranker = ptkb.ranker(neural_model(config, &ptkb)?)?;
            let rewrites = if llm {
                llm_rewrites(
                    config,
                    &topics,
                    run_type,
                    ranker.as_ref(),
                    rewrite.rewriter(),
                )?
            } else {
                let history = rewrite.rewriter();
                match run_type {
                    RunTypeArg::Automatic => {
                        rewrite_topics(&topics, RunType::Automatic, ranker.as_ref(), &history)?
                    }
                    RunTypeArg::Manual => rewrite_topics(
                        &topics,
                        RunType::Manual,
                        ranker.as_ref(),
                        &ManualRewriter { fallback: history },
                    )?,
                }
            };
            write(&output, &rewrites_tsv(&rewrites))?;
        }
    }
    Ok(())
}

/// The installed reranking model, when `--neural` asks for it.
fn neural_model(config: &Config, ptkb: &PtkbOptions) -> anyhow::Result<Option<Arc<dyn Reranker>>> {
    if ptkb.neural <= 0.0 && !ptkb.needs_model() {
        return Ok(None);
    }
    convrag::dense::load_default(config)
        .map(Some)
        .context("no reranking model could be loaded for the PTKB ranker (scripts/fetch-models.sh)")
}

/// `pipeline rewrite --llm`: the LLM's rewrites, printing each fallback and a summary.
fn llm_rewrites(
    config: &Config,
    topics: &[convrag::formats::ikat::IkatTopic],
    run_type: RunTypeArg,
    ranker: &dyn PtkbRanker,
    history: HistoryRewriter,
) -> anyhow::Result<Vec<(String, String)>> {
    let llm = llm_stages_from_config(&config.llm)?
        .map(|s| s.rewriter)
        .context("--llm: no LLM endpoint is configured (llm.base_url / CONVRAG_LLM_BASE_URL)")?;
    let rewriter = ManualRewriter { fallback: history };
    let bar = Bar::items("turns", false);
    let done = llm_rewrite_topics(topics, run_type.into(), ranker, &rewriter, &llm, &bar)?;
    for (key, why) in &done.fallbacks {
        eprintln!("{key}: {why}");
    }
    eprintln!(
        "{} turns: {} rewritten by the LLM, {} of them fell back to the history-aware rewrite",
        done.rewrites.len(),
        done.asked,
        done.fallbacks.len()
    );
    Ok(done.rewrites)
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
