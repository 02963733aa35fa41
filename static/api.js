// The convrag HTTP API as the page uses it: JSON requests with the bearer token and the turn
// stream (fetch + the text/event-stream reader of stream.js, since EventSource cannot POST).

import { ApiError, unreachable } from "./errors.js";
import { readTurnStream } from "./stream.js";

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

  runs() {
    return this.request("GET", "/v1/runs");
  }
  /** A run's summary and per-turn measures against the user's judgments `qrels`. */
  run(name, qrels) {
    return this.request("GET", `/v1/runs/${encodeURIComponent(name)}?qrels=${encodeURIComponent(qrels)}`);
  }
  compareRuns(a, b, qrels, measure) {
    const query = new URLSearchParams({ a, b, qrels, measure });
    return this.request("GET", `/v1/runs/compare?${query}`);
  }
  qrels() {
    return this.request("GET", "/v1/qrels");
  }
  /** Stores TREC qrels text as the user's judgments `name`. */
  async putQrels(name, text) {
    let response;
    try {
      response = await fetch(`/v1/qrels/${encodeURIComponent(name)}`, {
        method: "PUT",
        headers: this.headers({ "Content-Type": "text/plain" }),
        body: text,
      });
    } catch (e) {
      throw unreachable(e);
    }
    if (!response.ok) throw await errorOf(response);
    return response.json();
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
  collection(name) {
    return this.request("GET", `/v1/collections/${encodeURIComponent(name)}`);
  }
  createCollection(name) {
    return this.request("POST", "/v1/collections", { name });
  }
  deleteCollection(name) {
    return this.request("DELETE", `/v1/collections/${encodeURIComponent(name)}`);
  }
  /** Files (File objects) as multipart parts named `files`; resolves to the 202 body. */
  async uploadDocuments(name, files) {
    const form = new FormData();
    for (const file of files) form.append("files", file, file.name);
    let response;
    try {
      response = await fetch(`/v1/collections/${encodeURIComponent(name)}/documents`, {
        method: "POST",
        headers: this.headers(),
        body: form,
      });
    } catch (e) {
      throw unreachable(e);
    }
    if (!response.ok) throw await errorOf(response);
    return response.json();
  }
  turn(conversationId, turnId) {
    return this.request("GET", `/v1/conversations/${encodeURIComponent(conversationId)}/turns/${encodeURIComponent(turnId)}`);
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
  profileStatements() {
    return this.request("GET", "/v1/profile/statements");
  }
  addProfileStatement(text) {
    return this.request("POST", "/v1/profile/statements", { text });
  }
  removeProfileStatement(statementId) {
    return this.request("DELETE", `/v1/profile/statements/${encodeURIComponent(statementId)}`);
  }
  removeStatement(conversationId, statementId) {
    return this.request(
      "DELETE",
      `/v1/conversations/${encodeURIComponent(conversationId)}/ptkb/${encodeURIComponent(statementId)}`,
    );
  }

  /**
   * Runs a turn and streams it (see stream.js): calls `on[event](fields)` for the progress events
   * and resolves to the stored turn. Rejects with ApiError on a refused request, an `error`
   * event, or a cut stream.
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
    return readTurnStream(response.body, on);
  }
}
