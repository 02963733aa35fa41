//! `convrag tune ...`: fits the learned parts of the pipeline on training topics, with
//! topic-level cross-validation, writes the weights the code ships as its defaults, and measures
//! held-out sets (library half: `convrag::tune`).
//!
//! Reproduce the committed weights:
//! ```text
//! convrag tune rewrite \
//!   --train ../shared/data/ikat/official/2023_train_topics.json \
//!   --train ../shared/data/trec-cast/2019/evaluation_topics_v1.0.json=../shared/data/trec-cast/2019/evaluation_topics_annotated_resolved_v1.0.tsv \
//!   --report ../shared/data/ikat/official/2023_test_topics.json \
//!   --report ../shared/data/trec-cast/2020/2020_manual_evaluation_topics_v1.0.json \
//!   --output src/pipeline/weights/rewrite_terms.json
//! convrag tune extractive \
//!   --train ../shared/data/ikat/official/2023_train_topics.json=../shared/data/ikat/official/2023_train_topics_psg_text.jsonl \
//!   --report ../shared/data/ikat/official/2023_test_topics.json=../shared/data/ikat/official/2023_test_topics_psg_text.jsonl \
//!   --output src/pipeline/weights/extractive_stop.json
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use convrag::collection::{read_file, Format, Item, ReadOptions};
use convrag::eval::measures::Measure;
use convrag::eval::ptkb::{evaluate_ptkb, read_ptkb_judgments};
use convrag::eval::rewrite::{read_texts, TextRole};
use convrag::eval::trec::{Qrels, Run};
use convrag::formats::atomic::write_atomic;
use convrag::formats::ikat::{IkatTopic, RunType};
use convrag::formats::topics::read_conversations;
use convrag::pipeline::generate::{ExtractiveConfig, WordLimit};
use convrag::pipeline::ptkb::{default_ranker, statement_feature_names, TextSimilarity};
use convrag::pipeline::ptkb::{embedded_similarity, EmbeddedSimilarity, ModelSimilarity};
use convrag::pipeline::ptkb_calibrated::calibrated_feature_names;
use convrag::rerank::{QueryVectors, Reranker};
use convrag::tune::answers::{
    add_sentence_meaning, answer_examples, default_grid, default_meaning_weights, evaluate_answers,
    tune_meaning, tune_stopping, AnswerExample, AnswerMeans,
};
use convrag::tune::ptkb_selection::{
    model_probabilities, selection_figures, selection_turns, small_ptkb_turns, tune_prior_shift,
    tune_selection, SelectionFigures, SelectionGrid, SelectionTurn, SmallPtkbFile, TrainOn,
};
use convrag::tune::ptkb_transfer::{
    correction_wins, transfer_direction, transfer_turns, TransferTurn,
};
use convrag::tune::rewrite_ptkb::{
    evaluate_rewrite, ptkb_figures, ptkb_turns, rewrite_examples, tune_ptkb, tune_rewrite,
    PtkbFigures, PtkbTurn, RewriteExample, RewriteGrid, RewriteObjective, RougeMeans,
};
use convrag::tune::topics::rank_topics;
use convrag::Config;

use super::progress::Bar;

#[derive(Debug, Args)]
pub struct TuneArgs {
    #[command(subcommand)]
    pub command: TuneCommand,
}

#[derive(Debug, Subcommand)]
pub enum TuneCommand {
    /// Fit the learned history-term selector of the rewriter.
    Rewrite(TuneRewriteArgs),
    /// Fit the learned PTKB statement ranker (with or without the bi-encoder).
    Ptkb(TunePtkbArgs),
    /// Fit the calibrated PTKB ranker that abstains (served by default) and print its
    /// cross-validated ranking and selection figures.
    PtkbSelection(TunePtkbSelectionArgs),
    /// Check whether a correction fitted on top of the zero-shot PTKB ranking transfers: fit on
    /// each of two topic sets, rank the other, base against fitted under every label source.
    PtkbTransfer(TunePtkbTransferArgs),
    /// Fit where the extractive answer stops (its marginal-relevance threshold) against the
    /// topics' written responses.
    Extractive(TuneExtractiveArgs),
}

