//! Helpers every area's tests share: the public data sets beside the repository and the
//! checked-in golden files.

mod golden;
mod shared_data;

pub use golden::{golden, golden_path, golden_text};
pub use shared_data::shared_data;
