//! Offline work over topic files, never part of a served turn: fitting the learned parts of the
//! pipeline (`convrag tune`) on training topics with topic-level cross-validation, and running
//! single stages over whole topic files for measurement (`convrag pipeline`, `convrag eval`).
//!
//! * [`rewrite_ptkb`]: the rewrite term selector and the PTKB statement model.
//! * [`ptkb_selection`]: the calibrated PTKB ranker that abstains (Platt scaling on folds).
//! * [`ptkb_transfer`]: whether a correction of the zero-shot PTKB ranking transfers across topic sets.
//! * [`answers`]: where the extractive answer stops.
//! * [`folds`]: cross-validation folds by topic.
//! * [`topics`]: the PTKB and rewrite stages over topic files.
//!
//! The fitted weights are committed beside the code that serves them
//! (`src/pipeline/weights/`); training topics that `../shared/data` lacks are in `training/`.

pub mod answers;
pub mod folds;
pub mod ptkb_selection;
pub mod ptkb_transfer;
pub mod rewrite_ptkb;
pub mod topics;