#[derive(Debug, Args)]
pub struct TuneExtractiveArgs {
    /// Training `TOPICS=PASSAGES`: iKAT topics with responses and the JSONL text of their
    /// provenance passages (`2023_*_topics_psg_text.jsonl`). Repeatable. Only these are fitted on.
    #[arg(long, required = true)]
    pub train: Vec<String>,
    /// Held-out `TOPICS=PASSAGES` to measure (never fitted on). Repeatable.
    #[arg(long)]
    pub report: Vec<String>,
    /// Cross-validation folds (by topic).
    #[arg(long, default_value_t = 5)]
    pub folds: usize,
    /// Where to write the fitted rule (JSON); without it only the figures are printed.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Also write the figures as JSON here.
    #[arg(long)]
    pub report_json: Option<PathBuf>,
    /// Also choose how much a reader's answer weighs a sentence's closeness in meaning to the
    /// question (`READER_MEANING_WEIGHT`), by the installed bi-encoder (scripts/fetch-models.sh).
    #[arg(long)]
    pub meaning: bool,
    /// Hide the progress bar.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct TunePtkbArgs {
    /// Training topics (iKAT), optionally `TOPICS=JUDGMENTS` (PTKB qrels); without judgments the
    /// topics' `ptkb_provenance` is used. Repeatable. Only these are fitted on.
    #[arg(long, required = true)]
    pub train: Vec<String>,
    /// Held-out `TOPICS[=JUDGMENTS]` to measure (never fitted on). Repeatable.
    #[arg(long)]
    pub report: Vec<String>,
    /// Use the bi-encoder (the installed reranking model) as well as lexical features.
    #[arg(long)]
    pub neural: bool,
    /// Cross-validation folds (by topic).
    #[arg(long, default_value_t = 5)]
    pub folds: usize,
    /// Where to write the fitted model (JSON).
    #[arg(long)]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TunePtkbSelectionArgs {
    /// Training topics (iKAT; labels from each turn's `ptkb_provenance`, every turn judged).
    /// Repeatable: all are fitted on together, cross-validated by topic.
    #[arg(long, required = true)]
    pub train: Vec<PathBuf>,
    /// Further PTKB qrels (such as NIST's) to measure the cross-validated ranking against.
    #[arg(long)]
    pub qrels: Vec<PathBuf>,
    /// Use the bi-encoder (the installed reranking model) as well as lexical features.
    #[arg(long)]
    pub neural: bool,
    /// Cross-validation folds (by topic).
    #[arg(long, default_value_t = 5)]
    pub folds: usize,
    /// A cache of the turns' features (the bi-encoder is slow): read when it exists and was
    /// written for the same `--train` and `--neural`, else written.
    #[arg(long)]
    pub features: Option<PathBuf>,
    /// Fit only on turns whose provenance lists a statement (all turns are still measured).
    #[arg(long)]
    pub judged_only: bool,
    /// Made-up small-PTKB development turns (the format of `tests/fixtures/ptkb/small_dev.json`):
    /// the prior shift from iKAT's large PTKBs to small ones is chosen on them. Without it, none.
    #[arg(long)]
    pub dev: Option<PathBuf>,
    /// Where to write the fitted model (JSON).
    #[arg(long)]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TunePtkbTransferArgs {
    /// Exactly two `TOPICS[=QRELS]` sets written by different people (iKAT 2023 train and test):
    /// the correction is fitted on each set's `ptkb_provenance` and measured on the other's, and
    /// against the other's `QRELS` too when given (NIST's).
    #[arg(long, required = true, num_args = 1)]
    pub split: Vec<String>,
    /// L2 penalty of the correction (not tuned: a tuned one would need a third set).
    #[arg(long, default_value_t = 10.0)]
    pub l2: f64,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ObjectiveArg {
    Recall,
    F1,
    F2,
}

#[derive(Debug, Args)]
pub struct TuneRewriteArgs {
    /// Training topics (iKAT or CAsT), optionally `TOPICS=REFERENCES` when the manual rewrites
    /// are in another file (CAsT 2019's resolved TSV). Repeatable. Only these are fitted on.
    #[arg(long, required = true)]
    pub train: Vec<String>,
    /// Held-out topics to measure (never fitted on), same syntax. Repeatable.
    #[arg(long)]
    pub report: Vec<String>,
    /// Cross-validation folds (by topic; the personas of an iKAT topic share a fold).
    #[arg(long, default_value_t = 5)]
    pub folds: usize,
    /// What the cross-validation maximizes.
    #[arg(long, value_enum, default_value_t = ObjectiveArg::F2)]
    pub objective: ObjectiveArg,
    /// Where to write the fitted selector (JSON); without it only the figures are printed.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Also write the figures as JSON here.
    #[arg(long)]
    pub report_json: Option<PathBuf>,
}

pub fn run(config: &Config, args: TuneArgs) -> anyhow::Result<()> {
    match args.command {
        TuneCommand::Rewrite(a) => run_rewrite(a),
        TuneCommand::Ptkb(a) => run_ptkb(config, a),
        TuneCommand::PtkbSelection(a) => run_ptkb_selection(config, a),
        TuneCommand::PtkbTransfer(a) => run_ptkb_transfer(config, a),
        TuneCommand::Extractive(a) => run_extractive(config, a),
    }
}

/// `TOPICS[=JUDGMENTS]`: the topics and their PTKB judgments.
fn ptkb_set(
    spec: &str,
    similarity: Option<&dyn TextSimilarity>,
) -> anyhow::Result<(Vec<IkatTopic>, Vec<PtkbTurn>, Qrels)> {
    let (topics, judgments) = match spec.split_once('=') {
        Some((t, j)) => (Path::new(t), Path::new(j)),
        None => (Path::new(spec), Path::new(spec)),
    };
    let conversations = read_conversations(topics)
        .with_context(|| format!("reading topics {}", topics.display()))?;
    let qrels = read_ptkb_judgments(judgments)
        .with_context(|| format!("reading judgments {}", judgments.display()))?;
    let bar = Bar::items("turns", false);
    let turns = ptkb_turns(&conversations, similarity, &bar)?;
    Ok((conversations, turns, qrels))
}

fn ptkb_row(name: &str, f: &PtkbFigures) -> String {
    format!(
        "  {name:<28} nDCG@3 {:.4}  MRR {:.4}  set F1 {:.4}  ({} judged turns)",
        f.ndcg_cut_3, f.recip_rank, f.set_f, f.judged_turns
    )
}

/// Figures of the old lexical default ranker ([`default_ranker`]) on a set, for comparison.
fn lexical_baseline(topics: &[IkatTopic], qrels: &Qrels) -> anyhow::Result<PtkbFigures> {
    let rankings = rank_topics(topics, RunType::Automatic, &default_ranker())?;
    let run = |selected: bool| {
        Run::from_rankings(rankings.iter().map(|(k, r)| {
            let ids = r
                .statements
                .iter()
                .filter(|s| !selected || s.selected)
                .map(|s| s.id.clone())
                .collect::<Vec<_>>();
            (k.clone(), ids)
        }))
    };
    let measures = Measure::parse_all(&["ndcg_cut.3", "recip_rank", "set_F"])?;
    let r = evaluate_ptkb(qrels, &run(false), &measures);
    let s = evaluate_ptkb(qrels, &run(true), &measures);
    Ok(PtkbFigures {
        ndcg_cut_3: r.evaluation.get("ndcg_cut_3").unwrap_or(0.0),
        recip_rank: r.evaluation.get("recip_rank").unwrap_or(0.0),
        set_f: s.evaluation.get("set_F").unwrap_or(0.0),
        judged_turns: r.judged_turns,
    })
}

/// The bi-encoder for `--neural` PTKB tuning, its embeddings kept by text for the whole run: a
/// statement recurs in every turn of its conversation, and the cosines are those a served turn
/// computes (`pipeline::ptkb::embedded_similarity`), each text encoded once.
struct TuningSimilarity {
    model: Option<(ModelSimilarity, QueryVectors)>,
}

impl TuningSimilarity {
    fn load(config: &Config, neural: bool) -> anyhow::Result<Self> {
        if !neural {
            return Ok(Self { model: None });
        }
        let model = convrag::dense::load_default(config)
            .context("--neural: no reranking model could be loaded (scripts/fetch-models.sh)")?;
        Ok(Self {
            model: Some((ModelSimilarity(model.clone()), QueryVectors::new(model))),
        })
    }

