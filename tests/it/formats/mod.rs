//! Official file formats: readers, writers and validators against golden files.

mod golden;
mod ikat25;
mod malformed;
mod real_data;
mod words;
