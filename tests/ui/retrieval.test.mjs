// The first stage chosen on the page: the composer's "First stage" sends `retrieval`, a hybrid
// turn's "why this answer" panel and passage dialog show the fused rank and BM25's score, and the
// regenerate dialog starts from the first stage the turn asked for; a turn left at the server's
// default sends none and shows BM25.
//
// Runs against the server scripts/ui-test.sh starts (its collection's passage vectors are
// computed when it is indexed, with the bi-encoder in ./.convrag): CONVRAG_UI_RETRIEVAL_TOKEN (a
// user of its own, so its conversation stays out of the chat test's list), CONVRAG_UI_ARTIFACTS
// and what tests/ui/support.mjs reads.

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { COLLECTION, TURN_TIMEOUT, apiAs, openConversation, required, sendFromComposer } from "./support.mjs";

const TOKEN = required("CONVRAG_UI_RETRIEVAL_TOKEN");
const ARTIFACTS = process.env.CONVRAG_UI_ARTIFACTS || new URL("../../target/ui-artifacts", import.meta.url).pathname;
// How long the collection's passage vectors may take to be ready.
const VECTORS_TIMEOUT = 120_000;
const TITLE = "First stages";
const api = apiAs(TOKEN);

/** Waits until the collection's passage vectors are ready, or fails saying what they are. */
async function waitForVectors() {
  const deadline = Date.now() + VECTORS_TIMEOUT;
  let vectors;
  for (;;) {
    const { collections } = await api("/v1/collections");
    const collection = collections.find((c) => c.name === COLLECTION);
    assert.ok(collection, `the collection ${COLLECTION} is listed`);
    vectors = collection.vectors;
    if (vectors && vectors.status === "ready") return;
    if (Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  assert.fail(
    `the passage vectors of ${COLLECTION} were not ready within ${VECTORS_TIMEOUT / 1000} s (vectors: ${JSON.stringify(vectors)}); ` +
      "the server needs the bi-encoder in .convrag/models (scripts/fetch-models.sh) and the collection indexed with it",
  );
}

let browser;
let page;
let conversationId;
const pageErrors = [];

/** The stored turns of the conversation (current versions unless `allVersions`). */
async function storedTurns(allVersions = false) {
  return (await api(`/v1/conversations/${conversationId}/turns${allVersions ? "?all_versions=true" : ""}`)).turns;
}

/** Sends `text` from the composer; returns the turn's element and the request body the page sent. */
function send(text) {
  return sendFromComposer(page, conversationId, text);
}

/**
 * Chooses `value` in the composer's "First stage" (the settings are folded away again; the
 * screenshot `shot` of them open, if named).
 */
async function chooseFirstStage(value, shot) {
  const settings = page.locator("#composer details.answer-settings");
  await settings.locator("summary").click();
  await page.locator("#composer").getByLabel("First stage").selectOption(value);
  if (shot) {
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, shot) });
  }
  await settings.locator("summary").click();
}

async function openWhy(turn) {
  const details = turn.locator("details.why");
  if (!(await details.evaluate((d) => d.open))) await details.locator("summary").click();
}

/** What the "why" panel should say a passage's ranks were (as the page words them). */
function expectedFoundBy(p) {
  return [
    ["BM25", p.bm25_rank],
    ["dense", p.dense_rank],
    ["fused", p.fused_rank],
  ]
    .filter(([, rank]) => rank != null)
    .map(([name, rank]) => `${name} #${rank}`)
    .join(" · ");
}

/** Opens the first passage the stored turn's answer cites; returns the dialog's score line. */
async function citedPassageScores(turn, stored) {
  const sentence = stored.sentences.find((s) => s.citations.length > 0);
  assert.ok(sentence, `the answer cites a passage: ${JSON.stringify(stored.sentences)}`);
  const rank = sentence.citations[0];
  const passage = stored.passages.find((p) => p.rank === rank);
  await turn.locator(`.answer .cite[data-rank="${rank}"]`).first().click();
  const dialog = page.getByRole("dialog", { name: passage.title });
  await dialog.waitFor();
  const scores = await dialog.locator("#passage-scores").textContent();
  await page.keyboard.press("Escape");
  await dialog.waitFor({ state: "hidden" });
  return scores;
}

/** The first stage the regenerate dialog, opened on `turn`, starts from (then cancelled). */
async function regenerateFirstStage(turn) {
  await turn.getByRole("button", { name: "Regenerate…" }).click();
  const dialog = page.getByRole("dialog", { name: "Regenerate this answer" });
  await dialog.waitFor();
  const value = await dialog.getByLabel("First stage").inputValue();
  await dialog.getByRole("button", { name: "Cancel" }).click();
  await dialog.waitFor({ state: "hidden" });
  return value;
}

