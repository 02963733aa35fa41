//! The batch tasks and the dispatch to each task's planning (its own module: [`super::ikat`],
//! [`super::trec_rag`], [`super::qrecc`], [`super::poleval`]), which builds on what
//! [`super::plan`] shares.

use super::ikat::IkatOptions;
use super::plan::PlannedRun;
use super::poleval::PolevalOptions;
use super::qrecc::QreccOptions;
use super::trec_rag::TrecRagOptions;
use super::Result;
use crate::service::TurnService;

/// A batch run's task with its options (each task's options and planning live in its module).
#[derive(Debug, Clone)]
pub enum RunOptions {
    Ikat(IkatOptions),
    TrecRag(TrecRagOptions),
    Qrecc(QreccOptions),
    Poleval(PolevalOptions),
}

/// Checks `options` against the inputs and the installed model and plans the run.
pub fn plan(service: &TurnService, options: RunOptions) -> Result<PlannedRun> {
    match options {
        RunOptions::Ikat(a) => super::ikat::plan(service, a),
        RunOptions::TrecRag(a) => super::trec_rag::plan(service, a),
        RunOptions::Qrecc(a) => super::qrecc::plan(service, a),
        RunOptions::Poleval(a) => super::poleval::plan(service, a),
    }
}
