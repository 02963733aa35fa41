//! Helpers every area's tests share: the public data sets beside the repository, the checked-in
//! golden files, `convrag serve` processes of the binary under test and copies of directories.

mod files;
mod golden;
mod serve_process;
mod shared_data;

pub use files::{copy_dir, fixture};
pub use golden::{golden, golden_path, golden_text};
pub use serve_process::{serve_command, ServeProcess};
pub use shared_data::shared_data;
