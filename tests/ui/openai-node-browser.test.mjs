// openai-node in a browser: a page served from another loopback port (an origin the server allows
// in CONVRAG_CORS_ORIGINS) imports the `openai` package's ESM build (served as static files from
// tests/clients/js/node_modules/openai, the version the client tests pin) and, with
// `dangerouslyAllowBrowser: true`, streams a chat completion from the server in Debian's
// chromium. Its requests carry the SDK's own headers (x-stainless-*), so the preflight must allow
// them. The text arrives in chunks; a user whose turns are used up gets the SDK's RateLimitError
// (a real 429 before any stream byte, its Retry-After readable); a bad key its
// AuthenticationError with the server's message.
//
// Environment (scripts/ui-test.sh): CONVRAG_UI_URL, CONVRAG_UI_COLLECTION,
// CONVRAG_UI_CORS_ALLOWED_PORT, CONVRAG_UI_OPENAI_DIR (the openai package's directory),
// CONVRAG_UI_OPENAI_TOKEN and CONVRAG_UI_OPENAI_LIMITED_TOKEN (two users of their own: the second
// one's turns are used up here), CHROMIUM.

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import { join, normalize } from "node:path";
import { chromium } from "playwright-core";

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the browser tests through scripts/ui-test.sh`);
  return value;
}

const BASE = required("CONVRAG_UI_URL").replace(/\/$/, "");
const COLLECTION = process.env.CONVRAG_UI_COLLECTION || "diet";
const PORT = Number(required("CONVRAG_UI_CORS_ALLOWED_PORT"));
const OPENAI_DIR = required("CONVRAG_UI_OPENAI_DIR");
const TOKEN = required("CONVRAG_UI_OPENAI_TOKEN");
const LIMITED_TOKEN = required("CONVRAG_UI_OPENAI_LIMITED_TOKEN");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
// A chat completion with the tiny test LLM on a busy 2-core machine.
const CALL_TIMEOUT = 240_000;
const QUESTION = "What is a quick vegetarian dinner?";

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>An app with openai-node</title></head>
<body><h1>An app with openai-node</h1>
<script type="module">
import OpenAI, { AuthenticationError, RateLimitError } from "/openai/index.mjs";

window.openaiLoaded = true;
window.streamCompletion = async (base, token, model, question) => {
  const client = new OpenAI({ baseURL: base + "/v1", apiKey: token, dangerouslyAllowBrowser: true, maxRetries: 0 });
  const chunks = [];
  try {
    const stream = await client.chat.completions.create({
      model, stream: true, messages: [{ role: "user", content: question }],
    });
    for await (const chunk of stream) chunks.push(chunk);
    return { chunks };
  } catch (error) {
    return {
      chunks,
      error: {
        name: error.constructor.name, message: error.message, status: error.status, code: error.code,
        rateLimit: error instanceof RateLimitError, authentication: error instanceof AuthenticationError,
        retryAfter: error.headers ? error.headers.get("retry-after") : null,
      },
    };
  }
};
</script></body></html>`;

/** The page at /, and the openai package's files under /openai/. */
function pageServer(port) {
  const server = createServer(async (request, response) => {
    const path = new URL(request.url, "http://x").pathname;
    if (path === "/") {
      response.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
      response.end(PAGE);
      return;
    }
    const relative = normalize(path.replace(/^\/openai\//, "")).replace(/^(\.\.[/\\])+/, "");
    if (!path.startsWith("/openai/") || !/\.m?js$/.test(relative)) {
      response.writeHead(404).end();
      return;
    }
    try {
      const body = await readFile(join(OPENAI_DIR, relative));
      response.writeHead(200, { "Content-Type": "text/javascript; charset=utf-8" });
      response.end(body);
    } catch {
      response.writeHead(404).end();
    }
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(server));
  });
}

/** Spends the user's turns of this minute in one request (imported history counts: 59 earlier
 * exchanges and a question are 60 turns); the next turn is refused until the bucket refills (one
 * turn a second), so the refused call must follow at once. */
async function useUpTurnRate(token) {
  const messages = [];
  for (let i = 1; i < 60; i++) {
    messages.push({ role: "user", content: `Earlier question ${i}?` }, { role: "assistant", content: `Earlier answer ${i}.` });
  }
  messages.push({ role: "user", content: QUESTION });
  const response = await fetch(BASE + "/v1/chat/completions", {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ model: COLLECTION, messages }),
  });
  assert.equal(response.status, 200, await response.text());
}

let browser;
let server;

async function openPage() {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (error) => errors.push(String(error)));
  const origin = `http://127.0.0.1:${PORT}`;
  assert.notEqual(origin, new URL(BASE).origin, "the page is on another origin than the server");
  await page.goto(origin + "/");
  await page.waitForFunction(() => window.openaiLoaded === true, null, { timeout: 30_000 }).catch(() => {
    throw new Error(`openai-node did not load in the page: ${errors.join("; ")}`);
  });
  return page;
}

function stream(page, token) {
  return page.evaluate(([base, key, model, question]) => window.streamCompletion(base, key, model, question),
    [BASE, token, COLLECTION, QUESTION]);
}

describe("openai-node in a page on an allowed origin", { timeout: 3 * CALL_TIMEOUT }, () => {
  before(async () => {
    server = await pageServer(PORT);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    });
  });

  after(async () => {
    if (browser) await browser.close();
    if (server) server.close();
  });

  it("streams a chat completion", async () => {
    const page = await openPage();
    try {
      const { chunks, error } = await stream(page, TOKEN);
      assert.equal(error, undefined, JSON.stringify(error));
      assert.ok(chunks.length >= 2, JSON.stringify(chunks));
      const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
      assert.ok(text.trim(), "text arrived");
      const last = chunks.findLast((c) => c.choices.length > 0);
      assert.equal(last.choices[0].finish_reason, "stop");
      assert.equal(last.convrag.content, text);
    } finally {
      await page.close();
    }
  });

  it("surfaces a refused turn as RateLimitError and a bad key as AuthenticationError", async () => {
    const page = await openPage();
    try {
      await useUpTurnRate(LIMITED_TOKEN);
      const refused = await stream(page, LIMITED_TOKEN);
      assert.deepEqual(refused.chunks, [], "refused before any stream byte");
      assert.ok(refused.error, "the call failed");
      assert.equal(refused.error.rateLimit, true, JSON.stringify(refused.error));
      assert.equal(refused.error.status, 429);
      assert.equal(refused.error.code, "rate_limited");
      assert.ok(Number(refused.error.retryAfter) > 0, "Retry-After is exposed to the page");

      const bad = await stream(page, "not-a-convrag-token");
      assert.equal(bad.error?.authentication, true, JSON.stringify(bad.error));
      assert.equal(bad.error.status, 401);
      assert.match(bad.error.message, /unknown token/);
    } finally {
      await page.close();
    }
  });
});
