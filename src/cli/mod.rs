//! Command-line layers of the binary: argument parsing, progress bars and printing over the
//! library's domain code.

pub mod bench;
pub mod run;
