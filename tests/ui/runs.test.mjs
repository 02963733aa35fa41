// Browser test of the Runs view: the test user's two stored batch runs (scripts/ui-test.sh makes
// them with `convrag run ikat --user`: automatic and manual rewrites of the made-up topics
// tests/fixtures/ikat/topics_ui_runs.json), judgments uploaded through the page, the runs listed
// with their measures, one run's
// turns, and the two compared turn by turn (rewrites, selected statements, graded passages, the
// difference), sorted by the difference. A second user sees no runs.
//
// Environment as chat.test.mjs, plus CONVRAG_UI_RUNS_TOKEN (the token of the runs' owner) and
// CONVRAG_UI_QRELS (the qrels file to upload).

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
// The runs' owner: a user of their own, so the chat test's user keeps an empty conversation list.
const TOKEN = required("CONVRAG_UI_RUNS_TOKEN");
const OTHER_TOKEN = required("CONVRAG_UI_OTHER_TOKEN");
const QRELS = required("CONVRAG_UI_QRELS");
const ARTIFACTS = process.env.CONVRAG_UI_ARTIFACTS || new URL("../../target/ui-artifacts", import.meta.url).pathname;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const RUN_A = "diet-automatic";
const RUN_B = "diet-manual";

async function api(path, token = TOKEN) {
  const r = await fetch(BASE + path, { headers: { Authorization: `Bearer ${token}` } });
  assert.equal(r.status, 200, `GET ${path}`);
  return r.json();
}

let browser;
let page;
const pageErrors = [];

async function screenshot(name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, name), fullPage: true });
}

let firstFailure = null;
function step(name, fn) {
  it(name, async () => {
    if (firstFailure) throw new Error(`not run: the step "${firstFailure}" failed`);
    try {
      await fn();
    } catch (error) {
      firstFailure = name;
      if (page) await screenshot(`failed-runs-${name.replace(/[^a-z0-9]+/gi, "-").slice(0, 60)}.png`).catch(() => {});
      throw error;
    }
  });
}

