//! The turn pipeline stages on real topics, generation with and without the LLM, tuning.

mod generate_fallback;
mod generate_llm_server;
mod manual_questions;
mod ptkb_ikat;
mod ptkb_small;
mod ptkb_zero_shot;
mod rewrite_rouge;
mod tune;
