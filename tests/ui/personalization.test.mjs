// Personalization only where it belongs: with "I am vegetarian." as the only statement, a
// question about PostgreSQL shows that none of the statements matched (no "Personalized with"),
// and a dinner question in the same conversation is personalized with it.
//
// Runs against the server scripts/ui-test.sh starts (with the bi-encoder, so turns serve the
// PTKB ranker that may select nothing): CONVRAG_UI_URL, CONVRAG_UI_PERSONAL_TOKEN (a user of its
// own, so its conversation stays out of the chat test's list), CONVRAG_UI_COLLECTION, CHROMIUM.

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { chromium } from "playwright-core";

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the browser tests through scripts/ui-test.sh`);
  return value;
}

const BASE = required("CONVRAG_UI_URL").replace(/\/$/, "");
const TOKEN = required("CONVRAG_UI_PERSONAL_TOKEN");
const COLLECTION = process.env.CONVRAG_UI_COLLECTION || "diet";
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const TIMEOUT = 60_000;
const TITLE = "Only where it belongs";
const STATEMENT = "I am vegetarian.";

async function api(path, init = {}) {
  const r = await fetch(BASE + path, { ...init, headers: { Authorization: `Bearer ${TOKEN}`, ...(init.headers || {}) } });
  const body = await r.json();
  assert.ok(r.status < 300, `${init.method || "GET"} ${path}: ${r.status} ${JSON.stringify(body)}`);
  return body;
}

let browser;
let page;
let conversationId;
const pageErrors = [];

/** Sends `text` from the composer; returns the finished turn's element and its stored turn. */
async function send(text) {
  const before = await page.locator("#turns > li.turn").count();
  await page.getByLabel("Your message").fill(text);
  await page.getByLabel("Your message").press("Enter");
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
  const { turns } = await api(`/v1/conversations/${conversationId}/turns`);
  return { turn: page.locator("#turns > li.turn").nth(before), stored: turns[turns.length - 1] };
}

describe("personalization only where it belongs", { timeout: 5 * 60_000 }, () => {
  before(async () => {
    const created = await api("/v1/conversations", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ title: TITLE, collection: COLLECTION, ptkb: [{ text: STATEMENT }] }),
    });
    conversationId = created.conversation.id;

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    });
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(15_000);
    page.on("pageerror", (error) => pageErrors.push(String(error)));
    await page.goto(BASE + "/");
    await page.getByLabel("Token").fill(TOKEN);
    await page.getByLabel("Token").press("Enter");
    await page.getByRole("navigation", { name: "Conversations" }).waitFor();
    await page.goto(`${BASE}/#/c/${conversationId}`);
    await page.getByRole("heading", { name: TITLE }).waitFor();
    const settings = page.locator("#composer details.answer-settings");
    await settings.locator("summary").click();
    await page.locator("#composer").getByLabel("Generator").selectOption("extractive");
    await settings.locator("summary").click();
  });

  after(async () => {
    if (browser) await browser.close();
  });

  it("answers a PostgreSQL question without the statement", async () => {
    const { turn, stored } = await send("How do I create an index on a table in PostgreSQL?");
    assert.deepEqual(stored.ptkb_ranking.map((s) => s.text), [STATEMENT], "the statement was ranked");
    assert.deepEqual(stored.ptkb_ranking.filter((s) => s.selected), [], "and not selected");
    const personal = turn.locator(".personal");
    assert.equal(await personal.textContent(), "None of your statements matched this question: the answer is not personalized.");
    assert.equal(await turn.getByText("Personalized with").count(), 0);
  });

  it("personalizes a dinner question with it", async () => {
    const { turn, stored } = await send("What should I cook for dinner tonight?");
    assert.deepEqual(stored.ptkb_ranking.filter((s) => s.selected).map((s) => s.text), [STATEMENT]);
    assert.match(await turn.locator(".personal").textContent(), /^Personalized with/);
    assert.deepEqual(await turn.locator(".personal .chip").allTextContents(), [STATEMENT]);
  });

  it("raised no script errors", () => {
    assert.deepEqual(pageErrors, []);
  });
});