describe("convrag Runs view", { timeout: 5 * 60_000 }, () => {
  before(async () => {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    });
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(15_000);
    page.on("pageerror", (error) => pageErrors.push(String(error)));
    page.on("console", (message) => {
      if (message.type() === "error" && /Content Security Policy/i.test(message.text())) pageErrors.push(message.text());
    });
  });

  after(async () => {
    if (browser) await browser.close();
  });

  step("signs in and opens the Runs view listing both stored runs", async () => {
    await page.goto(BASE + "/");
    await page.getByLabel("Token").fill(TOKEN);
    await page.getByLabel("Token").press("Enter");
    await page.getByRole("navigation", { name: "Conversations" }).waitFor();
    await page.getByRole("button", { name: "Runs", exact: true }).click();
    await page.getByRole("heading", { name: "Runs", exact: true }).waitFor();
    const rows = page.locator("#runs-rows tr");
    await page.waitForFunction(() => document.querySelectorAll("#runs-rows tr").length === 2);
    const names = (await rows.locator("th").allTextContents()).sort();
    assert.deepEqual(names, [RUN_A, RUN_B]);
    // No judgments yet: the page says so and shows no numbers.
    await page.getByText("Upload judgments (TREC qrels) to see the measures.").waitFor();
  });

  step("uploads judgments and shows each run's measures as the server computes them", async () => {
    await page.getByLabel("Name of new judgments").fill("diet-judgments");
    await page.getByLabel("Qrels file").setInputFiles(QRELS);
    await page.getByRole("button", { name: "Upload judgments" }).click();
    await page.waitForFunction(() => document.getElementById("runs-qrels").value === "diet-judgments");
    for (const run of [RUN_A, RUN_B]) {
      const { summary } = await api(`/v1/runs/${run}?qrels=diet-judgments`);
      const cell = page.locator(`#runs-rows tr[data-run="${run}"] td[data-measure="ndcg_cut_10"]`);
      await page.waitForFunction(
        ([selector, text]) => document.querySelector(selector)?.textContent === text,
        [`#runs-rows tr[data-run="${run}"] td[data-measure="ndcg_cut_10"]`, summary.ndcg_cut_10.toFixed(4)],
      );
      assert.equal(await cell.textContent(), summary.ndcg_cut_10.toFixed(4));
    }
  });

  step("opens one run to see its turns with their measures", async () => {
    await page.locator(`#runs-rows tr[data-run="${RUN_A}"] th button`).click();
    await page.getByRole("heading", { name: new RegExp(`^${RUN_A}: 5 judged turns`) }).waitFor();
    const report = await api(`/v1/runs/${RUN_A}?qrels=diet-judgments`);
    const rows = page.locator("#run-detail-rows tr");
    assert.equal(await rows.count(), report.turns.length);
    for (const turn of report.turns) {
      const row = page.locator(`#run-detail-rows tr[data-turn="${turn.turn_id}"]`);
      assert.equal(await row.locator('td[data-measure="map"]').textContent(), turn.measures.map.toFixed(4));
      assert.equal(await row.locator("td.rewrite").textContent(), turn.rewrite);
    }
  });

  step("compares the two runs turn by turn, sorted by the difference", async () => {
    await page.getByLabel(`Compare ${RUN_A}`).check();
    await page.getByLabel(`Compare ${RUN_B}`).check();
    await page.getByLabel("Compare on").selectOption("ndcg_cut.10");
    await page.getByRole("button", { name: "Compare the two ticked runs" }).click();
    await page.getByRole("heading", { name: `${RUN_B} − ${RUN_A} on ndcg_cut_10` }).waitFor();
    const c = await api(`/v1/runs/compare?a=${RUN_A}&b=${RUN_B}&qrels=diet-judgments&measure=ndcg_cut.10`);
    const turns = page.locator("#run-compare-turns > li");
    assert.equal(await turns.count(), c.turns.length);

    // A turn the two runs rewrote differently: both rewrites, both statement lists, both
    // passage lists with grades, and the difference.
    const changed = c.turns.find((t) => t.a.rewrite !== t.b.rewrite);
    assert.ok(changed, "the manual run rewrites some turn differently");
    const item = page.locator(`#run-compare-turns > li[data-turn="${changed.turn_id}"]`);
    const sides = item.locator(".compare-side");
    assert.equal(await sides.nth(0).locator(".rewrite").textContent(), changed.a.rewrite);
    assert.equal(await sides.nth(1).locator(".rewrite").textContent(), changed.b.rewrite);
    assert.deepEqual(await sides.nth(0).locator(".compare-ptkb li").allTextContents(), changed.a.ptkb);
    assert.deepEqual(await sides.nth(1).locator(".compare-ptkb li").allTextContents(), changed.b.ptkb);
    const grades = (side) =>
      side.passages.slice(0, 5).map((p) => (p.grade === null ? "unjudged" : `grade ${p.grade}`));
    assert.deepEqual(await sides.nth(0).locator(".compare-passages .grade").allTextContents(), grades(changed.a));
    assert.deepEqual(await sides.nth(1).locator(".compare-passages .grade").allTextContents(), grades(changed.b));
    const shown = Number(await item.locator(".difference").getAttribute("data-value"));
    assert.equal(shown, changed.difference);

    // Sorted by the difference, B better first: the page's order is the server's values sorted.
    await page.getByLabel("Order").selectOption("difference-desc");
    const order = await page.locator("#run-compare-turns > li").evaluateAll((items) => items.map((i) => i.dataset.turn));
    const expected = [...c.turns].sort((x, y) => y.difference - x.difference).map((t) => t.turn_id);
    const values = (ids) => ids.map((id) => c.turns.find((t) => t.turn_id === id).difference);
    assert.deepEqual(values(order), values(expected));
    await page.getByLabel("Order").selectOption("difference-asc");
    const ascending = await page.locator("#run-compare-turns > li").evaluateAll((items) => items.map((i) => i.dataset.turn));
    assert.deepEqual(values(ascending), values(expected).reverse());
    await screenshot("runs-compare-desktop.png");
  });

  step("another user sees no runs, and the page ran without errors", async () => {
    assert.deepEqual((await api("/v1/runs", OTHER_TOKEN)).runs, []);
    const r = await fetch(`${BASE}/v1/runs/${RUN_A}?qrels=diet-judgments`, {
      headers: { Authorization: `Bearer ${OTHER_TOKEN}` },
    });
    assert.equal(r.status, 404);
    assert.deepEqual(pageErrors, []);
  });
});
