//! `convrag eval ...`: the command line of the evaluator.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use convrag::eval::answers::{answer_stats_file, evaluate_answers};
use convrag::eval::compare::{compare, CompareOptions, RougeMeasure, ScoreTable};
use convrag::eval::measures::{evaluate, EvalOptions, Measure};
use convrag::eval::poleval::evaluate_poleval;
use convrag::eval::ptkb::{
    default_measures, evaluate_ptkb, ptkb_qrels_from_topics, read_ptkb_judgments,
    read_ptkb_run_with_topics,
};
use convrag::eval::rewrite::{evaluate_rewrites, read_texts, TextRole};
use convrag::eval::trec::{read_qrels, read_run, Qrels};
use convrag::eval::EvalError;
use convrag::formats::atomic::write_atomic;

#[derive(Debug, Args)]
pub struct EvalArgs {
    #[command(subcommand)]
    pub command: EvalCommand,
}

/// Output options shared by every subcommand.
#[derive(Debug, Args, Clone)]
pub struct OutputArgs {
    /// Print per-query (per-turn) values before the summary (trec_eval -q).
    #[arg(short = 'q', long)]
    pub per_query: bool,
    /// Print `{"all": {...}, "per_query": {...}}` at full precision.
    #[arg(long)]
    pub json: bool,
    /// Write the output to this file (atomically) instead of standard output.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Where PTKB judgments come from (`eval ptkb`, `compare-ptkb`).
#[derive(Debug, Args, Clone)]
pub struct PtkbJudgedArgs {
    /// PTKB qrels (`9-1_3 0 <statement id> <0|1>`).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "topics",
        required_unless_present = "topics"
    )]
    qrels: Option<PathBuf>,
    /// iKAT topics file; judgments from each turn's `ptkb_provenance`.
    #[arg(long, value_name = "FILE")]
    topics: Option<PathBuf>,
}

impl PtkbJudgedArgs {
    fn judgments(&self) -> anyhow::Result<Qrels> {
        Ok(match (&self.qrels, &self.topics) {
            (Some(q), _) => read_ptkb_judgments(q)?,
            (None, Some(t)) => ptkb_qrels_from_topics(t)?,
            (None, None) => return Err(EvalError::Usage("give --qrels or --topics".into()).into()),
        })
    }
}

/// Options shared by the `compare*` subcommands.
#[derive(Debug, Args, Clone)]
pub struct CompareArgs {
    /// A run to compare; give two or more (`--run A --run B ...`). Pairs are B − A.
    #[arg(long = "run", value_name = "FILE", required = true)]
    pub runs: Vec<PathBuf>,
    /// Random sign flips of the randomization test (all of them when there are fewer).
    #[arg(long, default_value_t = CompareOptions::default().permutations, value_name = "N")]
    pub permutations: u64,
    /// Seed of the randomization test (same seed, same p-values on every platform).
    #[arg(long, default_value_t = CompareOptions::default().seed, value_name = "S")]
    pub seed: u64,
    /// Topics with the largest differences to list per pair and measure.
    #[arg(long, default_value_t = CompareOptions::default().top, value_name = "N")]
    pub top: usize,
    /// Write everything (per-topic values, deltas, p-values) as JSON to this file (atomically).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a self-contained HTML report with plots to this file (atomically).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

impl CompareArgs {
    fn options(&self) -> CompareOptions {
        CompareOptions {
            permutations: self.permutations,
            seed: self.seed,
            top: self.top,
        }
    }

