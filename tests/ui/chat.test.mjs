// Browser tests of the convrag chat page: a person signs in, creates a conversation with PTKB
// statements, chats (streamed answers), opens a citation, edits a statement and sees the next
// turn change, regenerates a turn and compares, meets errors without losing what they typed,
// and the page is screenshotted at desktop and phone sizes.
//
// Runs against a real convrag server (scripts/ui-test.sh starts one with a small indexed
// collection): CONVRAG_UI_URL, CONVRAG_UI_TOKEN (a user's token), CONVRAG_UI_COLLECTION,
// CONVRAG_UI_ARTIFACTS (screenshots), CHROMIUM (Debian's /usr/bin/chromium by default).

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the browser tests through scripts/ui-test.sh`);
  return value;
}

const BASE = required("CONVRAG_UI_URL").replace(/\/$/, "");
const TOKEN = required("CONVRAG_UI_TOKEN");
const COLLECTION = process.env.CONVRAG_UI_COLLECTION || "diet";
const ARTIFACTS = process.env.CONVRAG_UI_ARTIFACTS || new URL("../../target/ui-artifacts", import.meta.url).pathname;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const TIMEOUT = 60_000;

const DESKTOP = { width: 1280, height: 800 };
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

describe("convrag chat page", { timeout: 10 * 60_000 }, () => {
  before(async () => {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    });
    context = await browser.newContext({ viewport: DESKTOP });
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    const origin = new URL(BASE).origin;
    page.on("request", (request) => {
      const url = request.url();
      if (!url.startsWith("data:") && new URL(url).origin !== origin) foreignRequests.push(url);
    });
    page.on("pageerror", (error) => pageErrors.push(String(error)));
  });

  after(async () => {
    if (browser) await browser.close();
  });

  it("refuses a wrong token in plain words, then signs in", async () => {
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

  it("creates a conversation with a collection and PTKB statements", async () => {
    await page.getByRole("button", { name: "New conversation" }).click();
    await page.getByLabel("Title").fill("Food for a busy week");
    await page.getByLabel("Collection").selectOption(COLLECTION);
    await page.getByLabel("Statement 1").fill("I am vegetarian.");
    await page.getByRole("button", { name: "Add a statement" }).click();
    await page.getByLabel("Statement 2").fill("I am allergic to peanuts.");
    await page.getByRole("button", { name: "Add a statement" }).click();
    await page.getByLabel("Statement 3").fill("I cycle to work in Edinburgh every day.");
    await page.getByRole("button", { name: "Start the conversation" }).click();

    await page.getByRole("heading", { name: "Food for a busy week" }).waitFor();
    conversationId = /#\/c\/([0-9a-f-]{36})$/.exec(page.url())[1];
    const stored = await api(`/v1/conversations/${conversationId}`);
    assert.equal(stored.conversation.collection, COLLECTION);
    assert.deepEqual(
      stored.ptkb.map((s) => s.text),
      ["I am vegetarian.", "I am allergic to peanuts.", "I cycle to work in Edinburgh every day."],
    );
    // The "about you" panel shows them (a column at desktop width).
    const panel = page.getByRole("complementary", { name: "About you" });
    await panel.waitFor();
    assert.deepEqual(await panel.locator(".ptkb-item .statement-text").allTextContents(), stored.ptkb.map((s) => s.text));
    assert.equal(await page.getByLabel("Your message").evaluate((e) => e === document.activeElement), true);
  });

  it("streams the answer sentence by sentence, then shows the stored turn", async () => {
    // Record every sentence as it is added and whether its turn was still streaming then.
    await page.evaluate(() => {
      window.sentenceLog = [];
      new MutationObserver((records) => {
        for (const r of records)
          for (const n of r.addedNodes)
            if (n.nodeType === 1 && n.classList.contains("sentence"))
              window.sentenceLog.push({ text: n.firstChild.textContent, streaming: Boolean(n.closest(".turn.streaming")) });
      }).observe(document.getElementById("turns"), { childList: true, subtree: true });
    });
    const turn = await send("What should I cook for dinner this week?");
    const [stored] = await storedTurns();
    assert.equal(stored.seq, 1);
    assert.ok(stored.sentences.length >= 1, "the stored turn has sentences");

    const log = await page.evaluate(() => window.sentenceLog);
    const streamed = log.filter((s) => s.streaming).map((s) => s.text);
    assert.deepEqual(streamed, stored.sentences.map((s) => s.text), "each sentence arrived on its own, in order, while streaming");
    assert.equal(await turn.getAttribute("data-streamed-sentences"), String(stored.sentences.length));

    // The final rendering is the stored turn.
    assert.deepEqual(await turn.locator(".answer .sentence").evaluateAll((ns) => ns.map((n) => n.firstChild.textContent)), stored.sentences.map((s) => s.text));
    const markers = await turn.locator(".answer .cite").allTextContents();
    assert.deepEqual(markers, stored.sentences.flatMap((s) => s.citations.map(String)));

    // Why this answer: the rewrite, the ranked statements with the selected ones, the passages, the timings.
    await openWhy(turn);
    assert.equal(await turn.locator(".rewrite").textContent(), stored.rewritten_utterance);
    assert.deepEqual(await turn.locator(".ptkb-ranking li .statement-text").allTextContents(), stored.ptkb_ranking.map((s) => s.text));
    assert.deepEqual(await selectedStatements(turn), stored.ptkb_ranking.filter((s) => s.selected).map((s) => s.text));
    assert.ok(stored.ptkb_ranking.find((s) => s.selected && s.text === "I am vegetarian."), "a dinner question uses the vegetarian statement");
    assert.equal(await turn.locator(".passage-ranking li").count(), stored.passages.length);
    assert.equal(await turn.locator(".passage-ranking li.cited").count(), new Set(stored.sentences.flatMap((s) => s.citations)).size);
    await turn.locator(".timings").getByText("Total").waitFor();
  });

  it("opens a cited passage with the cited part highlighted, by keyboard", async () => {
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

  it("sends a second turn", async () => {
    const turn = await send("What should I watch out for when I eat out at a restaurant?");
    const stored = await storedTurns();
    assert.equal(stored.length, 2);
    await openWhy(turn);
    assert.ok((await selectedStatements(turn)).includes("I am allergic to peanuts."));
    assert.match(stored[1].response_text, /peanut/i, "the answer is about the user's allergy");
    await page.getByRole("link", { name: /Food for a busy week/ }).getByText("2 turns").waitFor();
  });

  it("edits a statement during the conversation and the next turn changes", async () => {
    const panel = page.getByRole("complementary", { name: "About you" });
    await panel.getByRole("button", { name: "Edit statement 2" }).click();
    const input = panel.getByLabel("Statement 2");
    await input.fill("I am allergic to shellfish.");
    await input.press("Enter");
    await panel.getByText("I am allergic to shellfish.").waitFor();
    assert.equal(await panel.getByRole("button", { name: "Edit statement 2" }).evaluate((b) => b === document.activeElement), true);
    const { ptkb } = await api(`/v1/conversations/${conversationId}`);
    assert.equal(ptkb.find((s) => s.id === "2").text, "I am allergic to shellfish.");

    const turn = await send("What should I watch out for when I eat out at a restaurant?");
    const stored = await storedTurns();
    assert.equal(stored.length, 3);
    await openWhy(turn);
    const used = await selectedStatements(turn);
    assert.ok(used.includes("I am allergic to shellfish."), `turn 3 uses the edited statement (used: ${used})`);
    assert.ok(!used.includes("I am allergic to peanuts."));
    assert.match(stored[2].response_text, /shellfish/i, "the answer follows the edited statement");
    assert.notEqual(stored[2].response_text, stored[1].response_text);
    // The earlier turn still shows what it saw.
    const second = page.locator("#turns > li.turn").nth(1);
    assert.ok((await selectedStatements(second)).includes("I am allergic to peanuts."));
  });

  it("regenerates a turn with other settings and compares the versions", async () => {
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
    const answerText = (turn) => turn.sentences.map((s) => [s.text, ...s.citations].join(" ")).join(" ");
    assert.equal(await columns.nth(0).locator(".answer").textContent(), answerText(v1));
    assert.equal(await columns.nth(1).locator(".answer").textContent(), answerText(v2));
    await first.getByRole("button", { name: "Previous version" }).click();
    await first.getByText("Version 1 of 2").waitFor();
  });

  it("keeps what was typed when the server refuses it or cannot be reached", async () => {
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

  it("takes screenshots of the chat on desktop and phone sizes", async () => {
    const last = page.locator("#turns > li.turn").last();
    await openWhy(last);
    await page.locator("#turns-scroller").evaluate((s) => (s.scrollTop = s.scrollHeight));
    await screenshot("chat-desktop.png");

    await page.setViewportSize(PHONE);
    await page.locator("#turns-scroller").evaluate((s) => (s.scrollTop = s.scrollHeight));
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `no sideways scrolling on a phone (${overflow}px too wide)`);
    assert.ok(await page.getByRole("button", { name: "Send" }).isVisible());
    assert.ok(!(await page.getByRole("navigation", { name: "Conversations" }).isVisible()), "the list is folded away");
    await screenshot("chat-phone.png");

    // The panels slide over the chat and close with Escape, giving focus back.
    await page.getByRole("button", { name: "About you" }).click();
    const panel = page.getByRole("complementary", { name: "About you" });
    await panel.waitFor();
    assert.ok(await panel.getByText("I am allergic to shellfish.").isVisible());
    await screenshot("ptkb-phone.png");
    await page.keyboard.press("Escape");
    await panel.waitFor({ state: "hidden" });
    assert.equal(await page.getByRole("button", { name: "About you" }).evaluate((b) => b === document.activeElement), true);
    await page.getByRole("button", { name: "Conversations" }).click();
    await page.getByRole("navigation", { name: "Conversations" }).getByText("Food for a busy week").waitFor();
    await page.keyboard.press("Escape");
    await page.setViewportSize(DESKTOP);
  });

  it("signs out and forgets the token", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
    assert.equal(await page.evaluate(() => localStorage.getItem("convrag.token")), null);
  });

  it("loaded nothing from other origins and raised no script errors", () => {
    assert.deepEqual(foreignRequests, []);
    assert.deepEqual(pageErrors, []);
  });
});
