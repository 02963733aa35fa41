// Browser clients on another origin (openai-node with dangerouslyAllowBrowser, a chat app's
// direct connection, an MCP client in a page): a page served from a second loopback port calls
// the server's /v1/models, /v1/chat/completions and /mcp (initialize) with a bearer token through
// fetch, in Debian's chromium. From an origin in CONVRAG_CORS_ORIGINS every call is answered and
// readable (the conversation header too); from any other origin the browser blocks each call
// (fetch throws) and nothing reaches the server (no conversation is stored).
//
// Environment (scripts/ui-test.sh): CONVRAG_UI_URL, CONVRAG_UI_CORS_TOKEN (a user of its own),
// CONVRAG_UI_COLLECTION, CONVRAG_UI_CORS_ALLOWED_PORT (the server was started with
// CONVRAG_CORS_ORIGINS=http://127.0.0.1:<that port>), CONVRAG_UI_CORS_BLOCKED_PORT (a port of no
// configured origin), CHROMIUM.

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { chromium } from "playwright-core";

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the browser tests through scripts/ui-test.sh`);
  return value;
}

const BASE = required("CONVRAG_UI_URL").replace(/\/$/, "");
const TOKEN = required("CONVRAG_UI_CORS_TOKEN");
const COLLECTION = process.env.CONVRAG_UI_COLLECTION || "diet";
const ALLOWED_PORT = Number(required("CONVRAG_UI_CORS_ALLOWED_PORT"));
const BLOCKED_PORT = Number(required("CONVRAG_UI_CORS_BLOCKED_PORT"));
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
// A chat completion with the tiny test LLM on a busy 2-core machine.
const CALL_TIMEOUT = 240_000;

// The other origin's page: its script calls convrag as a browser-side client does.
const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Another app</title></head>
<body><h1>Another app</h1>
<script>
async function attempt(name, url, init) {
  try {
    const response = await fetch(url, init);
    return {
      name, reached: true, status: response.status, body: await response.text(),
      conversation: response.headers.get("x-convrag-conversation-id"),
    };
  } catch (error) {
    return { name, reached: false, error: String(error) };
  }
}

window.callConvrag = async (base, token, model) => {
  const auth = { Authorization: "Bearer " + token };
  const json = { ...auth, "Content-Type": "application/json" };
  return [
    await attempt("models", base + "/v1/models", { headers: auth }),
    await attempt("chat", base + "/v1/chat/completions", {
      method: "POST", headers: json,
      body: JSON.stringify({ model, max_tokens: 30,
        messages: [{ role: "user", content: "What is a quick vegetarian dinner?" }] }),
    }),
    await attempt("mcp", base + "/mcp", {
      method: "POST",
      headers: { ...json, Accept: "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {},
          clientInfo: { name: "another-app", version: "1.0.0" } } }),
    }),
  ];
};
</script></body></html>`;

/** Serves the page on 127.0.0.1:`port`. */
function pageServer(port) {
  const server = createServer((request, response) => {
    response.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
    response.end(PAGE);
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(server));
  });
}

/** The user's conversations, asked without any Origin (as the server sees them). */
async function conversations() {
  const response = await fetch(BASE + "/v1/conversations", { headers: { Authorization: `Bearer ${TOKEN}` } });
  assert.equal(response.status, 200);
  return (await response.json()).conversations;
}

/** A JSON-RPC answer sent as JSON or as one server-sent event. */
function rpcAnswer(text) {
  const data = text.trimStart().startsWith("{")
    ? text
    : text.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5)).join("\n");
  return JSON.parse(data);
}

let browser;
const servers = [];

async function callFrom(port) {
  const page = await browser.newPage();
  try {
    const origin = `http://127.0.0.1:${port}`;
    await page.goto(origin + "/");
    assert.equal(await page.evaluate(() => location.origin), origin);
    assert.notEqual(origin, new URL(BASE).origin, "the page is on another origin than the server");
    return await page.evaluate(([base, token, model]) => window.callConvrag(base, token, model), [BASE, TOKEN, COLLECTION]);
  } finally {
    await page.close();
  }
}

describe("calls from a page on another origin", { timeout: 2 * CALL_TIMEOUT }, () => {
  before(async () => {
    servers.push(await pageServer(ALLOWED_PORT), await pageServer(BLOCKED_PORT));
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    });
  });

  after(async () => {
    if (browser) await browser.close();
    for (const server of servers) server.close();
  });

  it("are blocked by the browser when the origin is not configured, and reach nothing", async () => {
    const before = await conversations();
    const results = await callFrom(BLOCKED_PORT);
    assert.deepEqual(results.map((r) => r.name), ["models", "chat", "mcp"]);
    for (const result of results) {
      assert.equal(result.reached, false, `${result.name} was answered to an origin not configured: ${JSON.stringify(result)}`);
      assert.match(result.error, /TypeError/, result.name);
    }
    // The preflight was refused, so the completion itself was never sent.
    assert.deepEqual(await conversations(), before, "a blocked completion stored a conversation");
  });

  it("are answered and readable when the origin is configured", async () => {
    const [models, chat, mcp] = await callFrom(ALLOWED_PORT);

    assert.equal(models.reached, true, JSON.stringify(models));
    assert.equal(models.status, 200, models.body);
    assert.ok(JSON.parse(models.body).data.some((m) => m.id === COLLECTION), models.body);

    assert.equal(chat.reached, true, JSON.stringify(chat));
    assert.equal(chat.status, 200, chat.body);
    const completion = JSON.parse(chat.body);
    assert.equal(completion.object, "chat.completion");
    assert.ok(completion.choices[0].message.content.trim(), chat.body);
    // The exposed header names the stored conversation.
    assert.equal(chat.conversation, completion.convrag.conversation_id);
    assert.ok((await conversations()).some((c) => c.id === chat.conversation));

    assert.equal(mcp.reached, true, JSON.stringify(mcp));
    assert.equal(mcp.status, 200, mcp.body);
    const initialized = rpcAnswer(mcp.body);
    assert.equal(initialized.id, 1);
    assert.ok(initialized.result.serverInfo.name, mcp.body);
  });
});
