// The convrag HTTP API as the page uses it: JSON requests with the bearer token, the turn
// stream (fetch + a text/event-stream reader, since EventSource cannot POST), and errors turned
// into plain words.

/** An error answer of the API (or a failure to reach it: status 0). */
export class ApiError extends Error {
  constructor(status, code, message, field = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

function unreachable(cause) {
  const error = new ApiError(0, "unreachable", String(cause && cause.message ? cause.message : cause));
  error.cause = cause;
  return error;
}

/** The API's error envelope, or a stand-in when the body is not one (a proxy's HTML page). */
async function errorOf(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // Not JSON: keep the status only.
  }
  const e = body && body.error;
  if (e && typeof e.code === "string") {
    return new ApiError(response.status, e.code, e.message || e.code, e.field ?? null);
  }
  return new ApiError(response.status, "http_" + response.status, response.statusText || "error");
}

export class Api {
  constructor(token) {
    this.token = token;
  }

  headers(extra = {}) {
    return { Authorization: `Bearer ${this.token}`, ...extra };
  }

  /** One JSON request; resolves to the parsed body (null for 204), rejects with ApiError. */
  async request(method, path, body) {
    const init = { method, headers: this.headers() };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (e) {
      throw unreachable(e);
    }
    if (!response.ok) throw await errorOf(response);
    if (response.status === 204) return null;
    try {
      return await response.json();
    } catch (e) {
      throw unreachable(e);
    }
  }

  me() {
    return this.request("GET", "/v1/users/me");
  }
  conversations() {
    return this.request("GET", "/v1/conversations");
  }
  conversation(id) {
    return this.request("GET", `/v1/conversations/${encodeURIComponent(id)}`);
  }
  createConversation(body) {
    return this.request("POST", "/v1/conversations", body);
  }
  deleteConversation(id) {
    return this.request("DELETE", `/v1/conversations/${encodeURIComponent(id)}`);
  }
  collections() {
    return this.request("GET", "/v1/collections");
  }
  turns(conversationId) {
    return this.request("GET", `/v1/conversations/${encodeURIComponent(conversationId)}/turns?all_versions=true`);
  }
  addStatement(conversationId, text) {
    return this.request("POST", `/v1/conversations/${encodeURIComponent(conversationId)}/ptkb`, { text });
  }
  editStatement(conversationId, statementId, text) {
    return this.request(
      "PUT",
      `/v1/conversations/${encodeURIComponent(conversationId)}/ptkb/${encodeURIComponent(statementId)}`,
      { text },
    );
  }
  removeStatement(conversationId, statementId) {
    return this.request(
      "DELETE",
      `/v1/conversations/${encodeURIComponent(conversationId)}/ptkb/${encodeURIComponent(statementId)}`,
    );
  }

  /**
   * Runs a turn and streams it: calls `on[event](data)` for every server-sent event (ptkb,
   * rewrite, passages, sentence, restart) and resolves to the stored turn of the final `turn`
   * event. Rejects with ApiError on a refused request, an `error` event, or a cut stream.
   */
  async streamTurn(conversationId, body, on = {}) {
    let response;
    try {
      response = await fetch(`/v1/conversations/${encodeURIComponent(conversationId)}/turns`, {
        method: "POST",
        headers: this.headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
        body: JSON.stringify(body),
      });
    } catch (e) {
      throw unreachable(e);
    }
    if (!response.ok) throw await errorOf(response);
    const type = response.headers.get("Content-Type") || "";
    if (!type.startsWith("text/event-stream")) {
      // A server that answers with JSON instead still gives the whole turn.
      const data = await response.json();
      return data.turn;
    }
    try {
      for await (const { event, data } of serverSentEvents(response.body)) {
        let payload;
        try {
          payload = JSON.parse(data);
        } catch {
          throw new ApiError(0, "bad_stream", `the server sent an unreadable ${event} event`);
        }
        if (event === "turn") return payload.turn;
        if (event === "error") {
          const e = payload.error || {};
          throw new ApiError(500, e.code || "internal", e.message || "the turn failed", e.field ?? null);
        }
        if (typeof on[event] === "function") on[event](payload);
      }
    } catch (e) {
      if (e instanceof ApiError) throw e;
      throw unreachable(e);
    }
    throw new ApiError(0, "stream_cut", "the answer stream ended before the turn was complete");
  }
}

/** Parses a text/event-stream body into {event, data} records (the SSE wire format). */
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

/** Readable names of request fields, for error messages. */
const FIELD_NAMES = {
  utterance: "your message",
  generator: "the generator",
  rerank: "reranking",
  rerank_depth: "the rerank depth",
  passages: "the number of passages",
  max_words: "the word limit",
  rewrite: "the rewrite",
  regenerate: "the turn to regenerate",
  title: "the title",
  collection: "the collection",
  text: "the statement",
};

function fieldName(field) {
  if (!field) return "your input";
  const statement = /^ptkb\[(\d+)\]/.exec(field);
  if (statement) return `statement ${Number(statement[1]) + 1}`;
  return FIELD_NAMES[field] || field;
}

/** What went wrong, in plain words for the person using the page. */
export function describeError(error) {
  if (!(error instanceof ApiError)) {
    return "Something went wrong in the page: " + (error && error.message ? error.message : String(error));
  }
  const detail = error.message ? ` (${error.message})` : "";
  switch (error.code) {
    case "unreachable":
      return "The convrag server cannot be reached. Check that it is running and that you are online, then try again.";
    case "stream_cut":
    case "bad_stream":
      return "The connection to the server broke off before the answer was complete. Nothing was saved; try again.";
    case "missing_token":
    case "invalid_token":
      return "The server did not accept your token. Sign in again with a valid token.";
    case "invalid_field":
      return `Please check ${fieldName(error.field)}: ${error.message}.`;
    case "malformed_json":
    case "unsupported_media_type":
      return `The server could not read the request${detail}.`;
    case "payload_too_large":
      return "That is too long for the server to accept. Shorten it and try again.";
    case "not_found":
      return `It is not there any more: it may have been deleted${detail}.`;
    case "conflict":
      return `That clashes with what is already there${detail}.`;
    case "database_unavailable":
      return "The server's database is not answering. Try again in a moment.";
    case "model_unavailable":
      return `A model the server needs is not available${detail}. Try other settings (for example without reranking).`;
    case "route_not_found":
    case "method_not_allowed":
      return `This server does not offer that yet${detail}. It may be an older version of convrag.`;
    default:
      if (error.status >= 500) {
        const short = error.message && error.message.length > 160 ? `${error.message.slice(0, 157)}…` : error.message;
        return `The server failed to do that, so nothing was changed. Try again, or tell the administrator${short ? ` (${short})` : ""}.`;
      }
      return `The server refused that${detail}.`;
  }
}
