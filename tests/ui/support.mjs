// What the browser tests of one signed-in user share: the environment scripts/ui-test.sh sets,
// the API as that user, a headless Chromium page that records script and CSP errors, and
// sending a message from the composer until its turn is finished.

import assert from "node:assert/strict";
import { chromium } from "playwright-core";

/** The environment variable `name`; the tests run only through scripts/ui-test.sh. */
export function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the browser tests through scripts/ui-test.sh`);
  return value;
}

export const BASE = required("CONVRAG_UI_URL").replace(/\/$/, "");
export const COLLECTION = process.env.CONVRAG_UI_COLLECTION || "diet";
export const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
/** How long one turn may take. */
export const TURN_TIMEOUT = 60_000;

/** `fetch` of `path` as the user of `token`; fails the test unless it succeeds. */
export function apiAs(token) {
  return async (path, init = {}) => {
    const r = await fetch(BASE + path, { ...init, headers: { Authorization: `Bearer ${token}`, ...(init.headers || {}) } });
    const body = await r.json();
    assert.ok(r.status < 300, `${init.method || "GET"} ${path}: ${r.status} ${JSON.stringify(body)}`);
    return body;
  };
}

/**
 * Chromium headless at desktop size, signed in with `token`, on the conversation `conversationId`
 * (titled `title`), with the composer's generator set to extractive (quick, and its answers cite
 * the passages they quote). Script and Content Security Policy errors are pushed to `errors`.
 */
export async function openConversation({ token, conversationId, title, errors }) {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  page.on("pageerror", (error) => errors.push(String(error)));
  page.on("console", (message) => {
    if (message.type() === "error" && /Content Security Policy/i.test(message.text())) errors.push(message.text());
  });
  await page.goto(BASE + "/");
  await page.getByLabel("Token").fill(token);
  await page.getByLabel("Token").press("Enter");
  await page.getByRole("navigation", { name: "Conversations" }).waitFor();
  await page.goto(`${BASE}/#/c/${conversationId}`);
  await page.getByRole("heading", { name: title }).waitFor();
  const settings = page.locator("#composer details.answer-settings");
  await settings.locator("summary").click();
  await page.locator("#composer").getByLabel("Generator").selectOption("extractive");
  await settings.locator("summary").click();
  return { browser, page };
}

/**
 * Sends `text` from the composer of the conversation `conversationId` and waits until its turn
 * is finished; returns the turn's element and the request body the page sent.
 */
export async function sendFromComposer(page, conversationId, text) {
  const before = await page.locator("#turns > li.turn").count();
  const request = page.waitForRequest((r) => r.method() === "POST" && r.url().endsWith(`/v1/conversations/${conversationId}/turns`));
  await page.getByLabel("Your message").fill(text);
  await page.getByLabel("Your message").press("Enter");
  const body = (await request).postDataJSON();
  await page.waitForFunction(
    (index) => {
      const turn = document.querySelectorAll("#turns > li.turn")[index];
      return (turn && !turn.classList.contains("streaming") && turn.dataset.version) || !document.getElementById("composer-error").hidden;
    },
    before,
    { timeout: TURN_TIMEOUT },
  );
  const error = page.locator("#composer-error");
  assert.equal(await error.isVisible(), false, `sending failed: ${await error.textContent()}`);
  return { turn: page.locator("#turns > li.turn").nth(before), body };
}

/**
 * Creates a conversation titled `title` of `token`'s user on the test collection, with
 * `statements` as its PTKB, and opens it as openConversation does; returns its id too.
 */
export async function openNewConversation({ token, title, statements = [], errors }) {
  const created = await apiAs(token)("/v1/conversations", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ title, collection: COLLECTION, ptkb: statements.map((text) => ({ text })) }),
  });
  const conversationId = created.conversation.id;
  return { conversationId, ...(await openConversation({ token, conversationId, title, errors })) };
}

/** Sends `text` as sendFromComposer does; returns the turn's element and the turn as stored. */
export async function sendAndRead(page, token, conversationId, text) {
  const { turn } = await sendFromComposer(page, conversationId, text);
  const { turns } = await apiAs(token)(`/v1/conversations/${conversationId}/turns`);
  return { turn, stored: turns[turns.length - 1] };
}

/** Opens the "Why this answer" panel of the turn element `turn`. */
export async function openWhy(turn) {
  const details = turn.locator("details.why");
  if (!(await details.evaluate((d) => d.open))) await details.locator("summary").click();
}

/** The text of `locator` as seen on the screen: without the words only screen readers get. */
export async function visibleText(locator) {
  return locator.evaluate((node) => {
    const copy = node.cloneNode(true);
    for (const hidden of copy.querySelectorAll(".visually-hidden")) hidden.remove();
    return copy.textContent;
  });
}
