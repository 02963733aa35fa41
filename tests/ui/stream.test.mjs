// The turn stream's contract between the server (src/api/turns.rs) and the page: a real turn
// streamed by the real server (scripts/ui-test.sh starts it) is read through the page's own
// stream module (static/stream.js, imported here as the browser imports it). Every event the
// server sends must be one the page handles, carrying every field the page reads, and the final
// `turn` event must be the stored turn. Renaming an event or a field on either side fails here.
//
// Environment: CONVRAG_UI_URL, CONVRAG_UI_TOKEN (a user's token), CONVRAG_UI_COLLECTION.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { missingFields, readTurnStream, serverSentEvents, streamHandlers, TURN_EVENTS } from "../../static/stream.js";

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the browser tests through scripts/ui-test.sh`);
  return value;
}

const BASE = required("CONVRAG_UI_URL").replace(/\/$/, "");
const TOKEN = required("CONVRAG_UI_TOKEN");
const COLLECTION = process.env.CONVRAG_UI_COLLECTION || "diet";

/** The events the page reads progress from; `turn` and `error` end the stream. */
const PROGRESS_EVENTS = ["ptkb", "rewrite", "passages", "sentence", "restart"];

async function request(method, path, body, accept = "application/json") {
  const headers = { Authorization: `Bearer ${TOKEN}`, Accept: accept };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  return fetch(BASE + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
}

async function json(method, path, body, status) {
  const response = await request(method, path, body);
  const text = await response.text();
  assert.equal(response.status, status, `${method} ${path}: ${text}`);
  return text ? JSON.parse(text) : null;
}

describe("the turn stream", { timeout: 5 * 60_000 }, () => {
  it("declares a handler of the turn view for every progress event it reads", () => {
    assert.deepEqual(Object.keys(TURN_EVENTS).sort(), [...PROGRESS_EVENTS, "turn", "error"].sort());
    assert.deepEqual(Object.keys(streamHandlers(null)).sort(), [...PROGRESS_EVENTS].sort());
  });

  it("sends only events the page handles, with the fields it reads, and ends with the stored turn", async () => {
    const { conversation } = await json(
      "POST",
      "/v1/conversations",
      { title: "Stream contract", collection: COLLECTION, ptkb: [{ text: "I am vegetarian and cook dinner for my family." }] },
      201,
    );
    try {
      const response = await request(
        "POST",
        `/v1/conversations/${conversation.id}/turns`,
        { utterance: "What should I cook for dinner this week?", generator: "extractive" },
        "text/event-stream",
      );
      assert.equal(response.status, 200);
      assert.match(response.headers.get("content-type"), /^text\/event-stream/);

      // One copy of the bytes for the page's reader, one to see exactly what the server sent.
      const [forPage, forTest] = response.body.tee();
      const sentPromise = (async () => {
        const records = [];
        for await (const record of serverSentEvents(forTest)) records.push(record);
        return records;
      })();
      const calls = [];
      const handlers = Object.fromEntries(PROGRESS_EVENTS.map((event) => [event, (fields) => calls.push({ event, fields })]));
      const turn = await readTurnStream(forPage, handlers);
      const sent = await sentPromise;

      const names = sent.map((r) => r.event);
      for (const { event, data } of sent) {
        assert.ok(Object.hasOwn(TURN_EVENTS, event), `the server sent a "${event}" event, which the page does not handle (it handles ${Object.keys(TURN_EVENTS)})`);
        const payload = JSON.parse(data);
        assert.deepEqual(missingFields(event, payload), [], `the "${event}" event lacks fields the page reads: ${data.slice(0, 300)}`);
        // The check itself bites: without any one field the page reads, the event is refused.
        for (const name of new Set(TURN_EVENTS[event].map((path) => path.split(/[.[]/)[0]))) {
          const { [name]: _dropped, ...renamed } = payload;
          assert.ok(missingFields(event, renamed).includes(name), `${event} without ${name}`);
        }
      }
      // An extractive turn: every stage reports, the sentences follow, the stored turn ends it.
      const sentences = names.filter((n) => n === "sentence").length;
      assert.ok(sentences >= 1, `no sentence event in ${names}`);
      assert.deepEqual(names, ["ptkb", "rewrite", "passages", ...Array(sentences).fill("sentence"), "turn"]);
      const payloadOf = (event) => JSON.parse(sent.find((r) => r.event === event).data);
      // Arrays of items are checked item by item only when they have items.
      assert.ok(payloadOf("ptkb").ptkb_ranking.length >= 1, "the PTKB ranking has the statement");
      assert.ok(payloadOf("passages").passages.length >= 1, "passages were found");

      // The page's reader called the turn view's handlers for each progress event, in order,
      // with the fields the contract names.
      assert.deepEqual(
        calls.map((c) => c.event),
        names.slice(0, -1),
      );
      for (const [i, call] of calls.entries()) {
        const payload = JSON.parse(sent[i].data);
        const expected = Object.fromEntries(
          [...new Set(TURN_EVENTS[call.event].map((path) => path.split(/[.[]/)[0]))].map((name) => [name, payload[name]]),
        );
        assert.deepEqual(call.fields, expected, `${call.event} handler fields`);
      }

      // The final event is the stored turn, and the streamed sentences are its sentences.
      const stored = (await json("GET", `/v1/conversations/${conversation.id}/turns/${turn.id}`, undefined, 200)).turn;
      assert.deepEqual(turn, stored);
      assert.deepEqual(JSON.parse(sent.at(-1).data), { turn: stored });
      assert.deepEqual(
        calls.filter((c) => c.event === "sentence").map((c) => c.fields),
        stored.sentences.map((s) => ({ text: s.text, citations: s.citations })),
      );
      assert.deepEqual(payloadOf("passages").passages.map((p) => p.passage_id), stored.passages.map((p) => p.passage_id));
    } finally {
      await json("DELETE", `/v1/conversations/${conversation.id}`, undefined, 204);
    }
  });
});
