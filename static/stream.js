// The turn stream: the text/event-stream wire format, the events the page handles with the
// payload fields it reads (the contract with src/api/turns.rs, checked against the real server by
// tests/ui/stream.test.mjs), and the reading of one turn's stream. No DOM access, so node can
// import it.

import { ApiError, unreachable } from "./errors.js";

/**
 * The events of a turn stream the page handles, each with the payload fields the page reads:
 * `a.b` is field b of object a, `a[].b` is field b of every item of array a. Handlers get only
 * the top-level fields named here. `turn` carries the stored turn, as `GET .../turns/{id}` gives it.
 */
export const TURN_EVENTS = Object.freeze({
  ptkb: ["ptkb_ranking", "ptkb_ranking[].text", "ptkb_ranking[].score", "ptkb_ranking[].rank", "ptkb_ranking[].selected"],
  rewrite: ["rewritten_utterance", "method", "search_query", "search_query.text", "search_query.words", "search_query.words[].text", "search_query.words[].origin"],
  passages: [
    "passages",
    "passages[].rank",
    "passages[].passage_id",
    "passages[].collection",
    "passages[].title",
    "passages[].url",
    "passages[].text",
    "passages[].retrieval_score",
    "passages[].rerank_score",
    "passages[].score",
    "passages[].used",
  ],
  sentence: ["text", "citations"],
  restart: ["reason"],
  turn: ["turn", "turn.id", "turn.seq", "turn.version"],
  error: ["error", "error.code", "error.message", "error.field"],
});

function segments(path) {
  return path.replace(/\[\]/g, ".[]").split(".");
}

function present(value, [head, ...rest]) {
  if (head === undefined) return true;
  if (head === "[]") return Array.isArray(value) && value.every((item) => present(item, rest));
  return value !== null && typeof value === "object" && !Array.isArray(value) && head in value && present(value[head], rest);
}

/** The fields of TURN_EVENTS[event] that `payload` lacks (all of them for an unknown event). */
export function missingFields(event, payload) {
  const paths = Object.hasOwn(TURN_EVENTS, event) ? TURN_EVENTS[event] : ["(an event the page handles)"];
  return paths.filter((path) => !present(payload, segments(path)));
}

/** The payload's top-level fields that TURN_EVENTS names for the event. */
function readFields(event, payload) {
  const names = new Set(TURN_EVENTS[event].map((path) => segments(path)[0]));
  return Object.fromEntries([...names].map((name) => [name, payload[name]]));
}

/** Parses a text/event-stream body (a ReadableStream of bytes) into {event, data} records. */
export async function* serverSentEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buffer = (buffer + value).replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const record = parseRecord(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (record) yield record;
    }
    if (done) break;
  }
  const last = parseRecord(buffer);
  if (last) yield last;
}

function parseRecord(block) {
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "event") event = value;
    else if (name === "data") data.push(value);
  }
  return data.length ? { event, data: data.join("\n") } : null;
}

/**
 * Reads one turn's stream: calls `on[event](fields)` for the progress events (ptkb, rewrite,
 * passages, sentence, restart) and resolves to the stored turn of the final `turn` event.
 * Rejects with ApiError on an `error` event, an unreadable event, or a cut stream.
 */
export async function readTurnStream(body, on = {}) {
  try {
    for await (const { event, data } of serverSentEvents(body)) {
      if (!Object.hasOwn(TURN_EVENTS, event)) continue;
      let payload;
      try {
        payload = JSON.parse(data);
      } catch {
        throw new ApiError(0, "bad_stream", `the server sent an unreadable ${event} event`);
      }
      const fields = readFields(event, payload);
      if (event === "turn") return fields.turn;
      if (event === "error") {
        const e = fields.error || {};
        throw new ApiError(500, e.code || "internal", e.message || "the turn failed", e.field ?? null);
      }
      if (typeof on[event] === "function") on[event](fields);
    }
  } catch (e) {
    if (e instanceof ApiError) throw e;
    throw unreachable(e);
  }
  throw new ApiError(0, "stream_cut", "the answer stream ended before the turn was complete");
}

/**
 * Callbacks of the turn stream that render into a turn view (`turn-view.js`): one per progress
 * event. Here, beside the contract, so node checks them without loading the page's renderer.
 */
export function streamHandlers(view) {
  return {
    ptkb: (data) => view.update({ ptkb_ranking: data.ptkb_ranking }, "Rewriting your question…"),
    rewrite: (data) =>
      view.update(
        { rewritten_utterance: data.rewritten_utterance, rewrite_method: data.method, search_query: data.search_query },
        "Searching the passages…",
      ),
    passages: (data) => view.update({ passages: data.passages }, "Writing the answer…"),
    sentence: (data) => view.addSentence(data),
    restart: (data) => view.restart(data.reason),
  };
}
