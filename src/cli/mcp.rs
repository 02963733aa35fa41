//! `convrag mcp`: the MCP stdio transport, as a bridge to a running server's `POST /mcp`. Each
//! line on stdin is one JSON-RPC message; each reply is written to stdout as one line. The tools
//! therefore exist once, in the server; this process holds no state.

use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use convrag::config::Config;
use convrag::mcp::{classify, Message, RpcError, INTERNAL_ERROR};

#[derive(Debug, Args)]
pub struct McpArgs {
    /// The convrag server (default: http://<bind> of the configuration).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// A convrag user token (as for the HTTP API).
    #[arg(
        long,
        env = "CONVRAG_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: String,
}

/// The `/mcp` endpoint of a server URL (`http://host:port` or `.../mcp`).
pub fn endpoint(url: &str) -> String {
    let url = url.trim_end_matches('/');
    if url.ends_with("/mcp") {
        url.to_string()
    } else {
        format!("{url}/mcp")
    }
}

pub fn run(config: &Config, args: McpArgs) -> anyhow::Result<()> {
    let url = endpoint(
        &args
            .url
            .unwrap_or_else(|| format!("http://{}", config.bind)),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(bridge(&url, &args.token))
}

async fn bridge(url: &str, token: &str) -> anyhow::Result<()> {
    // A turn with a local LLM can take minutes.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .context("building the HTTP client")?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    while let Some(line) = lines.next_line().await.context("reading stdin")? {
        if line.trim().is_empty() {
            continue;
        }
        if let Some(reply) = forward(&http, url, token, &line).await {
            let mut out = reply.to_string();
            out.push('\n');
            stdout
                .write_all(out.as_bytes())
                .await
                .context("writing stdout")?;
            stdout.flush().await.context("writing stdout")?;
        }
    }
    Ok(())
}

/// Sends one message to the server; the reply to write, if any. Transport failures become
/// JSON-RPC errors of the request, so the client sees why.
async fn forward(http: &reqwest::Client, url: &str, token: &str, line: &str) -> Option<Value> {
    let request_id = serde_json::from_str::<Value>(line)
        .ok()
        .and_then(|m| match classify(&m) {
            Message::Request { id, .. } => Some(id),
            _ => None,
        });
    let failure = |message: String| {
        eprintln!("convrag mcp: {message}");
        request_id
            .clone()
            .map(|id| RpcError::new(INTERNAL_ERROR, message).response(id))
    };
    let response = match http
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(line.to_string())
        .send()
        .await
    {
        Ok(r) => r,
        Err(e) => return failure(format!("cannot reach {url}: {e}")),
    };
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    if status == reqwest::StatusCode::ACCEPTED {
        return None;
    }
    match serde_json::from_str::<Value>(&body) {
        Ok(reply) if reply.is_array() || reply.get("jsonrpc").is_some() => Some(reply),
        _ => failure(format!("{url} answered {status}: {}", body.trim())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn endpoints() {
        assert_eq!(
            endpoint("http://127.0.0.1:8080"),
            "http://127.0.0.1:8080/mcp"
        );
        assert_eq!(endpoint("http://h:1/"), "http://h:1/mcp");
        assert_eq!(endpoint("http://h:1/mcp"), "http://h:1/mcp");
    }

    #[test]
    fn unreachable_server_is_a_jsonrpc_error() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // Port 9 (discard) on loopback: nothing listens there.
        let reply = rt.block_on(forward(
            &reqwest::Client::new(),
            "http://127.0.0.1:9/mcp",
            "t",
            &json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}).to_string(),
        ));
        let reply = reply.expect("a request gets an error reply");
        assert_eq!(reply["id"], 4);
        assert_eq!(reply["error"]["code"], INTERNAL_ERROR);
        let none = rt.block_on(forward(
            &reqwest::Client::new(),
            "http://127.0.0.1:9/mcp",
            "t",
            r#"{"jsonrpc": "2.0", "method": "notifications/initialized"}"#,
        ));
        assert!(none.is_none());
    }
}
