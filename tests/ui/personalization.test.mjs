// Personalization only where it belongs: with "I am vegetarian." as the only statement, a
// question about PostgreSQL shows that none of the statements matched (no "Personalized with"),
// and a dinner question in the same conversation is personalized with it.
//
// Runs against the server scripts/ui-test.sh starts (with the bi-encoder, so turns serve the
// PTKB ranker that may select nothing): CONVRAG_UI_PERSONAL_TOKEN (a user of its own, so its
// conversation stays out of the chat test's list) and what tests/ui/support.mjs reads.

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { openNewConversation, required, sendAndRead } from "./support.mjs";

const TOKEN = required("CONVRAG_UI_PERSONAL_TOKEN");
const TITLE = "Only where it belongs";
const STATEMENT = "I am vegetarian.";

let browser;
let page;
let conversationId;
const pageErrors = [];

/** Sends `text` from the composer; returns the finished turn's element and its stored turn. */
function send(text) {
  return sendAndRead(page, TOKEN, conversationId, text);
}

describe("personalization only where it belongs", { timeout: 5 * 60_000 }, () => {
  before(async () => {
    ({ conversationId, browser, page } = await openNewConversation({ token: TOKEN, title: TITLE, statements: [STATEMENT], errors: pageErrors }));
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