    /// Each run read by `read`, named by its path as given.
    fn read<T>(
        &self,
        read: impl Fn(&std::path::Path) -> Result<T, EvalError>,
    ) -> anyhow::Result<Vec<(String, T)>> {
        if self.runs.len() < 2 {
            return Err(EvalError::Usage(format!(
                "give at least two runs to compare (--run A --run B), got {}",
                self.runs.len()
            ))
            .into());
        }
        Ok(self
            .runs
            .iter()
            .map(|p| Ok((p.display().to_string(), read(p)?)))
            .collect::<Result<_, EvalError>>()?)
    }
}

/// `convrag eval compare*`: paired significance tests between runs.
#[derive(Debug, Subcommand)]
pub enum CompareCommand {
    /// Compare ranking runs: means, paired t-test, randomization test, Holm–Bonferroni,
    /// wins/ties/losses. Topics are all qrels topics; one missing from a run scores 0 (-c).
    Compare {
        /// TREC qrels (qid iter docid rel).
        #[arg(long, value_name = "FILE")]
        qrels: PathBuf,
        /// Measures, trec_eval style (default: ndcg_cut.10, map, recip_rank, recall.100).
        #[arg(short = 'm', long = "metric", value_name = "MEASURE")]
        metrics: Vec<String>,
        /// Minimum grade counted relevant by binary measures (trec_eval -l).
        #[arg(short = 'l', long, default_value_t = 1)]
        relevance_level: i64,
        #[command(flatten)]
        compare: CompareArgs,
    },
    /// Compare PTKB statement rankings (per judged turn, as `eval ptkb`).
    ComparePtkb {
        #[command(flatten)]
        judged: PtkbJudgedArgs,
        /// Measures (default: ndcg_cut.3, recip_rank, P.1, set_F).
        #[arg(short = 'm', long = "metric", value_name = "MEASURE")]
        metrics: Vec<String>,
        #[command(flatten)]
        compare: CompareArgs,
    },
    /// Compare rewrites: per-turn ROUGE-1 against the reference rewrites (as `eval rewrite`).
    CompareRewrite {
        /// Reference rewrites (the layouts `eval rewrite` reads).
        #[arg(long, value_name = "FILE")]
        reference: PathBuf,
        /// rouge1_recall, rouge1_precision, rouge1_f1 (default: all three).
        #[arg(short = 'm', long = "metric", value_name = "MEASURE")]
        metrics: Vec<String>,
        /// Porter-stem tokens longer than 3 characters (rouge-score's use_stemmer=True).
        #[arg(long)]
        stem: bool,
        #[command(flatten)]
        compare: CompareArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Ranking measures exactly as trec_eval computes them.
    Ranking {
        /// TREC qrels (qid iter docid rel).
        #[arg(long, value_name = "FILE")]
        qrels: PathBuf,
        /// Run: TREC 6 columns, JSON {"qid": {"docid": score}}, or an iKAT run file.
        #[arg(long, value_name = "FILE")]
        run: PathBuf,
        /// Measures, trec_eval style: ndcg_cut.10, P.5,10, recall.100, map, map_cut.10,
        /// recip_rank, Rprec, success.1, set_P, set_recall, set_F, num_ret, num_rel, num_rel_ret.
        #[arg(short = 'm', long = "metric", value_name = "MEASURE")]
        metrics: Vec<String>,
        /// Minimum grade counted relevant by binary measures (trec_eval -l).
        #[arg(short = 'l', long, default_value_t = 1)]
        relevance_level: i64,
        /// Average over all qrels queries; missing ones score 0 (trec_eval -c).
        #[arg(short = 'c', long)]
        complete: bool,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// PTKB statement ranking and selection (iKAT).
    Ptkb {
        #[command(flatten)]
        judged: PtkbJudgedArgs,
        /// iKAT run file (first response's ptkb_provenance, in order; a 2025 JSONL submission
        /// with --topics) or a TREC/JSON run.
        #[arg(long, value_name = "FILE")]
        run: PathBuf,
        #[arg(short = 'm', long = "metric", value_name = "MEASURE")]
        metrics: Vec<String>,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// ROUGE-1 of rewrites against reference rewrites (rouge-score's tokenization).
    Rewrite {
        /// Reference rewrites: iKAT topics, CAsT 2019 TSV / 2020 JSON, QReCC JSON, TSV, JSONL.
        #[arg(long, value_name = "FILE")]
        reference: PathBuf,
        /// Rewrites: TSV `turn_id<TAB>rewrite`, JSONL {"id","rewrite"}, QReCC/SCAI run JSON; a
        /// topics file gives its raw utterances (the no-rewrite baseline).
        #[arg(long, value_name = "FILE")]
        run: PathBuf,
        /// Porter-stem tokens longer than 3 characters (rouge-score's use_stemmer=True).
        #[arg(long)]
        stem: bool,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Answers: SQuAD F1/EM against references, or TREC RAG answer statistics.
    Answers {
        /// Reference answers (QReCC JSON `Answer`, SCAI ground truth, TSV, JSONL).
        #[arg(long, value_name = "FILE", requires = "run")]
        reference: Option<PathBuf>,
        /// Answers to score (SCAI run.json `Model_answer`, JSONL {"id","answer"}, TSV).
        #[arg(long, value_name = "FILE")]
        run: Option<PathBuf>,
        /// TREC RAG answer JSONL: words, sentences, citation statistics.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["reference", "run"], required_unless_present = "reference")]
        rag: Option<PathBuf>,
        #[command(flatten)]
        out: OutputArgs,
    },
    #[command(flatten)]
    Compare(CompareCommand),
    /// PolEval 2022 passage retrieval NDCG@10 (GEval layout).
    Poleval {
        #[arg(long, value_name = "FILE")]
        expected: PathBuf,
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// in.tsv, checked for the same number of lines.
        #[arg(long = "in", value_name = "FILE")]
        input: Option<PathBuf>,
        #[command(flatten)]
        output: OutputArgs,
    },
}

fn emit(out: &OutputArgs, text: String, json: serde_json::Value) -> anyhow::Result<()> {
    let s = if out.json {
        let mut s = serde_json::to_string_pretty(&json)?;
        s.push('\n');
        s
    } else {
        text
    };
    match &out.output {
        Some(p) => write_atomic(p, s.as_bytes())?,
        None => print!("{s}"),
    }
    Ok(())
}

/// Runs the tests, prints the table and writes the files asked for.
fn report(table: ScoreTable, args: &CompareArgs) -> anyhow::Result<()> {
    let c = compare(table, args.options())?;
    if let Some(p) = &args.json {
        let mut s = serde_json::to_string_pretty(&c.to_json())?;
        s.push('\n');
        write_atomic(p, s.as_bytes())?;
    }
    if let Some(p) = &args.html {
        write_atomic(p, c.to_html().as_bytes())?;
    }
    print!("{}", c.to_text());
    Ok(())
}

fn measures_or(metrics: &[String], defaults: &[&str]) -> anyhow::Result<Vec<Measure>> {
    Ok(if metrics.is_empty() {
        Measure::parse_all(defaults)?
    } else {
        Measure::parse_all(metrics)?
    })
}

/// `convrag eval compare`, `compare-ptkb`, `compare-rewrite`.
fn run_compare(command: CompareCommand) -> anyhow::Result<()> {
    match command {
        CompareCommand::Compare {
            qrels,
            metrics,
            relevance_level,
            compare,
        } => {
            let measures = measures_or(
                &metrics,
                &["ndcg_cut.10", "map", "recip_rank", "recall.100"],
            )?;
            let q = read_qrels(&qrels)?;
            let runs = compare.read(read_run)?;
            report(
                ScoreTable::ranking(&q, &runs, &measures, relevance_level)?,
                &compare,
            )
        }
        CompareCommand::ComparePtkb {
            judged,
            metrics,
            compare,
        } => {
            let measures = measures_or(&metrics, &["ndcg_cut.3", "recip_rank", "P.1", "set_F"])?;
            let judgments = judged.judgments()?;
            let runs =
                compare.read(|run| read_ptkb_run_with_topics(run, judged.topics.as_deref()))?;
            report(ScoreTable::ptkb(&judgments, &runs, &measures)?, &compare)
        }
        CompareCommand::CompareRewrite {
            reference,
            metrics,
            stem,
            compare,
        } => {
            let measures = if metrics.is_empty() {
                RougeMeasure::all()
            } else {
                metrics
                    .iter()
                    .map(|m| RougeMeasure::parse(m))
                    .collect::<Result<_, _>>()?
            };
            let refs = read_texts(&reference, TextRole::ReferenceRewrite)?;
            let runs = compare.read(|p| read_texts(p, TextRole::RunRewrite))?;
            report(
                ScoreTable::rewrite(&refs, &runs, &measures, stem)?,
                &compare,
            )
        }
    }
}

/// Runs `convrag eval ...`.
pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    match args.command {
        EvalCommand::Compare(command) => run_compare(command),
        EvalCommand::Ranking {
            qrels,
            run,
            metrics,
            relevance_level,
            complete,
            out,
        } => {
            let measures = if metrics.is_empty() {
                Measure::defaults()
            } else {
                Measure::parse_all(&metrics)?
            };
            let q = read_qrels(&qrels)?;
            let r = read_run(&run)?;
            let opts = EvalOptions {
                relevance_level,
                average_complete: complete,
            };
            let e = evaluate(&q, &r, &measures, &opts);
            let unjudged = r.iter().filter(|(qid, _)| q.get(qid).is_none()).count();
            if unjudged > 0 {
                tracing::info!(
                    "{unjudged} of {} run queries have no judgments in {} and are skipped (as trec_eval does)",
                    r.len(),
                    qrels.display()
                );
            }
            if e.num_q == 0 {
                tracing::warn!(
                    "no query of {} is judged in {}",
                    run.display(),
                    qrels.display()
                );
            }
            emit(&out, e.to_trec_text(out.per_query), e.to_json())
        }
        EvalCommand::Ptkb {
            judged,
            run,
            metrics,
            out,
        } => {
            let measures = if metrics.is_empty() {
                default_measures()
            } else {
                Measure::parse_all(&metrics)?
            };
            let judgments = judged.judgments()?;
            let r = read_ptkb_run_with_topics(&run, judged.topics.as_deref())?;
            let rep = evaluate_ptkb(&judgments, &r, &measures);
            emit(&out, rep.to_text(out.per_query), rep.to_json())
        }
        EvalCommand::Rewrite {
            reference,
            run,
            stem,
            out,
        } => {
            let refs = read_texts(&reference, TextRole::ReferenceRewrite)?;
            let preds = read_texts(&run, TextRole::RunRewrite)?;
            let rep = evaluate_rewrites(&refs, &preds, stem);
            emit(&out, rep.to_text(out.per_query), rep.to_json())
        }
        EvalCommand::Answers {
            reference,
            run,
            rag,
            out,
        } => {
            if let Some(rag) = rag {
                let rep = answer_stats_file(&rag)?;
                return emit(&out, rep.to_text(out.per_query), rep.to_json());
            }
            let (Some(reference), Some(run)) = (reference, run) else {
                return Err(EvalError::Usage("give --reference and --run, or --rag".into()).into());
            };
            let refs = read_texts(&reference, TextRole::ReferenceAnswer)?;
            let preds = read_texts(&run, TextRole::RunAnswer)?;
            let rep = evaluate_answers(&refs, &preds);
            emit(&out, rep.to_text(out.per_query), rep.to_json())
        }
        EvalCommand::Poleval {
            expected,
            out,
            input,
            output,
        } => {
            let rep = evaluate_poleval(&expected, &out, input.as_deref())?;
            emit(&output, rep.to_text(output.per_query), rep.to_json())
        }
    }
}