    /// `None` without `--neural`.
    fn as_similarity(&self) -> Option<EmbeddedSimilarity<'_>> {
        let (model, vectors) = self.model.as_ref()?;
        embedded_similarity(Some(model as &dyn TextSimilarity), vectors)
    }
}

fn run_ptkb(config: &Config, args: TunePtkbArgs) -> anyhow::Result<()> {
    let similarity = TuningSimilarity::load(config, args.neural)?;
    let embedded = similarity.as_similarity();
    let sim = embedded.as_ref().map(|s| s as &dyn TextSimilarity);
    let names = statement_feature_names(args.neural);
    let mut turns = Vec::new();
    let mut qrels = Qrels::default();
    for spec in &args.train {
        let (_, t, q) = ptkb_set(spec, sim)?;
        turns.extend(t);
        for (qid, judged) in q.queries {
            qrels.queries.insert(qid, judged);
        }
    }
    let tuning = tune_ptkb(&turns, &qrels, &names, args.folds)?;
    println!(
        "training: {} judged turns, {} statements ({} relevant), {}-fold by topic; l2 {}, selection threshold {}",
        tuning.training_turns, tuning.examples, tuning.positives, tuning.folds, tuning.l2, tuning.model.threshold
    );
    println!("{}", ptkb_row("learned (cross-validated)", &tuning.cv));
    for spec in &args.report {
        let (topics, t, q) = ptkb_set(spec, sim)?;
        let refs: Vec<&PtkbTurn> = t.iter().collect();
        println!("held out {spec}:");
        println!(
            "{}",
            ptkb_row("lexical default", &lexical_baseline(&topics, &q)?)
        );
        println!(
            "{}",
            ptkb_row("learned", &ptkb_figures(&refs, &tuning.model, &q))
        );
    }
    if let Some(path) = &args.output {
        let mut json = serde_json::to_string_pretty(&tuning.model)?;
        json.push('\n');
        write_atomic(path, json.as_bytes())?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// `convrag tune ptkb-transfer`.
fn run_ptkb_transfer(config: &Config, args: TunePtkbTransferArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.split.len() == 2,
        "--split: give exactly two topic sets"
    );
    let similarity = TuningSimilarity::load(config, true)?;
    let embedded = similarity.as_similarity().context("the bi-encoder")?;
    struct Split {
        name: String,
        turns: Vec<TransferTurn>,
        /// The topics' `ptkb_provenance` first, then `QRELS`.
        labels: Vec<(String, Qrels)>,
    }
    let mut splits = Vec::new();
    for spec in &args.split {
        let (topics, extra) = match spec.split_once('=') {
            Some((t, q)) => (Path::new(t), Some(Path::new(q))),
            None => (Path::new(spec), None),
        };
        let conversations = read_conversations(topics)
            .with_context(|| format!("reading topics {}", topics.display()))?;
        let file_name = |p: &Path| {
            p.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string()
        };
        let mut labels = vec![(
            "organizers' (ptkb_provenance)".to_string(),
            read_ptkb_judgments(topics)?,
        )];
        if let Some(q) = extra {
            labels.push((file_name(q), read_ptkb_judgments(q)?));
        }
        let turns = transfer_turns(&conversations, &embedded, &Bar::items("turns", false))?;
        splits.push(Split {
            name: file_name(topics),
            turns,
            labels,
        });
    }
    let mut figures = Vec::new();
    for (fit, report) in [(&splits[0], &splits[1]), (&splits[1], &splits[0])] {
        figures.extend(transfer_direction(
            (&fit.name, &fit.turns, &fit.labels[0].1),
            (&report.name, &report.turns),
            &report.labels,
            args.l2,
        )?);
    }
    println!(
        "nDCG@3 of every statement ranked (fitted with l2 {}):",
        args.l2
    );
    for f in &figures {
        println!(
            "  fit {} -> {}, labels {} ({} turns): zero-shot base {:.4}, fitted {:.4} ({:+.4})",
            f.fitted_on,
            f.measured_on,
            f.labels,
            f.judged_turns,
            f.base,
            f.fitted,
            f.fitted - f.base
        );
    }
    if correction_wins(&figures) {
        println!("serve: the fitted correction (it beats the base everywhere)");
    } else {
        println!("serve: the zero-shot base (the correction does not beat it everywhere)");
    }
    Ok(())
}

fn selection_row(name: &str, f: &SelectionFigures) -> String {
    let ndcg: Vec<String> = f
        .ndcg_cut_3
        .iter()
        .map(|(q, v, n)| format!("{q} {v:.4} ({n})"))
        .collect();
    format!(
        "  {name:<34} nDCG@3 {}\n  {:<34} set P/R/F1 {:.4} / {:.4} / {:.4}  micro P/R/F1 {:.4} / {:.4} / {:.4}  abstained {:.3} of {} nothing-relevant turns ({} turns)",
        ndcg.join(", "),
        "",
        f.set_p,
        f.set_recall,
        f.set_f,
        f.micro_p,
        f.micro_recall,
        f.micro_f,
        f.abstained,
        f.nothing_relevant_turns,
        f.turns
    )
}

/// What a `--features` file holds: the features of the turns of these training files.
#[derive(serde::Serialize, serde::Deserialize)]
struct FeatureFile {
    train: Vec<PathBuf>,
    neural: bool,
    turns: Vec<SelectionTurn>,
}

/// The training turns' features: read from `--features` when that file was written for the same
/// `--train` and `--neural`, else computed (and written there).
fn selection_features(
    args: &TunePtkbSelectionArgs,
    sim: Option<&dyn TextSimilarity>,
) -> anyhow::Result<Vec<SelectionTurn>> {
    if let Some(path) = args.features.as_ref().filter(|p| p.exists()) {
        let file: FeatureFile = serde_json::from_str(&std::fs::read_to_string(path)?)
            .with_context(|| format!("reading features {}", path.display()))?;
        anyhow::ensure!(
            file.train == args.train && file.neural == args.neural,
            "{}: features of other training files or another --neural; delete it",
            path.display()
        );
        return Ok(file.turns);
    }
    let mut turns: Vec<SelectionTurn> = Vec::new();
    for (set, path) in args.train.iter().enumerate() {
        let topics = read_conversations(path)
            .with_context(|| format!("reading topics {}", path.display()))?;
        turns.extend(selection_turns(
            &topics,
            sim,
            set,
            &Bar::items("turns", false),
        )?);
    }
    if let Some(path) = &args.features {
        let file = FeatureFile {
            train: args.train.clone(),
            neural: args.neural,
            turns,
        };
        write_atomic(path, serde_json::to_string(&file)?.as_bytes())?;
        return Ok(file.turns);
    }
    Ok(turns)
}

fn run_ptkb_selection(config: &Config, args: TunePtkbSelectionArgs) -> anyhow::Result<()> {
    let similarity = TuningSimilarity::load(config, args.neural)?;
    let embedded = similarity.as_similarity();
    let sim = embedded.as_ref().map(|s| s as &dyn TextSimilarity);
    let names = calibrated_feature_names(args.neural);
    let turns = selection_features(&args, sim)?;
    let extra: Vec<(String, Qrels)> = args
        .qrels
        .iter()
        .map(|p| {
            let q = read_ptkb_judgments(p)
                .with_context(|| format!("reading judgments {}", p.display()))?;
            let name = p
                .file_stem()
                .map_or("qrels".into(), |s| s.to_string_lossy().into_owned());
            Ok((name, q))
        })
        .collect::<anyhow::Result<_>>()?;
    let extra_refs: Vec<(String, &Qrels)> = extra.iter().map(|(n, q)| (n.clone(), q)).collect();
    let grid = SelectionGrid {
        train_on: if args.judged_only {
            TrainOn::JudgedTurns
        } else {
            TrainOn::AllTurns
        },
        ..SelectionGrid::default()
    };
    let mut tuning = tune_selection(&turns, &names, args.folds, &grid)?;
    println!(
        "training: {} turns, {} statements ({} relevant), {}-fold by topic; l2 {}, CV log loss {:.4}, threshold {}",
        tuning.turns, tuning.statements, tuning.positives, tuning.folds, tuning.l2, tuning.log_loss, tuning.model.threshold
    );
    if let Some(path) = &args.dev {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading development turns {}", path.display()))?;
        let file: SmallPtkbFile = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}:{}: invalid development turns: {e}",
                path.display(),
                e.line()
            )
        })?;
        let dev = small_ptkb_turns(&file, sim).with_context(|| path.display().to_string())?;
        let (shift, by_shift) = tune_prior_shift(&tuning.model, &dev, &grid.prior_shifts);
        for f in &by_shift {
            println!(
                "  prior shift {:.2}: development micro P/R/F1 {:.4} / {:.4} / {:.4}, selected in {} nothing-relevant turns",
                f.prior_shift, f.micro_p, f.micro_recall, f.micro_f, f.selected_where_none
            );
        }
        println!(
            "prior shift {shift} (development turns: {}, {} statements)",
            dev.len(),
            dev.iter().map(|t| t.ids.len()).sum::<usize>()
        );
        tuning.model.prior_shift = shift;
    }
    let figures = |set: Option<usize>, probs: &[Vec<f64>], threshold: f64| {
        let (ts, ps): (Vec<&SelectionTurn>, Vec<&[f64]>) = turns
            .iter()
            .zip(probs)
            .filter(|(t, _)| set.is_none_or(|s| t.set == s))
            .map(|(t, p)| (t, p.as_slice()))
            .unzip();
        selection_figures(&ts, &ps, threshold, &extra_refs)
    };
    for (threshold, p, r, f) in &tuning.by_threshold {
        println!(
            "  threshold {threshold:.2}: CV micro P/R/F1 over all turns {p:.4} / {r:.4} / {f:.4}"
        );
    }
    let t = tuning.model.threshold;
    println!(
        "{}",
        selection_row(
            "cross-validated, all sets",
            &figures(None, &tuning.cv_probabilities, t)
        )
    );
    if tuning.model.prior_shift != 0.0 {
        println!(
            "{}",
            selection_row(
                "cross-validated, prior shift",
                &figures(
                    None,
                    &tuning.cv_probabilities_shifted(tuning.model.prior_shift),
                    t
                )
            )
        );
    }
    for (set, path) in args.train.iter().enumerate() {
        let name = format!(
            "cross-validated, {}",
            path.file_name().unwrap_or_default().to_string_lossy()
        );
        println!(
            "{}",
            selection_row(&name, &figures(Some(set), &tuning.cv_probabilities, t))
        );
    }
    if args.train.len() >= 2 {
        // Continuity: fit on the first set only, measure on the second.
        let first: Vec<SelectionTurn> = turns.iter().filter(|t| t.set == 0).cloned().collect();
        let fit = tune_selection(&first, &names, args.folds, &grid)?;
        let second: Vec<&SelectionTurn> = turns.iter().filter(|t| t.set == 1).collect();
        let probs = model_probabilities(&second, &fit.model);
        let prob_refs: Vec<&[f64]> = probs.iter().map(Vec::as_slice).collect();
        println!(
            "{}",
            selection_row(
                &format!(
                    "fit on set 1 (threshold {}), test set 2",
                    fit.model.threshold
                ),
                &selection_figures(&second, &prob_refs, fit.model.threshold, &extra_refs)
            )
        );
    }
    if let Some(path) = &args.output {
        let mut json = serde_json::to_string_pretty(&tuning.model)?;
        json.push('\n');
        write_atomic(path, json.as_bytes())?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Reads `TOPICS[=REFERENCES]` into examples.
fn examples_of(spec: &str) -> anyhow::Result<Vec<RewriteExample>> {
    let (topics, references) = match spec.split_once('=') {
        Some((t, r)) => (Path::new(t), Path::new(r)),
        None => (Path::new(spec), Path::new(spec)),
    };
    let conversations = read_conversations(topics)
        .with_context(|| format!("reading topics {}", topics.display()))?;
    let refs: HashMap<String, String> = read_texts(references, TextRole::ReferenceRewrite)
        .with_context(|| format!("reading references {}", references.display()))?
        .into_iter()
        .collect();
    let examples = rewrite_examples(&conversations, &refs, &default_ranker())?;
    anyhow::ensure!(
        !examples.is_empty(),
        "{}: no turn has a reference rewrite",
        references.display()
    );
    Ok(examples)
}

fn row(name: &str, m: &RougeMeans) -> String {
    format!(
        "  {name:<28} recall {:.4}  precision {:.4}  F1 {:.4}  F2 {:.4}  tokens {:.1}",
        m.recall, m.precision, m.f1, m.f2, m.tokens
    )
}

fn run_rewrite(args: TuneRewriteArgs) -> anyhow::Result<()> {
    let mut train = Vec::new();
    for (set, spec) in args.train.iter().enumerate() {
        train.extend(
            examples_of(spec)?
                .into_iter()
                .map(|e| RewriteExample { set, ..e }),
        );
    }
    let objective = match args.objective {
        ObjectiveArg::Recall => RewriteObjective::Recall,
        ObjectiveArg::F1 => RewriteObjective::F1,
        ObjectiveArg::F2 => RewriteObjective::F2,
    };
    let bar = Bar::items("folds", false);
    let tuning = tune_rewrite(&train, args.folds, &RewriteGrid::default(), objective, &bar)?;
    println!(
        "training: {} turns, {} candidate terms ({} in the manual rewrite), {}-fold by topic",
        tuning.training_turns, tuning.training_examples, tuning.positives, tuning.folds
    );
    println!(
        "chosen by cross-validated {:?}: l2 {}, threshold {}, at most {} terms and {} more from answers",
        tuning.objective,
        tuning.best.l2,
        tuning.best.threshold,
        tuning.best.max_terms,
        tuning.best.answer_terms
    );
    println!("{}", row("raw utterance", &tuning.raw));
    println!("{}", row("decayed weights", &tuning.decayed));
    println!("{}", row("learned (cross-validated)", &tuning.best.cv));
    for ((spec, raw), cv) in args
        .train
        .iter()
        .zip(&tuning.raw_by_set)
        .zip(&tuning.best.cv_by_set)
    {
        println!("  training set {spec}:");
        println!("{}", row("  raw utterance", raw));
        println!("{}", row("  learned (cross-validated)", cv));
    }
    for (k, m) in &tuning.ptkb_first_person {
        println!("{}", row(&format!("  with {k} first-person PTKB"), m));
    }
    println!(
        "chosen: {} PTKB words in first-person rewrites",
        tuning.selector.ptkb_terms_first_person
    );
    let mut held_out = Vec::new();
    for spec in &args.report {
        let examples = examples_of(spec)?;
        let r = evaluate_rewrite(&examples, &tuning.selector)?;
        println!("held out {spec} ({} turns):", r.turns);
        println!("{}", row("raw utterance", &r.raw));
        println!("{}", row("decayed weights", &r.decayed));
        println!("{}", row("learned", &r.learned));
        held_out.push(serde_json::json!({"set": spec, "figures": r}));
    }
    if let Some(path) = &args.output {
        let mut json = serde_json::to_string_pretty(&tuning.selector)?;
        json.push('\n');
        write_atomic(path, json.as_bytes())?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &args.report_json {
        let report = serde_json::json!({
            "train": args.train,
            "tuning": tuning,
            "held_out": held_out,
        });
        write_atomic(path, serde_json::to_string_pretty(&report)?.as_bytes())?;
    }
    Ok(())
}

/// Reads `TOPICS=PASSAGES` into answer examples.
fn answer_set(spec: &str) -> anyhow::Result<Vec<AnswerExample>> {
    let (topics, passages) = spec
        .split_once('=')
        .with_context(|| format!("{spec}: expected TOPICS=PASSAGES"))?;
    let conversations = read_conversations(Path::new(topics))
        .with_context(|| format!("reading topics {topics}"))?;
    let mut texts = HashMap::new();
    let mut bad = None;
    read_file(
        Format::IkatPassages,
        Path::new(passages),
        &ReadOptions::default(),
        &mut |item| {
            match item {
                Item::Record { record, .. } => {
                    texts.insert(record.id, record.text);
                }
                Item::Bad(b) => {
                    bad.get_or_insert(b);
                }
            }
            Ok(())
        },
    )?;
    if let Some(b) = bad {
        anyhow::bail!("{b}");
    }
    let examples = answer_examples(
        &conversations,
        &texts,
        ExtractiveConfig::default().max_passages,
        WordLimit::IKAT,
    );
    anyhow::ensure!(
        !examples.is_empty(),
        "{spec}: no turn has a response and the text of its provenance passages"
    );
    Ok(examples)
}

fn answer_row(name: &str, m: &AnswerMeans) -> String {
    format!(
        "  {name:<30} ROUGE-1 recall {:.4}  precision {:.4}  F1 {:.4}  nugget recall {:.4}  words {:.1}  sentences {:.2}",
        m.rouge_recall, m.rouge_precision, m.rouge_f1, m.nugget_recall, m.words, m.sentences
    )
}

fn run_extractive(config: &Config, args: TuneExtractiveArgs) -> anyhow::Result<()> {
    // Before minutes of tuning: a missing model is said at once.
    let meaning_model =
        if args.meaning {
            Some(convrag::dense::load_default(config).context(
                "--meaning: no reranking model could be loaded (scripts/fetch-models.sh)",
            )?)
        } else {
            None
        };
    let mut train = Vec::new();
    for spec in &args.train {
        train.extend(answer_set(spec)?);
    }
    let base = ExtractiveConfig::default();
    let tuning = tune_stopping(&train, &base, args.folds, &default_grid())?;
    let threshold =
        |t: Option<f64>| t.map_or("none (fill the limit)".into(), |t| format!("{t:.2}"));
    let context = |keep: bool| if keep { "with context" } else { "alone" };
    println!(
        "training: {} turns, {}-fold by topic; chosen by cross-validated ROUGE-1 F1: min_marginal {}, sentences {}",
        train.len(),
        tuning.folds,
        threshold(tuning.rule.min_marginal),
        context(tuning.rule.keep_context)
    );
    for (p, m) in &tuning.grid {
        println!(
            "{}",
            answer_row(
                &format!(
                    "all train, {}, {}",
                    threshold(p.min_marginal),
                    context(p.keep_context)
                ),
                m
            )
        );
    }
    println!("{}", answer_row("fill the limit", &tuning.fill));
    println!(
        "{}",
        answer_row("stopping, alone (cross-validated)", &tuning.cv_alone)
    );
    println!("{}", answer_row("chosen (cross-validated)", &tuning.cv));
    let mut held_out = Vec::new();
    for spec in &args.report {
        let examples = answer_set(spec)?;
        let fill = evaluate_answers(
            &examples,
            &ExtractiveConfig {
                keep_context: false,
                ..base.clone()
            },
            None,
        )?;
        let chosen = ExtractiveConfig {
            keep_context: tuning.rule.keep_context,
            ..base.clone()
        };
        let stop = evaluate_answers(&examples, &chosen, tuning.rule.min_marginal)?;
        println!("held out {spec} ({} turns):", examples.len());
        println!("{}", answer_row("fill the limit", &fill));
        println!("{}", answer_row("chosen", &stop));
        held_out.push(serde_json::json!({"set": spec, "fill": fill, "stopping": stop}));
    }
    let meaning = match meaning_model {
        Some(model) => Some(run_meaning(model, &args, train, &base)?),
        None => None,
    };
    if let Some(path) = &args.output {
        let mut json = serde_json::to_string_pretty(&tuning.rule)?;
        json.push('\n');
        write_atomic(path, json.as_bytes())?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &args.report_json {
        let report = serde_json::json!({"train": args.train, "tuning": tuning,
            "held_out": held_out, "meaning": meaning});
        write_atomic(path, serde_json::to_string_pretty(&report)?.as_bytes())?;
    }
    Ok(())
}

/// `--meaning`: the reader's meaning weight chosen on `train`, and each `--report` set answered
/// with it and without meaning.
fn run_meaning(
    model: Arc<dyn Reranker>,
    args: &TuneExtractiveArgs,
    mut train: Vec<AnswerExample>,
    base: &ExtractiveConfig,
) -> anyhow::Result<serde_json::Value> {
    let vectors = QueryVectors::new(model.clone());
    let with_meaning = |examples: &mut [AnswerExample]| {
        let bar = Bar::items("turns", args.quiet).shared();
        add_sentence_meaning(examples, base, model.as_ref(), &vectors, &bar)
    };
    with_meaning(&mut train)?;
    let tuning = tune_meaning(&train, base, args.folds, &default_meaning_weights())?;
    println!(
        "reader's answers (context kept, filling the limit): meaning weight {:.1} chosen by cross-validated ROUGE-1 F1",
        tuning.weight
    );
    for (weight, m) in &tuning.grid {
        println!(
            "{}",
            answer_row(&format!("all train, meaning {weight:.1}"), m)
        );
    }
    println!("{}", answer_row("meaning (cross-validated)", &tuning.cv));
    let mut held_out = Vec::new();
    for spec in &args.report {
        let mut examples = answer_set(spec)?;
        with_meaning(&mut examples)?;
        let reader = |meaning_weight: f64| ExtractiveConfig {
            keep_context: true,
            meaning_weight,
            ..base.clone()
        };
        let without = evaluate_answers(&examples, &reader(0.0), None)?;
        let with = evaluate_answers(&examples, &reader(tuning.weight), None)?;
        println!("held out {spec}, reader's answers:");
        println!("{}", answer_row("without meaning", &without));
        println!(
            "{}",
            answer_row(&format!("meaning {:.1}", tuning.weight), &with)
        );
        held_out.push(serde_json::json!({"set": spec, "without": without, "with": with}));
    }
    Ok(serde_json::json!({"tuning": tuning, "held_out": held_out}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        command: TuneCommand,
    }

    #[test]
    fn command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
