// Browser test of a new user's first run: the server was started on an empty data directory the
// way ./scripts/run.sh starts it (scripts/first-run-test.sh), printed a one-time sign-in link and
// prepares its default collection (the PostgreSQL manual) in the background. The person opens
// the link, waits for the manual, starts a conversation, asks a question and gets a streamed
// answer whose sentences cite passages of the manual, reranked by the model.
//
// CONVRAG_UI_URL, CONVRAG_UI_SIGN_IN_LINK (as the server printed it), CONVRAG_UI_DEFAULT_COLLECTION,
// CONVRAG_UI_ARTIFACTS (screenshots), CHROMIUM (Debian's /usr/bin/chromium by default).

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run this test through scripts/first-run-test.sh`);
  return value;
}

const BASE = required("CONVRAG_UI_URL").replace(/\/$/, "");
const LINK = required("CONVRAG_UI_SIGN_IN_LINK");
const COLLECTION = required("CONVRAG_UI_DEFAULT_COLLECTION");
const ARTIFACTS = required("CONVRAG_UI_ARTIFACTS");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
// Preparing the collection and answering with the model on a busy 2-core machine.
const TIMEOUT = 240_000;
const QUESTION = "How do I build an index without locking out writes to the table?";

let browser;
let page;
let token;
const pageErrors = [];

/** The server's own view, with the token the page signed in with. */
async function api(path) {
  const r = await fetch(BASE + path, { headers: { Authorization: `Bearer ${token}` } });
  assert.equal(r.status, 200, `GET ${path}`);
  return r.json();
}

async function screenshot(name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, name) });
}

let firstFailure = null;
function step(name, fn) {
  it(name, async () => {
    if (firstFailure) throw new Error(`not run: the step "${firstFailure}" failed`);
    try {
      await fn();
    } catch (error) {
      firstFailure = name;
      if (page) await screenshot(`first-run-failed-${name.replace(/[^a-z0-9]+/gi, "-").slice(0, 50)}.png`).catch(() => {});
      throw error;
    }
  });
}

describe("a new user's first run", { timeout: 10 * 60_000 }, () => {
  before(async () => {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    });
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(15_000);
    page.on("pageerror", (error) => pageErrors.push(String(error)));
  });

  after(async () => {
    if (browser) await browser.close();
  });

  step("signs in through the printed link, which leaves the address bar and works once", async () => {
    assert.match(LINK, /^http:\/\/127\.0\.0\.1:\d+\/#sign-in=sic_[0-9a-f]{64}$/);
    await page.goto(LINK);
    await page.getByText('Signed in as me').waitFor();
    assert.equal(new URL(page.url()).hash, "", "the code is removed from the address bar");
    token = await page.evaluate(() => localStorage.getItem("convrag.token"));
    assert.match(token, /^cvr_/);
    // The link is spent: opened again (signed out), it is refused in plain words.
    const r = await fetch(BASE + "/v1/sign-in", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ code: new URL(LINK).hash.slice("#sign-in=".length) }),
    });
    assert.equal(r.status, 401);
  });

  step("shows the default collection being prepared, then ready", async () => {
    const { collections } = await api("/v1/collections");
    const listed = collections.find((c) => c.name === COLLECTION);
    assert.ok(listed && listed.default, `the default collection is listed: ${JSON.stringify(collections)}`);
    if (listed.status !== "ready") {
      await page.getByText(/Preparing the PostgreSQL manual… \d+%/).waitFor();
      await screenshot("first-run-preparing.png");
    }
    await page.locator("#collection-status").waitFor({ state: "hidden", timeout: TIMEOUT });
    const ready = (await api("/v1/collections")).collections.find((c) => c.name === COLLECTION);
    assert.equal(ready.status, "ready");
    assert.ok(ready.passages > 20, `passages: ${ready.passages}`);
  });

  step("starts a conversation on the default collection, preselected", async () => {
    await page.getByRole("button", { name: "New conversation" }).click();
    await page.getByLabel("Title").fill("Indexes");
    assert.equal(await page.getByLabel("Collection").inputValue(), COLLECTION);
    await page.getByRole("button", { name: "Start the conversation" }).click();
    await page.getByRole("heading", { name: "Indexes" }).waitFor();
  });

  step("asks a question and gets a streamed answer citing the manual, reranked by the model", async () => {
    // The story is told with the extractive generator, whose answers follow from the passages.
    await page.getByText("Answer settings").click();
    await page.locator("#composer-generator").selectOption("extractive");
    await page.getByText("Answer settings").click();
    await page.evaluate(() => {
      window.streamedSentences = 0;
      new MutationObserver((records) => {
        for (const r of records)
          for (const n of r.addedNodes)
            if (n.nodeType === 1 && n.classList.contains("sentence") && n.closest(".turn.streaming")) window.streamedSentences++;
      }).observe(document.getElementById("turns"), { childList: true, subtree: true });
    });
    await page.getByLabel("Your message").fill(QUESTION);
    await page.getByLabel("Your message").press("Enter");
    const turn = page.locator("#turns > li.turn").first();
    await page.waitForFunction(
      () => {
        const t = document.querySelector("#turns > li.turn");
        return (t && !t.classList.contains("streaming") && t.dataset.version) || !document.getElementById("composer-error").hidden;
      },
      null,
      { timeout: TIMEOUT },
    );
    assert.equal(await page.locator("#composer-error").isVisible(), false);

    const conversationId = /#\/c\/([0-9a-f-]{36})$/.exec(page.url())[1];
    const [stored] = (await api(`/v1/conversations/${conversationId}/turns`)).turns;
    assert.ok(stored.sentences.length >= 1);
    assert.equal(await page.evaluate(() => window.streamedSentences), stored.sentences.length, "the sentences were streamed");
    const cited = stored.sentences.flatMap((s) => s.citations).map((rank) => stored.passages.find((p) => p.rank === rank));
    assert.ok(cited.length > 0, "the answer cites passages");
    for (const p of cited) assert.match(p.passage_id, /^[a-z0-9-]+\.html#[^:]+:\d+$/, "a passage of the manual");
    assert.ok(
      cited.some((p) => p.passage_id.startsWith("sql-createindex.html#SQL-CREATEINDEX-CONCURRENTLY")),
      `cites the manual's section on building indexes concurrently: ${cited.map((p) => p.passage_id)}`,
    );
    assert.ok(stored.passages.every((p) => typeof p.rerank_score === "number"), "every passage was reranked");
    assert.deepEqual(
      await turn.locator(".answer .cite").allTextContents(),
      stored.sentences.flatMap((s) => s.citations.map(String)),
    );
    // Why this answer: the passages with their model scores.
    const details = turn.locator("details.why");
    if (!(await details.evaluate((d) => d.open))) await details.locator("summary").click();
    const scores = await turn.locator(".passage-ranking li").allTextContents();
    assert.ok(scores.length > 0 && scores.every((s) => /· model -?\d/.test(s)), `model scores shown: ${scores[0]}`);
    await details.locator("summary").click();
    await turn.scrollIntoViewIfNeeded();
    await screenshot("first-answer.png");
    assert.deepEqual(pageErrors, []);
  });
});
