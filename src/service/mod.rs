//! Domain services the HTTP API, the batch runner and the benchmarks share.
//!
//! * [`turns`]: [`TurnService`], the one place that assembles the turn pipeline from the
//!   configuration, resolves and validates requested settings, runs a stored turn's lifecycle
//!   (begin → context → run → commit) and searches a collection with the turn's retrieval and
//!   reranking.
//! * [`collections`]: [`CollectionService`], the collections a user sees (shared and their own
//!   private ones) and uploads into private collections, indexed in the background.
//! * [`runs`]: [`runs::RunService`], a user's stored batch runs measured against their uploaded
//!   judgments (per run, per turn, two runs compared) with `crate::eval`'s measures and tests.
//! * [`manifests`]: servers sharing a database serve only collections whose checksum
//!   manifest matches the one recorded for the name.

#[cfg(feature = "bench")]
pub mod bench;
pub mod chat;
pub mod collections;
pub mod conversations;
pub mod embeddings;
pub mod input;
pub mod manifests;
pub mod rate;
pub mod rows;
pub mod runs;
pub mod turns;
pub mod users;
pub mod vectors;

pub use collections::{
    CollectionService, CollectionServiceError, CollectionView, FileProblem, UploadedFile,
    Visibility,
};
pub use rate::{RateKind, RateLimiter};
pub use turns::{
    Admission, Begun, Filler, RequestedSettings, Result, SearchOutput, SearchRequest, ServiceError,
    SettingLimits, StartedTurn, TurnContext, TurnPassages, TurnReferences, TurnRequest,
    TurnService, WithoutVectors,
};
