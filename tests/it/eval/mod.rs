//! Evaluation: trec_eval-compatible measures, PTKB, ROUGE, answers and run comparisons.

mod answers;
mod compare;
mod ikat_topics;
mod ptkb;
mod ranking;
mod rouge;
