//! The HTTP API, OpenAI-compatible chat and MCP over real HTTP against a real server.

mod abuse;
mod accounts;
mod chat_admission;
mod collections;
mod embeddings;
mod errors;
mod first_run;
mod foundation;
mod limits;
mod mcp;
pub(crate) mod openai;
mod responses;
mod retrieval;
mod runs;
mod search_query;
pub(crate) mod turns;
mod ui_assets;
mod uploads;
