//! Batch runs: submission files against golden files, resume, workers and leases.

mod golden;
mod ikat25;
mod interactive;
mod leases;
mod real_data;
mod resume;
mod retrieval;
mod workers;
