//! First-stage dense retrieval: `convrag embed`, the vector files and their sums, dense and
//! hybrid retrieval.

mod embed;
mod search;
