// The search query in "Why this answer": in a two-turn conversation with one statement, the words
// the statement and the first turn brought into the query are marked, each saying where it came
// from (a title, and the same words for screen readers), with a legend of the marks; the
// utterance's own words are not marked.
//
// Runs against the server scripts/ui-test.sh starts: CONVRAG_UI_ORIGINS_TOKEN (a user of its own,
// so its conversation stays out of the chat test's list) and what tests/ui/support.mjs reads.

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { openNewConversation, openWhy, required, sendAndRead, visibleText } from "./support.mjs";

const TOKEN = required("CONVRAG_UI_ORIGINS_TOKEN");
const TITLE = "Where the words came from";
const STATEMENT = "I am vegetarian.";
const ARTIFACTS = required("CONVRAG_UI_ARTIFACTS");

let browser;
let page;
let conversationId;
const pageErrors = [];

/** Sends `text`; returns the finished turn's element (its "why" panel open) and its stored turn. */
async function send(text) {
  const sent = await sendAndRead(page, TOKEN, conversationId, text);
  await openWhy(sent.turn);
  return sent;
}

/** The "Search query" section of a turn element. */
function querySection(turn) {
  return turn.locator(".why-section").filter({ has: page.getByRole("heading", { name: "Search query", exact: true }) });
}

/** Each marked word of the section: its text, origin class, title and screen reader text. */
async function marks(section) {
  return section.locator(".search-query mark").evaluateAll((nodes) =>
    nodes.map((n) => ({
      word: n.firstChild.textContent,
      class: n.className,
      title: n.title,
      spoken: n.querySelector(".visually-hidden").textContent,
    })),
  );
}

describe("the search query marks where its words came from", { timeout: 5 * 60_000 }, () => {
  before(async () => {
    ({ conversationId, browser, page } = await openNewConversation({ token: TOKEN, title: TITLE, statements: [STATEMENT], errors: pageErrors }));
  });

  after(async () => {
    if (browser) await browser.close();
  });

  it("marks the statement's word in the first turn", async () => {
    const { turn, stored } = await send("What should I cook for dinner tonight?");
    const statement = stored.ptkb_ranking.find((s) => s.text === STATEMENT);
    assert.equal(statement.selected, true, JSON.stringify(stored.ptkb_ranking));
    // The rewriter wrote the statement's word into the question (it speaks of the user), and the
    // first stage adds the statement's content words ("I am" are none).
    assert.equal(stored.search_query.text, "What should I cook for dinner tonight? vegetarian vegetarian");
    const section = querySection(turn);
    assert.equal(await visibleText(section.locator(".search-query")), stored.search_query.text);
    const label = `from your statement: ${STATEMENT}`;
    const fromStatement = { word: "vegetarian", class: "origin origin-ptkb", title: label, spoken: ` (${label})` };
    assert.deepEqual(await marks(section), [fromStatement, fromStatement]);
    assert.deepEqual(await section.locator(".origin-legend li").allTextContents(), ["from your statements"]);
  });

  it("marks the words the second turn took from the first and its answer", async () => {
    const { turn, stored } = await send("How long does it take?");
    // "it" is turn 1's dinner: its words ("cook for dinner tonight" whole) and the days the
    // answer named. The statement is not selected this time: nothing of it.
    assert.equal(stored.search_query.text, "How long does cook for dinner tonight Monday Tuesday Wednesday take?");
    assert.deepEqual(stored.ptkb_ranking.filter((s) => s.selected), []);
    const section = querySection(turn);
    assert.equal(await visibleText(section.locator(".search-query")), stored.search_query.text);
    const mark = (word, origin, label) => ({ word, class: `origin origin-${origin}`, title: label, spoken: ` (${label})` });
    const history = (word) => mark(word, "history", "from turn 1");
    const answer = (word) => mark(word, "answer", "from the answer in turn 1");
    // The utterance's own words ("How long does", "take") are not marked.
    assert.deepEqual(await marks(section), [
      history("cook"),
      history("for"),
      history("dinner"),
      history("tonight"),
      answer("Monday"),
      answer("Tuesday"),
      answer("Wednesday"),
    ]);
    assert.deepEqual(await section.locator(".origin-legend li").allTextContents(), ["from your earlier messages", "from earlier answers"]);
    await section.screenshot({ path: join(ARTIFACTS, "search-query.png") });
  });

  it("raised no script errors", () => {
    assert.deepEqual(pageErrors, []);
  });
});
