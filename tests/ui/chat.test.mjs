// Browser tests of the convrag chat page: a person signs in, creates a conversation with PTKB
// statements, chats (streamed answers), opens a citation (also from the link a chat client gets), edits a statement and sees the next
// turn change, regenerates a turn and compares, meets errors without losing what they typed,
// regenerates with the settings a turn ran with, shows the conversation's instructions, keeps
// profile statements for new conversations,
// uploads a PDF and a Markdown file into a private collection and chats over it (a second user
// does not see it),
// and the page is screenshotted at desktop and phone sizes. (stream.test.mjs checks the turn stream's contract without a browser.)
//
// Runs against a real convrag server (scripts/ui-test.sh starts one with a small indexed
// collection): CONVRAG_UI_URL, CONVRAG_UI_TOKEN (a user's token), CONVRAG_UI_COLLECTION,
// CONVRAG_UI_ARTIFACTS (screenshots), CONVRAG_UI_LLM ("real": the server's LLM answers;
// "down": its LLM endpoint is unreachable; scripts/ui-test.sh runs this file once in each), CHROMIUM
// (Debian's /usr/bin/chromium by default).

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { visibleText } from "./support.mjs";

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the browser tests through scripts/ui-test.sh`);
  return value;
}

const BASE = required("CONVRAG_UI_URL").replace(/\/$/, "");
const TOKEN = required("CONVRAG_UI_TOKEN");
// A second user, who must not see the first one's private collection.
const OTHER_TOKEN = required("CONVRAG_UI_OTHER_TOKEN");
const COLLECTION = process.env.CONVRAG_UI_COLLECTION || "diet";
const ARTIFACTS = process.env.CONVRAG_UI_ARTIFACTS || new URL("../../target/ui-artifacts", import.meta.url).pathname;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const LLM_MODE = required("CONVRAG_UI_LLM");
if (!["real", "down"].includes(LLM_MODE)) throw new Error(`CONVRAG_UI_LLM must be real or down, not ${LLM_MODE}`);
const TIMEOUT = 60_000;
// The tiny test LLM on a busy 2-core machine.
const LLM_TIMEOUT = 240_000;

const STATEMENT_VEGETARIAN = "I am vegetarian and cook dinner for my family.";
const STATEMENT_PEANUTS = "I have a peanut allergy, so I always check what is in my food when I eat out.";
const STATEMENT_SHELLFISH = "I have a shellfish allergy, so I always check what is in my food when I eat out.";
const STATEMENT_CYCLING = "I cycle to work in Edinburgh every day.";
const PROFILE_HOME = "I live in Glasgow and do the food shopping at the weekend.";
const EATING_OUT = "What should I check when I eat out?";
const PRIVATE_COLLECTION = "kestrel-bay-notes";
const OTTERS_MARKDOWN = "# Otters of Kestrel Bay\n\nThe sea otters of Kestrel Bay *crack clams* on their bellies with a favourite stone.\n";

const DESKTOP = { width: 1440, height: 900 };
const PHONE = { width: 375, height: 812 };

/** The server's own view, through the public API (what the page must agree with). */
async function api(path) {
  const r = await fetch(BASE + path, { headers: { Authorization: `Bearer ${TOKEN}` } });
  assert.equal(r.status, 200, `GET ${path}`);
  return r.json();
}

let browser;
let context;
let page;
let conversationId;
const foreignRequests = [];
const pageErrors = [];

async function screenshot(name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, name) });
}

/** Sends a message from the composer and waits for the stored turn to replace the stream. */
async function send(text) {
  const before = await page.locator("#turns > li.turn").count();
  await page.getByLabel("Your message").fill(text);
  await page.getByLabel("Your message").press("Enter");
  // Either the stored turn replaces the stream, or an error is shown.
  await page.waitForFunction(
    (index) => {
      const turn = document.querySelectorAll("#turns > li.turn")[index];
      return (turn && !turn.classList.contains("streaming") && turn.dataset.version) || !document.getElementById("composer-error").hidden;
    },
    before,
    { timeout: TIMEOUT },
  );
  const error = page.locator("#composer-error");
  assert.equal(await error.isVisible(), false, `sending failed: ${await error.textContent()}`);
  return page.locator("#turns > li.turn").nth(before);
}

async function storedTurns() {
  return (await api(`/v1/conversations/${conversationId}/turns`)).turns;
}

/** Texts of the statements the turn view lists as used (selected). */
async function selectedStatements(turn) {
  return turn.locator(".ptkb-ranking li.selected .statement-text").allTextContents();
}

async function openWhy(turn) {
  const details = turn.locator("details.why");
  if (!(await details.evaluate((d) => d.open))) await details.locator("summary").click();
}

/**
 * A step of the story: each builds on the ones before, so after a failure the rest fail at once
 * (naming the first failure) instead of waiting out their timeouts. A failing step leaves a
 * screenshot of the page.
 */
let firstFailure = null;
function step(name, fn) {
  it(name, async () => {
    if (firstFailure) throw new Error(`not run: the step "${firstFailure}" failed`);
    try {
      await fn();
    } catch (error) {
      firstFailure = name;
      if (page) await screenshot(`failed-${name.replace(/[^a-z0-9]+/gi, "-").slice(0, 60)}.png`).catch(() => {});
      throw error;
    }
  });
}

describe("convrag chat page", { timeout: 10 * 60_000 }, () => {
  before(async () => {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    });
    context = await browser.newContext({ viewport: DESKTOP });
    page = await context.newPage();
    page.setDefaultTimeout(15_000);
    const origin = new URL(BASE).origin;
    page.on("request", (request) => {
      const url = request.url();
      if (!url.startsWith("data:") && new URL(url).origin !== origin) foreignRequests.push(url);
    });
    page.on("pageerror", (error) => pageErrors.push(String(error)));
    // The page's Content-Security-Policy reports what it blocks on the console.
    page.on("console", (message) => {
      if (message.type() === "error" && /Content Security Policy/i.test(message.text())) pageErrors.push(message.text());
    });
  });

  after(async () => {
    if (browser) await browser.close();
  });

  step("refuses a wrong token in plain words, then signs in", async () => {
    await page.goto(BASE + "/");
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
    await page.locator("#health.ok").waitFor();
    await page.getByLabel("Token").fill("not-a-token");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("The server did not accept your token").waitFor();
    await page.getByLabel("Token").fill(TOKEN);
    await page.getByLabel("Token").press("Enter");
    const me = (await api("/v1/users/me")).user;
    await page.getByText(`Signed in as ${me.name}`).waitFor();
    await page.getByRole("navigation", { name: "Conversations" }).waitFor();
  });

  step("creates a conversation with a collection and PTKB statements", async () => {
    await page.getByRole("button", { name: "New conversation" }).click();
    await page.getByLabel("Title").fill("Food for a busy week");
    await page.getByLabel("Collection").selectOption(COLLECTION);
    await page.getByLabel("Statement 1", { exact: true }).fill(STATEMENT_VEGETARIAN);
    await page.getByRole("button", { name: "Add a statement" }).click();
    await page.getByLabel("Statement 2", { exact: true }).fill(STATEMENT_PEANUTS);
    await page.getByRole("button", { name: "Add a statement" }).click();
    await page.getByLabel("Statement 3", { exact: true }).fill(STATEMENT_CYCLING);
    await screenshot("new-conversation-desktop.png");
    await page.getByRole("button", { name: "Start the conversation" }).click();

    await page.getByRole("heading", { name: "Food for a busy week" }).waitFor();
    conversationId = /#\/c\/([0-9a-f-]{36})$/.exec(page.url())[1];
    const stored = await api(`/v1/conversations/${conversationId}`);
    assert.equal(stored.conversation.collection, COLLECTION);
    assert.deepEqual(
      stored.ptkb.map((s) => s.text),
      [STATEMENT_VEGETARIAN, STATEMENT_PEANUTS, STATEMENT_CYCLING],
    );
    // The "about you" panel shows them (a column at desktop width).
    const panel = page.getByRole("complementary", { name: "About you" });
    await panel.waitFor();
    assert.deepEqual(await panel.locator(".ptkb-item .statement-text").allTextContents(), stored.ptkb.map((s) => s.text));
    assert.equal(await page.getByLabel("Your message").evaluate((e) => e === document.activeElement), true);
  });

  step("streams the answer sentence by sentence, then shows the stored turn", async () => {
    // Record every sentence as it is added and whether its turn was still streaming then.
    await page.evaluate(() => {
      window.sentenceLog = [];
      new MutationObserver((records) => {
        for (const r of records)
          for (const n of r.addedNodes)
            if (n.nodeType === 1 && n.classList.contains("sentence"))
              window.sentenceLog.push({ text: n.dataset.markdown, streaming: Boolean(n.closest(".turn.streaming")) });
      }).observe(document.getElementById("turns"), { childList: true, subtree: true });
    });
    // The server answers with its LLM by default; the story is told with the extractive
    // generator, whose answers follow from the passages alone.
    await page.getByText("Answer settings").click();
    await page.locator("#composer-generator").selectOption("extractive");
    await page.getByText("Answer settings").click();
    const turn = await send("What should I cook for dinner this week?");
    const [stored] = await storedTurns();
    assert.equal(stored.seq, 1);
    assert.ok(stored.sentences.length >= 1, "the stored turn has sentences");

    const log = await page.evaluate(() => window.sentenceLog);
    const streamed = log.filter((s) => s.streaming).map((s) => s.text);
    assert.deepEqual(streamed, stored.sentences.map((s) => s.text), "each sentence arrived on its own, in order, while streaming");
    assert.equal(await turn.getAttribute("data-streamed-sentences"), String(stored.sentences.length));

    // The final rendering is the stored turn.
    assert.deepEqual(await turn.locator(".answer .sentence").evaluateAll((ns) => ns.map((n) => n.dataset.markdown)), stored.sentences.map((s) => s.text));
    const markers = await turn.locator(".answer .cite").allTextContents();
    assert.deepEqual(markers, stored.sentences.flatMap((s) => s.citations.map(String)));

    // Why this answer: the search query, the ranked statements with the selected ones, the passages, the timings.
    await openWhy(turn);
    assert.ok(stored.search_query.text.startsWith(stored.rewritten_utterance), JSON.stringify(stored.search_query));
    assert.equal(await visibleText(turn.locator(".search-query")), stored.search_query.text);
    assert.deepEqual(await turn.locator(".ptkb-ranking li .statement-text").allTextContents(), stored.ptkb_ranking.map((s) => s.text));
    assert.deepEqual(await selectedStatements(turn), stored.ptkb_ranking.filter((s) => s.selected).map((s) => s.text));
    assert.ok(stored.ptkb_ranking.find((s) => s.selected && s.text === STATEMENT_VEGETARIAN), "a dinner question uses the vegetarian statement");
    assert.equal(await turn.locator(".passage-ranking li").count(), stored.passages.length);
    assert.equal(await turn.locator(".passage-ranking li.cited").count(), new Set(stored.sentences.flatMap((s) => s.citations)).size);
    // Which retriever found each passage: this turn's first stage was BM25, each passage's rank in its list.
    assert.equal(stored.diagnostics.retrieval, "bm25");
    assert.equal(await turn.locator(".why-section p.retrieval").textContent(), "Found by BM25 (words).");
    assert.deepEqual(await turn.locator(".passage-ranking li .found-by").allTextContents(), stored.passages.map((p) => `BM25 #${p.bm25_rank}`));
    await turn.locator(".timings").getByText("Total").waitFor();
  });

  step("opens a cited passage with the cited part highlighted, by keyboard", async () => {
    const turn = page.locator("#turns > li.turn").first();
    const [stored] = await storedTurns();
    const sentence = stored.sentences.find((s) => s.citations.length > 0);
    assert.ok(sentence, "the answer cites a passage");
    const rank = sentence.citations[0];
    const passage = stored.passages.find((p) => p.rank === rank);
    const marker = turn.locator(`.answer .cite[data-rank="${rank}"]`).first();
    await marker.focus();
    await page.keyboard.press("Enter");

    const dialog = page.getByRole("dialog", { name: passage.title });
    await dialog.waitFor();
    assert.equal(await dialog.locator(".passage-text").textContent(), passage.text);
    const marked = await dialog.locator(".passage-text mark").allTextContents();
    assert.ok(marked.length > 0, "the cited part is highlighted");
    for (const m of marked) assert.ok(passage.text.includes(m));
    assert.ok(await dialog.getByText(passage.url).isVisible());
    assert.equal(await page.getByRole("button", { name: "Close the passage" }).evaluate((b) => b === document.activeElement), true);
    await screenshot("citation-desktop.png");

    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });
    assert.equal(await marker.evaluate((b) => b === document.activeElement), true, "focus returns to the marker");
  });

  step("the link a chat client gets for a citation opens the same passage", async () => {
    const [stored] = await storedTurns();
    const rank = stored.sentences.find((s) => s.citations.length > 0).citations[0];
    const passage = stored.passages.find((p) => p.rank === rank);
    await page.goto(`${BASE}/#/c/${stored.conversation_id}/t/${stored.id}/p/${rank}`);
    const dialog = page.getByRole("dialog", { name: passage.title });
    await dialog.waitFor();
    assert.equal(await dialog.locator(".passage-text").textContent(), passage.text);
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });
    await page.goto(`${BASE}/#/c/${stored.conversation_id}`);
  });

  step("sends a second turn", async () => {
    const turn = await send(EATING_OUT);
    const stored = await storedTurns();
    assert.equal(stored.length, 2);
    await openWhy(turn);
    assert.ok((await selectedStatements(turn)).includes(STATEMENT_PEANUTS));
    // The statement steers retrieval: the answer speaks of the user's allergy (where, depends
    // on the order of the two statements used, which the zero-shot PTKB ranker decides).
    const allergy = stored[1].sentences.findIndex((s) => /peanut/i.test(s.text));
    assert.ok(allergy >= 0, JSON.stringify(stored[1].sentences.map((s) => s.text)));
    assert.match(await turn.locator(".answer .sentence").nth(allergy).textContent(), /peanut/i);
    await page.getByRole("link", { name: /Food for a busy week/ }).getByText("2 turns").waitFor();
  });

  step("edits a statement during the conversation and the next turn changes", async () => {
    const panel = page.getByRole("complementary", { name: "About you" });
    await panel.getByRole("button", { name: "Edit statement 2" }).click();
    const input = panel.getByLabel("Statement 2", { exact: true });
    await input.fill(STATEMENT_SHELLFISH);
    await input.press("Enter");
    await panel.getByText(STATEMENT_SHELLFISH).waitFor();
    assert.equal(await panel.getByRole("button", { name: "Edit statement 2" }).evaluate((b) => b === document.activeElement), true);
    const { ptkb } = await api(`/v1/conversations/${conversationId}`);
    assert.equal(ptkb.find((s) => s.id === "2").text, STATEMENT_SHELLFISH);

    const turn = await send(EATING_OUT);
    const stored = await storedTurns();
    assert.equal(stored.length, 3);
    await openWhy(turn);
    const used = await selectedStatements(turn);
    assert.ok(used.includes(STATEMENT_SHELLFISH), `turn 3 uses the edited statement (used: ${used})`);
    assert.ok(!used.includes(STATEMENT_PEANUTS));
    assert.ok((await turn.locator(".personal .chip").allTextContents()).includes(STATEMENT_SHELLFISH), "shown under the answer too");
    // Same question, edited statement: the answer now opens with the other allergy.
    assert.match(stored[2].sentences[0].text, /shellfish/i, "the answer follows the edited statement");
    assert.match(await turn.locator(".answer .sentence").first().textContent(), /shellfish/i);
    assert.notEqual(stored[2].passages[0].passage_id, stored[1].passages[0].passage_id);
    // The earlier turn still shows what it saw.
    const second = page.locator("#turns > li.turn").nth(1);
    assert.ok((await selectedStatements(second)).includes(STATEMENT_PEANUTS));
  });

  step("regenerates a turn with other settings and compares the versions", async () => {
    const first = page.locator("#turns > li.turn").first();
    await first.getByRole("button", { name: "Regenerate…" }).click();
    const dialog = page.getByRole("dialog", { name: "Regenerate this answer" });
    await dialog.waitFor();
    await dialog.getByLabel("Rerank with the model").uncheck();
    await dialog.getByLabel("Passages").fill("3");
    await dialog.getByRole("button", { name: "Regenerate" }).click();
    await first.getByText("Version 2 of 2").waitFor({ timeout: TIMEOUT });

    const versions = (await api(`/v1/conversations/${conversationId}/turns?all_versions=true`)).turns.filter((t) => t.seq === 1);
    assert.equal(versions.length, 2);
    const [v1, v2] = versions.sort((a, b) => a.version - b.version);
    assert.equal(v2.is_current, true);
    assert.equal(v2.passages.length, 3);
    assert.ok(v2.passages.every((p) => p.rerank_score === null), "version 2 was not reranked");

    // The comparison opens by itself after a regeneration; both answers are there.
    const compare = first.getByRole("group", { name: "Version 1 and version 2 compared" });
    await compare.waitFor();
    const columns = compare.locator(".compare-column");
    assert.equal(await columns.count(), 2);
    // The settings that differ are named, with each version's value.
    const settingsOf = (column) =>
      column.locator(".settings").evaluate((dl) => Object.fromEntries([...dl.querySelectorAll("dt")].map((dt) => [dt.textContent, dt.nextElementSibling.textContent])));
    const [s1, s2] = [await settingsOf(columns.nth(0)), await settingsOf(columns.nth(1))];
    assert.equal(s1.rerank, "true");
    assert.equal(s2.rerank, "false");
    assert.equal(s2.passages, "3");
    assert.notEqual(s1.passages, "3");
    assert.equal(s1.generator, undefined, "unchanged settings are left out");
    const answerText = (turn) => turn.sentences.map((s) => [s.text, ...s.citations].join(" ")).join(" ");
    assert.equal(await columns.nth(0).locator(".answer").textContent(), answerText(v1));
    assert.equal(await columns.nth(1).locator(".answer").textContent(), answerText(v2));
    await compare.evaluate((c) => c.scrollIntoView({ block: "center" }));
    await screenshot("compare-desktop.png");
    await first.getByRole("button", { name: "Previous version" }).click();
    await first.getByText("Version 1 of 2").waitFor();
  });

  // One outcome per mode, each deterministic: with the real model (temperature 0, seed 42) its
  // answer is used and cites, while its rewrite (it answers the question instead) is refused by
  // the guard; with the endpoint down both fall back, and the page says why in words.
  step(LLM_MODE === "real" ? "says why the language model's rewrite and answer were not used" : "says plainly why the language model could not answer", async () => {
    const second = page.locator("#turns > li.turn").nth(1);
    await second.getByRole("button", { name: "Regenerate…" }).click();
    const dialog = page.getByRole("dialog", { name: "Regenerate this answer" });
    await dialog.getByLabel("Generator").selectOption("llm");
    await dialog.getByLabel("Query rewriter").selectOption("llm");
    // Short answers from few passages keep the tiny model quick.
    await dialog.getByLabel("Passages").fill("3");
    await dialog.getByLabel("Word limit").fill("60");
    await dialog.getByRole("button", { name: "Regenerate" }).click();
    await second.getByText("Version 2 of 2").waitFor({ timeout: LLM_TIMEOUT });

    const v2 = (await api(`/v1/conversations/${conversationId}/turns?all_versions=true`)).turns.find((t) => t.seq === 2 && t.version === 2);
    const diagnostics = JSON.stringify(v2.diagnostics);
    assert.equal(v2.settings.generator, "llm");
    assert.equal(v2.settings.rewriter, "llm");
    // The rewrite: refused either way, and the page gives the reason. SmolLM2-135M (seed 42,
    // temperature 0), shown the statements in the zero-shot ranker's order, lists them instead of
    // rewriting, keeping none of the utterance's content words.
    const rewriteFallback = v2.diagnostics.rewrite_fallback;
    assert.equal(rewriteFallback && rewriteFallback.kind, LLM_MODE === "real" ? "dropped_content" : "llm_error", diagnostics);
    assert.equal(v2.diagnostics.rewrite_method, "history");
    const method = await second.locator(".why .why-body p.muted.small", { hasText: "method:" }).first().textContent();
    assert.equal(method, `method: history (the language model's rewrite was not used: ${rewriteFallback.reason})`);
    // The answer came from the passages instead, and the page says so in words.
    const fallback = v2.diagnostics.fallback;
    assert.equal(v2.generator, "extractive");
    const notice = second.locator(".turn-main .notice.fallback");
    const words = await notice.locator("p").first().textContent();
    if (LLM_MODE === "real") {
      // The model answered, but only with a copy of the prompt's citation example: refused.
      assert.equal(fallback && fallback.kind, "no_cited_sentence", diagnostics);
      assert.match(fallback.reason, /only repeated the prompt's own example$/);
      assert.match(v2.diagnostics.llm.raw_output, /^The tower is 330 metres tall/);
      assert.match(words, /^The language model smollm2-135m-instruct gave no answer that cites the passages, so this answer was put together from the passages instead\.$/);
    } else {
      assert.equal(fallback && fallback.kind, "unreachable", diagnostics);
      assert.match(words, /^The language model smollm2-135m-instruct could not be reached, so this answer was put together from the passages instead\.$/);
    }
    // The technical reason is there, folded away.
    assert.equal(await notice.locator("details .reason").textContent(), fallback.reason);
    assert.equal(await notice.locator("details .reason").isVisible(), false);
    assert.deepEqual(await second.locator(".turn-main .answer .sentence").evaluateAll((ns) => ns.map((n) => n.dataset.markdown)), v2.sentences.map((s) => s.text));
    await screenshot("llm-desktop.png");
  });

  step("takes screenshots of the chat on desktop and phone sizes", async () => {
    // The last turn from its question on, with its "why" panel open beside it.
    const last = page.locator("#turns > li.turn").last();
    await openWhy(last);
    await last.evaluate((turn) => turn.scrollIntoView({ block: "start" }));
    await screenshot("chat-desktop.png");
    assert.equal(await page.evaluate(() => document.documentElement.scrollHeight), DESKTOP.height, "the window itself never scrolls; the chat does");

    await page.setViewportSize(PHONE);
    await last.evaluate((turn) => turn.scrollIntoView({ block: "start" }));
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `no sideways scrolling on a phone (${overflow}px too wide)`);
    assert.equal(await page.evaluate(() => document.documentElement.scrollHeight), PHONE.height, "the window itself never scrolls; the chat does");
    assert.ok(await page.getByRole("button", { name: "Send" }).isVisible());
    assert.ok(!(await page.getByRole("navigation", { name: "Conversations" }).isVisible()), "the list is folded away");
    await screenshot("chat-phone.png");

    // The panels slide over the chat and close with Escape, giving focus back.
    await page.getByRole("button", { name: "About you" }).click();
    const panel = page.getByRole("complementary", { name: "About you" });
    await panel.waitFor();
    assert.ok(await panel.getByText(STATEMENT_SHELLFISH).isVisible());
    await screenshot("ptkb-phone.png");
    await page.keyboard.press("Escape");
    await panel.waitFor({ state: "hidden" });
    assert.equal(await page.getByRole("button", { name: "About you" }).evaluate((b) => b === document.activeElement), true);
    await page.getByRole("button", { name: "Conversations" }).click();
    await page.getByRole("navigation", { name: "Conversations" }).getByText("Food for a busy week").waitFor();
    await page.keyboard.press("Escape");
    await page.setViewportSize(DESKTOP);
  });

  step("keeps what was typed when the server refuses it or cannot be reached", async () => {
    const box = page.getByLabel("Your message");
    const storedBefore = (await storedTurns()).length;

    // Invalid input, refused by the real server: named in plain words, the message stays.
    await page.getByText("Answer settings").click();
    await page.locator("#composer-depth").fill("5000");
    await box.fill("Is tofu a good source of protein?");
    await box.press("Enter");
    await page.locator("#composer-error").getByText("Please check the rerank depth").waitFor();
    assert.equal(await box.inputValue(), "Is tofu a good source of protein?");
    await page.locator("#composer-depth").fill("");

    // The server cannot be reached (connection refused at the network level).
    await page.route("**/v1/conversations/*/turns", (route) => route.abort("connectionrefused"));
    await box.press("Enter");
    await page.locator("#composer-error").getByText("cannot be reached").waitFor();
    await screenshot("error-desktop.png");
    assert.equal(await box.inputValue(), "Is tofu a good source of protein?");
    await page.unroute("**/v1/conversations/*/turns");
    assert.equal((await storedTurns()).length, storedBefore, "nothing was stored");
    assert.equal(await page.locator("#turns > li.turn").count(), storedBefore);

    // A reload keeps the sign-in and the unsent message.
    await page.reload();
    await page.getByRole("heading", { name: "Food for a busy week" }).waitFor();
    await page.locator("#turns > li.turn").nth(storedBefore - 1).waitFor();
    assert.equal(await page.getByLabel("Your message").inputValue(), "Is tofu a good source of protein?");
  });

  step("regenerates with the rerank depth and word limit the turn ran with", async () => {
    const third = page.locator("#turns > li.turn").nth(2);
    const dialog = page.getByRole("dialog", { name: "Regenerate this answer" });
    const versionOf = async (version) =>
      (await api(`/v1/conversations/${conversationId}/turns?all_versions=true`)).turns.find((t) => t.seq === 3 && t.version === version);

    // The dialog starts from the settings the shown version was stored with.
    const v1 = await versionOf(1);
    await third.getByRole("button", { name: "Regenerate…" }).click();
    await dialog.waitFor();
    assert.equal(await dialog.getByLabel("Rerank depth").inputValue(), String(v1.settings.depth));
    assert.equal(await dialog.getByLabel("Word limit").inputValue(), String(v1.settings.limit.max_words));
    // Version 2 runs with a depth and a word limit other than the defaults.
    assert.notEqual(v1.settings.depth, 30);
    assert.notEqual(v1.settings.limit.max_words, 120);
    await dialog.getByLabel("Generator").selectOption("extractive");
    await dialog.getByLabel("Rerank depth").fill("30");
    await dialog.getByLabel("Word limit").fill("120");
    await dialog.getByRole("button", { name: "Regenerate" }).click();
    await third.getByText("Version 2 of 2").waitFor({ timeout: TIMEOUT });
    const v2 = await versionOf(2);
    assert.equal(v2.settings.depth, 30);
    assert.equal(v2.settings.limit.max_words, 120);

    // Regenerating version 2 as the dialog fills it in keeps them.
    await third.getByRole("button", { name: "Regenerate…" }).click();
    await dialog.waitFor();
    assert.equal(await dialog.getByLabel("Rerank depth").inputValue(), "30");
    assert.equal(await dialog.getByLabel("Word limit").inputValue(), "120");
    assert.equal(await dialog.getByLabel("Passages").inputValue(), String(v2.settings.passages));
    assert.equal(await dialog.getByLabel("Generator").inputValue(), "extractive");
    await dialog.getByRole("button", { name: "Regenerate" }).click();
    await third.getByText("Version 3 of 3").waitFor({ timeout: TIMEOUT });
    const { id } = await versionOf(3);
    const { turn: v3 } = await api(`/v1/conversations/${conversationId}/turns/${id}`);
    assert.equal(v3.settings.depth, 30, JSON.stringify(v3.settings));
    assert.equal(v3.settings.limit.max_words, 120, JSON.stringify(v3.settings));
    assert.equal(v3.settings.passages, v2.settings.passages);
    assert.equal(v3.settings.generator, "extractive");
  });

  step("shows the conversation's instructions under its title", async () => {
    assert.equal(await page.locator("#chat-instructions").isVisible(), false, "no instructions yet");
    const instructions = "Answer for a family of four.\nName the cooking time.";
    const patch = (value) =>
      fetch(`${BASE}/v1/conversations/${conversationId}`, {
        method: "PATCH",
        headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
        body: JSON.stringify({ instructions: value }),
      });
    assert.equal((await patch(instructions)).status, 200);
    await page.reload();
    await page.getByRole("heading", { name: "Food for a busy week" }).waitFor();
    await page.locator("#chat-instructions summary").click();
    assert.equal(await page.locator("#chat-instructions-text").innerText(), instructions);
    assert.equal((await patch(null)).status, 200);
    await page.reload();
    await page.getByRole("heading", { name: "Food for a busy week" }).waitFor();
    assert.equal(await page.locator("#chat-instructions").isVisible(), false);
  });

  step("deletes the conversation after asking", async () => {
    const question = new Promise((resolve) => page.once("dialog", (d) => resolve(d)));
    const click = page.getByRole("button", { name: "Delete" }).click();
    const dialog = await question;
    assert.match(dialog.message(), /Delete the conversation “Food for a busy week”/);
    await dialog.accept();
    await click;
    await page.getByRole("heading", { name: "Your conversations" }).waitFor();
    await page.getByText("No conversations yet.").waitFor();
    assert.deepEqual((await api("/v1/conversations")).conversations, []);
  });

  step("keeps profile statements that every new conversation starts with", async () => {
    const dialog = page.getByRole("dialog", { name: "Your profile" });
    const opener = page.getByRole("button", { name: "Your profile", exact: true });
    await opener.click();
    await dialog.waitFor();
    await dialog.getByText("copied into the “About you” of every new conversation").waitFor();
    await dialog.getByText("No profile statements yet.").waitFor();

    // A blank statement is refused by the server, in its words.
    const input = dialog.getByLabel("Add a statement about you");
    await input.fill("   ");
    await input.press("Enter");
    await dialog.getByRole("alert").getByText("Please check the statement: must not be empty.").waitFor();
    assert.deepEqual((await api("/v1/profile/statements")).statements, []);

    await input.fill(STATEMENT_CYCLING);
    await dialog.getByRole("button", { name: "Add", exact: true }).click();
    await dialog.locator(".ptkb-item .statement-text", { hasText: STATEMENT_CYCLING }).waitFor();
    assert.equal(await dialog.getByRole("alert").isVisible(), false, "the error is gone once a statement is added");
    await input.fill(PROFILE_HOME);
    await input.press("Enter");
    await dialog.locator(".ptkb-item .statement-text", { hasText: PROFILE_HOME }).waitFor();
    assert.deepEqual(await dialog.locator(".ptkb-item .statement-text").allTextContents(), [STATEMENT_CYCLING, PROFILE_HOME]);
    assert.deepEqual((await api("/v1/profile/statements")).statements.map((s) => s.text), [STATEMENT_CYCLING, PROFILE_HOME]);
    await screenshot("profile-desktop.png");

    await dialog.getByRole("button", { name: "Remove profile statement 1" }).click();
    await dialog.getByText(STATEMENT_CYCLING).waitFor({ state: "detached" });
    assert.deepEqual(await dialog.locator(".ptkb-item .statement-text").allTextContents(), [PROFILE_HOME]);
    assert.deepEqual((await api("/v1/profile/statements")).statements.map((s) => s.text), [PROFILE_HOME]);

    // It fits a phone, and closes with Escape, giving focus back.
    await page.setViewportSize(PHONE);
    assert.ok(await dialog.getByRole("button", { name: "Remove profile statement 1" }).isVisible());
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `no sideways scrolling on a phone (${overflow}px too wide)`);
    for (const name of ["Your profile", "Sign out"]) {
      const { height } = await page.getByRole("banner").getByText(name, { exact: true }).boundingBox();
      assert.ok(height < 44, `"${name}" keeps to one line in the top bar (${height}px high)`);
    }
    await screenshot("profile-phone.png");
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });
    assert.equal(await opener.evaluate((b) => b === document.activeElement), true);
    await page.setViewportSize(DESKTOP);

    // A conversation started now gets the kept statement, and not the removed one.
    await page.getByRole("button", { name: "New conversation" }).click();
    await page.getByLabel("Title").fill("Shopping at the weekend");
    await page.getByLabel("Collection").selectOption(COLLECTION);
    await page.getByRole("button", { name: "Start the conversation" }).click();
    await page.getByRole("heading", { name: "Shopping at the weekend" }).waitFor();
    const id = /#\/c\/([0-9a-f-]{36})$/.exec(page.url())[1];
    const panel = page.getByRole("complementary", { name: "About you" });
    await panel.locator(".ptkb-item .statement-text", { hasText: PROFILE_HOME }).waitFor();
    assert.deepEqual(await panel.locator(".ptkb-item .statement-text").allTextContents(), [PROFILE_HOME]);
    assert.deepEqual((await api(`/v1/conversations/${id}`)).ptkb.map((s) => s.text), [PROFILE_HOME]);
  });

  step("uploads a PDF and a Markdown file and gets an answer citing them; nobody else sees them", async () => {
    const dialog = page.getByRole("dialog", { name: "Your documents" });
    await page.getByRole("button", { name: "Your documents", exact: true }).click();
    await dialog.getByText("No private collections yet.").waitFor();
    await dialog.getByLabel("Name of a new document set").fill(PRIVATE_COLLECTION);
    await dialog.getByRole("button", { name: "Create", exact: true }).click();
    await dialog.locator(".ptkb-item", { hasText: PRIVATE_COLLECTION }).waitFor();
    // The picker (a drop lands on the same upload).
    await page.locator("#documents-files").setInputFiles([
      { name: "tide-pools.pdf", mimeType: "application/pdf", buffer: readFileSync(new URL("../fixtures/pdf/tide-pools.pdf", import.meta.url)) },
      { name: "otters.md", mimeType: "text/markdown", buffer: Buffer.from(OTTERS_MARKDOWN) },
    ]);
    await dialog.getByText(`${PRIVATE_COLLECTION} is ready: 2 document(s)`).waitFor({ timeout: TIMEOUT });
    const { collection } = await api(`/v1/collections/${PRIVATE_COLLECTION}`);
    assert.equal(collection.status, "ready");
    assert.equal(collection.documents, 2);

    // A file of a type it does not take is refused in plain words, and nothing is added.
    await page.locator("#documents-files").setInputFiles([{ name: "tool.exe", mimeType: "application/octet-stream", buffer: Buffer.from("MZ\x90") }]);
    await dialog.getByRole("alert").getByText("not an accepted type").waitFor();
    assert.equal((await api(`/v1/collections/${PRIVATE_COLLECTION}`)).collection.documents, 2);
    await screenshot("documents-desktop.png");
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });

    // A new conversation over it answers from the uploaded files, citing them.
    await page.getByRole("button", { name: "New conversation" }).click();
    await page.getByLabel("Title").fill("Kestrel Bay");
    await page.getByLabel("Collection", { exact: true }).selectOption(PRIVATE_COLLECTION);
    await page.getByRole("button", { name: "Start the conversation" }).click();
    await page.getByRole("heading", { name: "Kestrel Bay" }).waitFor();
    conversationId = /#\/c\/([0-9a-f-]{36})$/.exec(page.url())[1];
    await page.getByText("Answer settings").click();
    await page.locator("#composer-generator").selectOption("extractive");
    await page.getByText("Answer settings").click();
    const turn = await send("Which sea slug lives in the tide pools of Kestrel Bay?");
    const [stored] = await storedTurns();
    const cited = new Set(stored.sentences.flatMap((s) => s.citations));
    const citedFiles = stored.passages.filter((p) => cited.has(p.rank)).map((p) => p.url);
    assert.ok(citedFiles.includes("tide-pools.pdf"), `the answer cites the PDF (cited: ${citedFiles})`);
    assert.match(stored.response_text, /Glaucilla/);
    assert.deepEqual(await turn.locator(".answer .cite").allTextContents(), stored.sentences.flatMap((s) => s.citations.map(String)));

    // Another user: not listed, not searchable, not usable for a conversation.
    const other = (path, init = {}) => fetch(BASE + path, { ...init, headers: { Authorization: `Bearer ${OTHER_TOKEN}`, "Content-Type": "application/json" } });
    const listed = await (await other("/v1/collections")).json();
    assert.ok(!listed.collections.some((c) => c.name === PRIVATE_COLLECTION), "the other user's list lacks it");
    for (const path of [`/v1/collections/${PRIVATE_COLLECTION}`, `/v1/collections/${PRIVATE_COLLECTION}/search?q=Glaucilla`]) {
      const r = await other(path);
      assert.equal(r.status, 404, path);
      assert.equal((await r.json()).error.code, "not_found");
    }
    const r = await other("/v1/conversations", { method: "POST", body: JSON.stringify({ collection: PRIVATE_COLLECTION }) });
    assert.equal(r.status, 404);
  });

  step("deletes the uploaded collection after asking", async () => {
    const dialog = page.getByRole("dialog", { name: "Your documents" });
    await page.getByRole("button", { name: "Your documents", exact: true }).click();
    const item = dialog.locator(".ptkb-item", { hasText: PRIVATE_COLLECTION });
    await item.waitFor();
    // Declining the question keeps it.
    page.once("dialog", (question) => question.dismiss());
    await dialog.getByRole("button", { name: `Delete collection ${PRIVATE_COLLECTION}` }).click();
    assert.equal((await api(`/v1/collections/${PRIVATE_COLLECTION}`)).collection.documents, 2);
    page.once("dialog", (question) => {
      assert.match(question.message(), new RegExp(`^Delete ${PRIVATE_COLLECTION} and every document in it\\?`));
      question.accept();
    });
    await dialog.getByRole("button", { name: `Delete collection ${PRIVATE_COLLECTION}` }).click();
    await dialog.getByText("No private collections yet.").waitFor();
    const r = await fetch(`${BASE}/v1/collections/${PRIVATE_COLLECTION}`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    assert.equal(r.status, 404);
    // The conversation over it keeps its answer.
    assert.match((await storedTurns())[0].response_text, /Glaucilla/);
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });
  });

  step("signs out and forgets the token", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
    await page.getByRole("status").getByText("You are signed out.").waitFor();
    assert.equal(await page.evaluate(() => localStorage.getItem("convrag.token")), null);
    await page.setViewportSize(PHONE);
    await screenshot("signin-phone.png");
    await page.setViewportSize(DESKTOP);
  });

  step("loaded nothing from other origins and raised no script errors", () => {
    assert.deepEqual(foreignRequests, []);
    assert.deepEqual(pageErrors, []);
  });
});