describe("choosing the first stage", { timeout: 8 * 60_000 }, () => {
  before(async () => {
    await waitForVectors();
    // The conversation through the API: chat.test.mjs tests the page's own form for it.
    const created = await api("/v1/conversations", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ title: TITLE, collection: COLLECTION }),
    });
    conversationId = created.conversation.id;
    ({ browser, page } = await openConversation({ token: TOKEN, conversationId, title: TITLE, errors: pageErrors }));
  });

  after(async () => {
    if (browser) await browser.close();
  });

  it("runs a hybrid turn and shows the fused rank and BM25's score in the panel, the passage and the regenerate dialog", async () => {
    await chooseFirstStage("hybrid", "retrieval-settings.png");
    const { turn, body } = await send("What should I cook for dinner this week?");
    assert.equal(body.retrieval, "hybrid", `the page asked for hybrid retrieval: ${JSON.stringify(body)}`);
    const [stored] = await storedTurns();
    assert.equal(stored.settings.retrieval, "hybrid");
    assert.equal(stored.diagnostics.retrieval, "hybrid", JSON.stringify(stored.diagnostics));
    assert.equal(stored.diagnostics.retrieval_fallback ?? null, null, JSON.stringify(stored.diagnostics));

    await openWhy(turn);
    assert.equal(await turn.locator(".why-section p.retrieval").textContent(), "Found by BM25 and the bi-encoder, fused.");
    const foundBy = await turn.locator(".passage-ranking li .found-by").allTextContents();
    assert.ok(stored.passages.length > 0, "the turn kept passages");
    assert.deepEqual(foundBy, stored.passages.map(expectedFoundBy));
    for (const ranks of foundBy) assert.match(ranks, /(^| · )fused #\d+$/, "every passage has its fused rank");
    assert.ok(foundBy.some((ranks) => ranks.includes("BM25 #") && ranks.includes("dense #")), `some passage was found by both: ${foundBy}`);
    // The first-stage score shown is BM25's (the reranker fuses with it), none where BM25 did
    // not return the passage; the fused rank is in "found by".
    const scores = await turn.locator(".passage-ranking li .scores").allTextContents();
    assert.equal(scores.length, stored.passages.length);
    scores.forEach((line, i) => {
      const first = line.split(" · ")[0];
      if (stored.passages[i].bm25_rank == null) assert.equal(first, "BM25 –", line);
      else assert.match(first, /^BM25 \d/, line);
    });
    assert.ok(stored.passages.some((p) => p.bm25_rank != null), "some passage was found by BM25");

    const passageScores = await citedPassageScores(turn, stored);
    assert.match(passageScores, /^BM25 (–|\S+) · model /);
    await page.screenshot({ path: join(ARTIFACTS, "retrieval-hybrid.png") });

    assert.equal(await regenerateFirstStage(turn), "hybrid");
  });

  it("regenerates the hybrid turn with hybrid retrieval", async () => {
    const turn = page.locator("#turns > li.turn").first();
    await turn.getByRole("button", { name: "Regenerate…" }).click();
    const dialog = page.getByRole("dialog", { name: "Regenerate this answer" });
    await dialog.waitFor();
    await dialog.getByRole("button", { name: "Regenerate" }).click();
    await turn.getByText("Version 2 of 2").waitFor({ timeout: TURN_TIMEOUT });
    const v2 = (await storedTurns(true)).find((t) => t.seq === 1 && t.version === 2);
    assert.equal(v2.settings.retrieval, "hybrid");
    assert.equal(v2.diagnostics.retrieval, "hybrid");
  });

  it("leaves a turn at the server's default, which runs BM25 and says so", async () => {
    await chooseFirstStage("");
    const { turn, body } = await send("What should I check when I eat out?");
    assert.equal("retrieval" in body, false, `the server's default sends no retrieval: ${JSON.stringify(body)}`);
    const stored = (await storedTurns()).find((t) => t.seq === 2);
    assert.equal(stored.settings.retrieval, "bm25");
    assert.equal(stored.diagnostics.retrieval, "bm25");

    await openWhy(turn);
    assert.equal(await turn.locator(".why-section p.retrieval").textContent(), "Found by BM25 (words).");
    assert.deepEqual(await turn.locator(".passage-ranking li .found-by").allTextContents(), stored.passages.map((p) => `BM25 #${p.bm25_rank}`));

    const passageScores = await citedPassageScores(turn, stored);
    assert.match(passageScores, /^BM25 \S+ · model /);
    assert.ok(!passageScores.includes("fused"), passageScores);

    // Regenerating asks for the first stage the turn ran with.
    assert.equal(await regenerateFirstStage(turn), "bm25");
  });

  it("raised no script errors", () => {
    assert.deepEqual(pageErrors, []);
  });
});
