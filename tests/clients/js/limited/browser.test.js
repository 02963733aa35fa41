// openai-node (the `openai` npm package, as locked) in Chromium, in a page of another origin than
// the server (CONVRAG_CLIENTS_ORIGIN, which the server allows): the client as a browser app ships
// it, with dangerouslyAllowBrowser, streamed. The page loads the package's own ES modules (it
// has no dependencies), served beside the page from node_modules/openai.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { dirname, join, normalize } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

import {
  BAD_TOKEN, BAD_TOKEN_REASON, COLLECTION, FIRST, FOLLOW_UP, ORIGIN, TIMEOUT_MS, URL_,
  checkRateLimited, exhaustTurns, newUser, singleConversationWith,
} from './support.js';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const OPENAI_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'node_modules', 'openai');

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Another app</title></head>
<body><h1>Another app</h1>
<script type="module">
import OpenAI from '/openai/index.mjs';

/** Streams one chat completion; its text, or the error the client raised. */
window.streamChat = async (base, token, model, messages) => {
  const client = new OpenAI({ baseURL: base + '/v1', apiKey: token, dangerouslyAllowBrowser: true, maxRetries: 0 });
  try {
    const stream = await client.chat.completions.create({ model, messages, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    return { text };
  } catch (e) {
    return { error: {
      name: e.constructor.name, status: e.status, message: e.message,
      rateLimit: e instanceof OpenAI.RateLimitError, auth: e instanceof OpenAI.AuthenticationError,
    } };
  }
};
window.ready = true;
</script></body></html>`;

/** The page at / and the package's files at /openai/. */
function pageServer(port) {
  const server = createServer(async (request, response) => {
    const path = new URL(request.url, ORIGIN).pathname;
    if (path === '/') {
      response.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      response.end(PAGE);
      return;
    }
    const file = normalize(join(OPENAI_DIR, path.replace(/^\/openai\//, '')));
    if (!path.startsWith('/openai/') || !file.startsWith(OPENAI_DIR)) {
      response.writeHead(404).end();
      return;
    }
    try {
      const body = await readFile(file);
      response.writeHead(200, { 'Content-Type': 'text/javascript; charset=utf-8' });
      response.end(body);
    } catch {
      response.writeHead(404).end();
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

describe('openai-node in a browser page of another origin', { timeout: 4 * TIMEOUT_MS }, () => {
  let browser;
  let server;
  let page;

  before(async () => {
    const origin = new URL(ORIGIN);
    assert.notEqual(origin.origin, new URL(URL_).origin, 'the page is on another origin than the server');
    server = await pageServer(Number(origin.port));
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    page = await browser.newPage();
    const failures = [];
    page.on('pageerror', (error) => failures.push(String(error)));
    await page.goto(`${ORIGIN}/`);
    await page.waitForFunction(() => window.ready === true, null, { timeout: 30_000 }).catch(() => {
      throw new Error(`the page did not load openai-node: ${failures.join('; ')}`);
    });
  });

  after(async () => {
    await browser?.close();
    await new Promise((resolve) => (server ? server.close(resolve) : resolve()));
  });

  const stream = (token, messages) =>
    page.evaluate(([base, token, model, messages]) => window.streamChat(base, token, model, messages),
      [URL_, token, COLLECTION, messages]);

  test('a rate-limited stream raises RateLimitError', async () => {
    const token = await newUser();
    await exhaustTurns(token);
    const { error } = await stream(token, [{ role: 'user', content: FIRST }]);
    assert.ok(error, 'the request was answered');
    assert.ok(error.rateLimit, `not a RateLimitError: ${JSON.stringify(error)}`);
    assert.equal(error.status, 429);
    checkRateLimited(error.message);
  });

  test('the history continues one conversation', async () => {
    const token = await newUser();
    const history = [{ role: 'user', content: FIRST }];
    const first = await stream(token, history);
    assert.ok(!first.error, JSON.stringify(first.error));
    assert.match(first.text, /\[1\]/);
    history.push({ role: 'assistant', content: first.text }, { role: 'user', content: FOLLOW_UP });
    const second = await stream(token, history);
    assert.ok(!second.error, JSON.stringify(second.error));
    assert.ok(second.text.trim());
    await singleConversationWith(token, [FIRST, FOLLOW_UP]);
  });

  test('a bad token raises AuthenticationError with the reason', async () => {
    const { error } = await stream(BAD_TOKEN, [{ role: 'user', content: FIRST }]);
    assert.ok(error, 'the request was answered');
    assert.ok(error.auth, `not an AuthenticationError: ${JSON.stringify(error)}`);
    assert.equal(error.status, 401);
    assert.ok(error.message.includes(BAD_TOKEN_REASON), error.message);
  });
});
