// Answers are Markdown, rendered safely: a document's code block comes back in an extractive
// answer as a monospaced `pre code` block whose copy button puts the code on the clipboard, and
// the `<script>` inside that code is shown as text, never run; raw HTML and a `javascript:` link
// in a sentence are shown or dropped, never run either.
//
// Runs against the server scripts/ui-test.sh starts: CONVRAG_UI_URL, CONVRAG_UI_MD_TOKEN (a user of
// its own, whose private collection this test makes), CONVRAG_UI_ARTIFACTS, CHROMIUM.

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
const TOKEN = required("CONVRAG_UI_MD_TOKEN");
const ARTIFACTS = process.env.CONVRAG_UI_ARTIFACTS || new URL("../../target/ui-artifacts", import.meta.url).pathname;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const TIMEOUT = 60_000;

const COLLECTION = "heron-survey";
const SCRIPT = "<script>window.__pwned=1</script>";
const CODE = `heronctl publish --survey 2026 --out counts.html\necho '${SCRIPT}' >> counts.html`;
const DOCUMENT = [
  "# Publishing the heron survey",
  "",
  "The heron survey counts the nests along the Kestrel estuary every spring.",
  "",
  "To publish the heron counts on the survey web page, run a command like:",
  "",
  "```sh",
  CODE,
  "```",
  "",
  "The published page lists the nests of every colony by year.",
  "",
].join("\n");

async function api(path, init = {}) {
  const r = await fetch(BASE + path, { ...init, headers: { Authorization: `Bearer ${TOKEN}`, ...(init.headers || {}) } });
  const body = await r.json();
  return { status: r.status, body };
}

let browser;
let page;
let conversationId;
const pageErrors = [];

describe("answers rendered as Markdown", { timeout: 5 * 60_000 }, () => {
  before(async () => {
    // A private collection holding the document, and a conversation over it (through the API:
    // chat.test.mjs tests the page's own forms for these).
    const created = await api("/v1/collections", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: COLLECTION }),
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const form = new FormData();
    form.append("files", new Blob([DOCUMENT], { type: "text/markdown" }), "heron-survey.md");
    const uploaded = await api(`/v1/collections/${COLLECTION}/documents`, { method: "POST", body: form });
    assert.equal(uploaded.status, 202, JSON.stringify(uploaded.body));
    let status = "building";
    for (let i = 0; i < 600 && status === "building"; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      status = (await api(`/v1/collections/${COLLECTION}`)).body.collection.status;
    }
    assert.equal(status, "ready");
    const conversation = await api("/v1/conversations", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ title: "Heron survey", collection: COLLECTION }),
    });
    assert.equal(conversation.status, 201, JSON.stringify(conversation.body));
    conversationId = conversation.body.conversation.id;

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    });
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(BASE).origin });
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

  it("shows the code of an answer as a block with a working copy button, and its <script> as text", async () => {
    await page.goto(BASE + "/");
    await page.getByLabel("Token").fill(TOKEN);
    await page.getByLabel("Token").press("Enter");
    await page.getByRole("navigation", { name: "Conversations" }).waitFor();
    await page.goto(`${BASE}/#/c/${conversationId}`);
    await page.getByRole("heading", { name: "Heron survey" }).waitFor();
    await page.getByText("Answer settings").click();
    await page.locator("#composer-generator").selectOption("extractive");
    await page.getByText("Answer settings").click();
    await page.getByLabel("Your message").fill("How do I publish the heron counts on the survey web page?");
    await page.getByLabel("Your message").press("Enter");
    const turn = page.locator("#turns > li.turn").first();
    await page.waitForFunction(() => {
      const t = document.querySelector("#turns > li.turn");
      return t && !t.classList.contains("streaming") && t.dataset.version;
    }, null, { timeout: TIMEOUT }).catch((error) => {
      throw new Error(`${error.message} (page errors: ${JSON.stringify(pageErrors)})`);
    });
    assert.deepEqual(pageErrors, []);

    // The stored answer: the introducing sentence, then the code block as a fenced block citing
    // the document.
    const { body } = await api(`/v1/conversations/${conversationId}/turns`);
    const [stored] = body.turns;
    const fence = stored.sentences.findIndex((s) => s.text.startsWith("```"));
    assert.ok(fence > 0, `the answer holds the code block: ${JSON.stringify(stored.sentences)}`);
    assert.match(stored.sentences[fence - 1].text, /run a command like:$/);
    assert.equal(stored.sentences[fence].text, "```sh\n" + CODE + "\n```");
    assert.deepEqual(stored.sentences[fence].citations, [1]);

    // On the page: a monospaced `pre code` block holding the code, the <script> visible as text.
    const code = turn.locator(".answer pre code");
    await code.waitFor();
    assert.equal(await code.count(), 1);
    assert.equal((await code.textContent()).replace(/\n$/, ""), CODE);
    assert.match(await code.evaluate((n) => getComputedStyle(n).fontFamily), /monospace/);
    assert.equal(await code.evaluate((n) => n.querySelectorAll("*").length), 0, "the code holds no elements");
    assert.equal(await code.isVisible(), true);
    assert.ok((await code.innerText()).includes(SCRIPT), "the <script> is shown as text");
    assert.equal(await page.evaluate(() => typeof window.__pwned), "undefined");
    // The prose sentences stay inline, each with its citation button.
    assert.deepEqual(await turn.locator(".answer .cite").allTextContents(), stored.sentences.flatMap((s) => s.citations.map(String)));
    const block = turn.locator(".answer .sentence.block", { has: page.locator("pre") });
    assert.equal(await block.locator(".cite").count(), 1, "the code block cites its passage");

    // The copy button copies the code.
    await page.evaluate(() => navigator.clipboard.writeText("nothing yet"));
    await turn.getByRole("button", { name: "Copy the code" }).click();
    await turn.getByRole("button", { name: "Copy the code" }).filter({ hasText: "Copied" }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), CODE);
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, "markdown-answer.png") });
  });

  it("shows raw HTML in a sentence as text and drops javascript: links", async () => {
    const rendered = await page.evaluate(async () => {
      const { sentenceNode } = await import("/static/render.js");
      const node = sentenceNode(
        { text: 'Nests are counted <img src="x" onerror="window.__pwned=2"> by **hand**, see [the log](javascript:window.__pwned=3).', citations: [] },
        [],
        () => {},
      );
      document.querySelector("#turns .answer").append(node);
      await new Promise((resolve) => setTimeout(resolve, 200));
      const link = node.querySelector("a");
      link?.click();
      return {
        elements: [...node.querySelectorAll("*")].map((n) => n.tagName.toLowerCase()),
        text: node.textContent,
        href: link ? link.getAttribute("href") : null,
        pwned: typeof window.__pwned,
      };
    });
    assert.ok(!rendered.elements.includes("img"), JSON.stringify(rendered));
    assert.ok(rendered.elements.includes("strong"), "Markdown emphasis is rendered");
    assert.match(rendered.text, /<img src="x" onerror="window.__pwned=2">/);
    assert.ok(rendered.href === null || !/^javascript:/i.test(rendered.href), JSON.stringify(rendered));
    assert.equal(rendered.pwned, "undefined");
    assert.deepEqual(pageErrors, []);
  });
});
