// The convrag chat page: sign-in, the conversation list, a new conversation with its PTKB, the
// chat with streamed answers, the PTKB editor and the regeneration of turns. Plain ES module, no
// framework; everything it talks to is the public HTTP API of the same origin.

import { Api, ApiError, describeError } from "./api.js";
import {
  answerNode,
  comparisonNode,
  el,
  fallbackNotice,
  generatorLabel,
  highlightedText,
  passageTitle,
  personalNote,
  formatScore,
  sentenceNode,
  whyContent,
} from "./render.js";

const TOKEN_KEY = "convrag.token";
const draftKey = (conversationId) => `convrag.draft.${conversationId}`;
const wide = window.matchMedia("(min-width: 75rem)");

const $ = (id) => {
  const node = document.getElementById(id);
  if (!node) throw new Error(`the page has no #${id}`);
  return node;
};

const state = {
  api: null,
  user: null,
  conversations: [],
  collections: null,
  /** The open conversation: {conversation, ptkb, turnViews: Map(seq -> TurnView)}. */
  current: null,
  /** True while a turn of the open conversation is being answered. */
  busy: false,
};

// ---------------------------------------------------------------------------------------------
// Messages

function showBanner(message) {
  const banner = $("banner");
  $("banner-text").textContent = message;
  banner.hidden = false;
}

function hideBanner() {
  $("banner").hidden = true;
}

function setError(id, message) {
  const node = $(id);
  node.textContent = message || "";
  node.hidden = !message;
}

/** Handles an error of a background action: a rejected token signs out, the rest is shown. */
function reportError(error, where = null) {
  if (error instanceof ApiError && (error.code === "invalid_token" || error.code === "missing_token")) {
    signOut(describeError(error));
    return;
  }
  if (where) setError(where, describeError(error));
  else showBanner(describeError(error));
}

// ---------------------------------------------------------------------------------------------
// Sign-in

async function checkServer() {
  for (const [path, id] of [
    ["/healthz", "health"],
    ["/readyz", "ready"],
  ]) {
    const node = $(id);
    try {
      const r = await fetch(path);
      node.textContent = r.ok ? "up" : `unavailable (${r.status})`;
      node.className = r.ok ? "ok" : "down";
    } catch {
      node.textContent = "unreachable";
      node.className = "down";
    }
  }
}

/** The sign-in page, with an error (a refused token, a server down) or a plain note. */
function showSignIn(message = "", note = "") {
  document.body.dataset.view = "signin";
  $("signin-view").hidden = false;
  $("app-view").hidden = true;
  $("sign-out").hidden = true;
  $("who").textContent = "";
  setError("signin-error", message);
  setError("signin-note", note);
  checkServer();
  $("token-input").focus();
}

async function signIn(token) {
  const api = new Api(token);
  const { user } = await api.me();
  state.api = api;
  state.user = user;
  localStorage.setItem(TOKEN_KEY, token);
  document.body.dataset.view = "app";
  $("signin-view").hidden = true;
  $("app-view").hidden = false;
  $("sign-out").hidden = false;
  $("who").textContent = `Signed in as ${user.name}`;
  setError("signin-error", "");
  setError("signin-note", "");
  await loadConversations();
  await route();
}

function signOut(message = "", note = "") {
  localStorage.removeItem(TOKEN_KEY);
  state.api = null;
  state.user = null;
  state.current = null;
  state.conversations = [];
  $("token-input").value = "";
  hideBanner();
  if (location.hash) history.replaceState(null, "", location.pathname);
  showSignIn(message, note);
}

$("signin-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const token = $("token-input").value.trim();
  if (!token) {
    setError("signin-error", "Paste your token first.");
    return;
  }
  const button = $("signin-button");
  button.disabled = true;
  try {
    await signIn(token);
  } catch (error) {
    setError("signin-error", describeError(error));
    $("token-input").focus();
  } finally {
    button.disabled = false;
  }
});

$("sign-out").addEventListener("click", () => signOut("", "You are signed out."));
$("banner-close").addEventListener("click", hideBanner);

// ---------------------------------------------------------------------------------------------
// Conversation list and routing

async function loadConversations() {
  const { conversations } = await state.api.conversations();
  state.conversations = conversations;
  renderConversationList();
}

function renderConversationList() {
  const list = $("conversation-list");
  const openId = state.current && state.current.conversation.id;
  list.replaceChildren(
    ...state.conversations.map((c) =>
      el(
        "li",
        {},
        el(
          "a",
          { href: `#/c/${c.id}`, class: "conversation-link", "aria-current": c.id === openId ? "page" : null },
          el("span", { class: "conversation-title" }, c.title || "Untitled conversation"),
          el(
            "span",
            { class: "conversation-meta" },
            [c.collection || "no collection", `${c.turn_count} ${c.turn_count === 1 ? "turn" : "turns"}`].join(" · "),
          ),
        ),
      ),
    ),
  );
  $("conversation-empty").hidden = state.conversations.length > 0;
}

function showSection(id) {
  for (const section of ["welcome-view", "new-view", "chat-view"]) $(section).hidden = section !== id;
  document.body.dataset.section = id;
}

async function route() {
  if (!state.api) return;
  closeDrawer("sidebar");
  const hash = location.hash;
  const chat = /^#\/c\/([0-9a-fA-F-]{36})$/.exec(hash);
  if (chat) {
    await openConversation(chat[1]);
  } else if (hash === "#/new") {
    state.current = null;
    renderConversationList();
    await showNewConversation();
  } else {
    state.current = null;
    renderConversationList();
    showSection("welcome-view");
  }
}

window.addEventListener("hashchange", () => route().catch((e) => reportError(e)));

// ---------------------------------------------------------------------------------------------
// New conversation

function statementRow(text = "") {
  const input = el("input", { type: "text", class: "statement-input", value: text, maxlength: 2000 });
  const row = el("li", { class: "statement-row" });
  const label = el("label", {}, "Statement");
  const remove = el("button", { type: "button", class: "secondary" }, "Remove");
  remove.addEventListener("click", () => {
    const next = row.nextElementSibling || row.previousElementSibling;
    row.remove();
    numberStatementRows();
    (next ? next.querySelector("input") : $("add-statement-row")).focus();
  });
  row.append(label, input, remove);
  return row;
}

function numberStatementRows() {
  $("new-statements")
    .querySelectorAll(".statement-row")
    .forEach((row, i) => {
      const id = `new-statement-${i + 1}`;
      row.querySelector("label").textContent = `Statement ${i + 1}`;
      row.querySelector("label").htmlFor = id;
      row.querySelector("input").id = id;
      row.querySelector("button").setAttribute("aria-label", `Remove statement ${i + 1}`);
    });
}

async function showNewConversation() {
  showSection("new-view");
  setError("new-error", "");
  const form = $("new-form");
  if (!form.dataset.ready) {
    // The form keeps what was typed until it is created, also across visits to other pages.
    $("new-statements").replaceChildren(statementRow());
    numberStatementRows();
    form.dataset.ready = "yes";
  }
  const select = $("new-collection");
  try {
    if (!state.collections) state.collections = (await state.api.collections()).collections;
  } catch (error) {
    reportError(error, "new-error");
    return;
  }
  const chosen = select.value;
  select.replaceChildren(
    el("option", { value: "" }, state.collections.length ? "Choose a collection…" : "No collection is indexed"),
    ...state.collections.map((c) =>
      el("option", { value: c.name }, `${c.name} (${Number(c.passages).toLocaleString()} passages)`),
    ),
  );
  if (chosen) select.value = chosen;
  else if (state.collections.length === 1) select.value = state.collections[0].name;
  if (!state.collections.length) {
    setError("new-error", "This server has no passage collection yet. An administrator adds one with `convrag index`.");
  }
  $("new-title").focus();
}

$("add-statement-row").addEventListener("click", () => {
  const row = statementRow();
  $("new-statements").append(row);
  numberStatementRows();
  row.querySelector("input").focus();
});

$("new-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const collection = $("new-collection").value;
  if (!collection) {
    setError("new-error", "Please choose the collection the answers should come from.");
    $("new-collection").focus();
    return;
  }
  const ptkb = [...$("new-statements").querySelectorAll("input")]
    .map((input) => input.value.trim())
    .filter((text) => text)
    .map((text) => ({ text }));
  const button = $("new-create");
  button.disabled = true;
  try {
    const { conversation } = await state.api.createConversation({ title: $("new-title").value.trim(), collection, ptkb });
    $("new-form").reset();
    delete $("new-form").dataset.ready;
    await loadConversations();
    location.hash = `#/c/${conversation.id}`;
  } catch (error) {
    reportError(error, "new-error");
  } finally {
    button.disabled = false;
  }
});

$("new-conversation").addEventListener("click", () => {
  if (location.hash === "#/new") showNewConversation();
  else location.hash = "#/new";
});

// ---------------------------------------------------------------------------------------------
// The chat

async function openConversation(id) {
  if (state.current && state.current.conversation.id === id) {
    showSection("chat-view");
    return;
  }
  let data, turns;
  try {
    [data, { turns }] = await Promise.all([state.api.conversation(id), state.api.turns(id)]);
  } catch (error) {
    reportError(error);
    state.current = null;
    showSection("welcome-view");
    return;
  }
  hideBanner();
  state.current = { conversation: data.conversation, ptkb: data.ptkb, turnViews: new Map() };
  state.busy = false;
  renderConversationList();
  $("chat-title").textContent = data.conversation.title || "Untitled conversation";
  $("chat-collection").textContent = data.conversation.collection
    ? `Answers from ${data.conversation.collection}`
    : "No collection chosen";
  const bySeq = new Map();
  for (const turn of turns) {
    if (!bySeq.has(turn.seq)) bySeq.set(turn.seq, []);
    bySeq.get(turn.seq).push(turn);
  }
  const list = $("turns");
  list.replaceChildren();
  for (const seq of [...bySeq.keys()].sort((a, b) => a - b)) {
    const view = new TurnView(bySeq.get(seq));
    state.current.turnViews.set(seq, view);
    list.append(view.el);
  }
  $("turns-empty").hidden = bySeq.size > 0;
  renderPtkb();
  setError("composer-error", "");
  $("composer-input").value = sessionStorage.getItem(draftKey(id)) || "";
  setBusy(false);
  showSection("chat-view");
  scrollToEnd();
  $("composer-input").focus();
}

function scrollToEnd(onlyIfNear = false) {
  const scroller = $("turns-scroller");
  const near = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 160;
  if (!onlyIfNear || near) scroller.scrollTop = scroller.scrollHeight;
}

function setBusy(busy) {
  state.busy = busy;
  $("send").disabled = busy;
  $("send").textContent = busy ? "Answering…" : "Send";
  for (const view of state.current ? state.current.turnViews.values() : []) view.renderActions();
}

/** Request fields from a settings form (only the ones set). */
function settingsFrom(form) {
  const body = {};
  const generator = form.querySelector('[name="generator"]').value;
  if (generator) body.generator = generator;
  const rewriter = form.querySelector('[name="rewriter"]');
  if (rewriter && rewriter.value) body.rewriter = rewriter.value;
  const rerank = form.querySelector('[name="rerank"]');
  if (rerank && !rerank.checked) body.rerank = false;
  for (const name of ["rerank_depth", "passages", "max_words"]) {
    const input = form.querySelector(`[name="${name}"]`);
    if (input && input.value.trim() !== "") body[name] = Number(input.value);
  }
  return body;
}

/** Callbacks of the turn stream that render into a turn view. */
function streamHandlers(view) {
  return {
    ptkb: (data) => view.update({ ptkb_ranking: data.ptkb_ranking }, "Rewriting your question…"),
    rewrite: (data) =>
      view.update({ rewritten_utterance: data.rewritten_utterance, rewrite_method: data.method }, "Searching the passages…"),
    passages: (data) => view.update({ passages: data.passages }, "Writing the answer…"),
    sentence: (data) => view.addSentence(data),
    restart: (data) => view.restart(data.reason),
  };
}

$("composer").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!state.current || state.busy) return;
  const input = $("composer-input");
  const utterance = input.value.trim();
  if (!utterance) {
    setError("composer-error", "Type a message first.");
    input.focus();
    return;
  }
  const conversation = state.current.conversation;
  const body = { utterance, ...settingsFrom($("composer")) };
  setError("composer-error", "");
  const seq = Math.max(0, ...state.current.turnViews.keys()) + 1;
  const view = new TurnView([], seq);
  view.beginStream(utterance);
  $("turns").append(view.el);
  $("turns-empty").hidden = true;
  input.value = "";
  setBusy(true);
  scrollToEnd();
  const opened = state.current;
  try {
    const turn = await state.api.streamTurn(conversation.id, body, streamHandlers(view));
    view.finish(turn);
    opened.turnViews.set(turn.seq, view);
    sessionStorage.removeItem(draftKey(conversation.id));
    conversation.turn_count = turn.seq;
    loadConversations().catch(() => {});
  } catch (error) {
    view.el.remove();
    if (state.current === opened) {
      // Nothing typed is lost: the message goes back into the box, before anything typed since.
      input.value = input.value.trim() ? `${utterance}\n${input.value}` : utterance;
      sessionStorage.setItem(draftKey(conversation.id), input.value);
      $("turns-empty").hidden = opened.turnViews.size > 0;
    }
    reportError(error, "composer-error");
  } finally {
    if (state.current === opened) {
      setBusy(false);
      scrollToEnd(true);
    }
  }
});

$("composer-input").addEventListener("input", (event) => {
  if (state.current) sessionStorage.setItem(draftKey(state.current.conversation.id), event.target.value);
});

$("composer-input").addEventListener("keydown", (event) => {
  // Enter sends, Shift+Enter starts a new line (as in other chat tools).
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("composer").requestSubmit();
  }
});

$("delete-conversation").addEventListener("click", async () => {
  if (!state.current) return;
  const { conversation } = state.current;
  if (!window.confirm(`Delete the conversation “${conversation.title || "Untitled conversation"}” and all its turns?`)) return;
  try {
    await state.api.deleteConversation(conversation.id);
    sessionStorage.removeItem(draftKey(conversation.id));
    state.current = null;
    await loadConversations();
    location.hash = "#/";
  } catch (error) {
    reportError(error);
  }
});

// ---------------------------------------------------------------------------------------------
// One turn position: its versions, the one shown, streaming, regeneration, comparison.

class TurnView {
  constructor(versions, seq = null) {
    this.versions = [...versions].sort((a, b) => a.version - b.version);
    const current = this.versions.findIndex((t) => t.is_current);
    this.index = current >= 0 ? current : this.versions.length - 1;
    this.seq = seq ?? (this.versions[0] && this.versions[0].seq);
    this.pending = null;
    this.comparing = false;
    this.whyOpen = false;
    this.el = el("li", { class: "turn" });
    if (this.versions.length) this.render();
  }

  get turn() {
    return this.pending || this.versions[this.index];
  }

  render() {
    const turn = this.turn;
    this.el.dataset.seq = String(this.seq);
    this.el.dataset.version = turn.version ? String(turn.version) : "";
    this.el.classList.toggle("streaming", Boolean(this.pending));
    this.answer = turn.pending ? el("p", { class: "answer", "aria-live": "polite" }) : answerNode(turn, (rank, button) => this.cite(turn, rank, button));
    if (turn.pending) turn.sentences.forEach((s, i) => this.appendSentence(s, i));
    this.stage = el("p", { class: "stage", hidden: !turn.pending }, turn.stage || "");
    this.notice = el("div", { class: "notices" }, turn.pending ? turn.notice || null : fallbackNotice(turn));
    this.personal = el("div", { class: "personal-note" }, personalNote(turn));
    this.actions = el("div", { class: "turn-actions" });
    this.error = el("p", { class: "form-error", role: "alert", hidden: true });
    this.comparison = el("div", { class: "comparison" });
    this.why = el(
      "details",
      { class: "why", open: this.whyOpen },
      el("summary", {}, "Why this answer"),
      el("div", { class: "why-body" }, whyContent(turn, (rank, button) => this.cite(turn, rank, button))),
    );
    this.why.addEventListener("toggle", () => {
      this.whyOpen = this.why.open;
    });
    this.el.replaceChildren(
      el(
        "div",
        { class: "turn-main" },
        el("div", { class: "bubble user" }, el("h3", { class: "visually-hidden" }, `You, turn ${this.seq}`), el("p", {}, turn.utterance)),
        el(
          "div",
          { class: "bubble assistant" },
          el("h3", { class: "visually-hidden" }, `Answer ${this.seq}`),
          this.stage,
          this.answer,
          this.notice,
        ),
        this.personal,
        this.actions,
        this.error,
      ),
      this.why,
      this.comparison,
    );
    this.renderActions();
    this.renderComparison();
  }

  renderActions() {
    if (!this.actions) return;
    const turn = this.turn;
    if (turn.pending) {
      this.actions.replaceChildren();
      return;
    }
    const count = this.versions.length;
    const parts = [el("span", { class: "generator" }, generatorLabel(turn.generator))];
    if (count > 1) {
      parts.push(
        el(
          "span",
          { class: "versions", role: "group", "aria-label": "Versions" },
          el("button", { type: "button", class: "icon", "aria-label": "Previous version", disabled: this.index === 0, onclick: () => this.show(this.index - 1) }, "‹"),
          el("span", { class: "version-label", tabindex: "-1" }, `Version ${turn.version} of ${count}`),
          el("button", { type: "button", class: "icon", "aria-label": "Next version", disabled: this.index === count - 1, onclick: () => this.show(this.index + 1) }, "›"),
        ),
        el(
          "button",
          { type: "button", class: "secondary compare-button", "aria-expanded": String(this.comparing), onclick: () => this.toggleCompare() },
          this.comparing ? "Hide comparison" : `Compare with version ${this.otherIndex() + 1}`,
        ),
      );
    }
    parts.push(
      el(
        "button",
        { type: "button", class: "secondary regenerate-button", disabled: state.busy, onclick: (e) => openRegenerate(this, e.currentTarget) },
        "Regenerate…",
      ),
    );
    this.actions.replaceChildren(...parts);
  }

  /** The version compared with the shown one: the one before it, or the next for the first. */
  otherIndex() {
    return this.index > 0 ? this.index - 1 : 1;
  }

  renderComparison() {
    if (!this.comparison) return;
    if (!this.comparing || this.versions.length < 2 || this.pending) {
      this.comparison.replaceChildren();
      return;
    }
    const a = this.versions[Math.min(this.index, this.otherIndex())];
    const b = this.versions[Math.max(this.index, this.otherIndex())];
    this.comparison.replaceChildren(comparisonNode(a, b, (turn, rank, button) => this.cite(turn, rank, button)));
  }

  show(index) {
    this.index = index;
    this.render();
    this.actions.querySelector(".version-label").focus();
  }

  toggleCompare() {
    this.comparing = !this.comparing;
    this.renderActions();
    this.renderComparison();
    this.actions.querySelector(".compare-button").focus();
  }

  cite(turn, rank, button) {
    openPassage(turn, rank, button);
  }

  beginStream(utterance, settingsNote = "") {
    this.pending = {
      pending: true,
      utterance,
      version: null,
      sentences: [],
      ptkb_ranking: null,
      passages: null,
      rewritten_utterance: null,
      stage: settingsNote || "Ranking your statements…",
      notice: null,
    };
    this.streamedSentences = 0;
    this.el.dataset.streamedSentences = "0";
    this.error && (this.error.hidden = true);
    this.render();
  }

  update(fields, stage) {
    Object.assign(this.pending, fields);
    this.pending.stage = stage;
    this.stage.textContent = stage;
    this.personal.replaceChildren(personalNote(this.pending) || "");
    this.why.querySelector(".why-body").replaceChildren(...whyContent(this.pending, (rank, button) => this.cite(this.pending, rank, button)));
  }

  appendSentence(sentence, index) {
    if (index > 0) this.answer.append(" ");
    this.answer.append(sentenceNode(sentence, this.turn.passages, (rank, button) => this.cite(this.pending || this.turn, rank, button)));
  }

  addSentence(sentence) {
    this.pending.sentences.push(sentence);
    this.appendSentence(sentence, this.pending.sentences.length - 1);
    this.streamedSentences += 1;
    // Lets a reader (and the browser tests) see that the answer arrived sentence by sentence.
    this.el.dataset.streamedSentences = String(this.streamedSentences);
    this.stage.textContent = "Writing the answer…";
    scrollToEnd(true);
  }

  restart(reason) {
    this.pending.sentences = [];
    this.answer.replaceChildren();
    this.pending.notice = el(
      "p",
      { class: "notice fallback", role: "note" },
      "The language model could not give a usable answer. Answering from the passages instead…",
      reason ? el("span", { class: "reason" }, ` (${reason})`) : null,
    );
    this.notice.replaceChildren(this.pending.notice);
  }

  /** The stored turn arrived: it becomes the shown (and current) version. */
  finish(turn) {
    this.pending = null;
    this.seq = turn.seq;
    for (const t of this.versions) t.is_current = false;
    this.versions = this.versions.filter((t) => t.id !== turn.id);
    this.versions.push(turn);
    this.versions.sort((a, b) => a.version - b.version);
    this.index = this.versions.indexOf(turn);
    this.render();
  }

  async regenerate(settings) {
    if (state.busy || !state.current) return;
    const opened = state.current;
    const conversation = opened.conversation;
    const utterance = this.versions[this.index].utterance;
    this.comparing = false;
    this.beginStream(utterance, "Regenerating…");
    setBusy(true);
    try {
      const turn = await state.api.streamTurn(conversation.id, { regenerate: this.versions[this.index].id, ...settings }, streamHandlers(this));
      this.finish(turn);
      this.comparing = this.versions.length > 1;
      this.renderActions();
      this.renderComparison();
    } catch (error) {
      this.pending = null;
      this.render();
      if (error instanceof ApiError && (error.code === "invalid_token" || error.code === "missing_token")) {
        reportError(error);
      } else {
        this.error.textContent = describeError(error);
        this.error.hidden = false;
      }
    } finally {
      if (state.current === opened) setBusy(false);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Regenerate dialog

let regenerateTarget = null;

function openRegenerate(view, opener) {
  regenerateTarget = { view, opener };
  const form = $("regenerate-form");
  const settings = view.turn.settings || {};
  const generator = String(view.turn.generator || "");
  form.querySelector('[name="generator"]').value = generator.startsWith("llm") ? "llm" : generator === "extractive" ? "extractive" : "";
  form.querySelector('[name="rewriter"]').value = settings.rewriter === "llm" ? "llm" : "";
  form.querySelector('[name="rerank"]').checked = settings.rerank !== false;
  for (const name of ["rerank_depth", "passages", "max_words"]) {
    form.querySelector(`[name="${name}"]`).value = settings[name] ?? "";
  }
  $("regenerate-utterance").textContent = view.turn.utterance;
  $("regenerate-dialog").showModal();
  form.querySelector('[name="generator"]').focus();
}

$("regenerate-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const target = regenerateTarget;
  $("regenerate-dialog").close();
  if (target) target.view.regenerate(settingsFrom($("regenerate-form")));
});

$("regenerate-cancel").addEventListener("click", () => $("regenerate-dialog").close());
$("regenerate-dialog").addEventListener("close", () => {
  const target = regenerateTarget;
  regenerateTarget = null;
  if (target && target.opener.isConnected) target.opener.focus();
});

// ---------------------------------------------------------------------------------------------
// The cited passage

function openPassage(turn, rank, opener) {
  const passage = (turn.passages || []).find((p) => p.rank === rank);
  if (!passage) return;
  const citing = (turn.sentences || []).filter((s) => (s.citations || []).includes(rank)).map((s) => s.text);
  $("passage-title").textContent = passageTitle(passage);
  const meta = [`Source ${rank}`, passage.passage_id, passage.collection].filter(Boolean).join(" · ");
  $("passage-meta").textContent = meta;
  const url = $("passage-url");
  const safeUrl = passage.url && /^https?:\/\//i.test(passage.url) ? passage.url : null;
  url.hidden = !passage.url;
  url.replaceChildren(
    safeUrl ? el("a", { href: safeUrl, target: "_blank", rel: "noopener noreferrer" }, passage.url) : passage.url || "",
  );
  $("passage-scores").textContent = `BM25 ${formatScore(passage.retrieval_score)} · model ${formatScore(passage.rerank_score)} · final ${formatScore(passage.score)}`;
  const text = passage.text || "(the text of this passage was not stored)";
  $("passage-text").replaceChildren(highlightedText(text, citing));
  $("passage-citing").replaceChildren(...citing.map((s) => el("li", {}, s)));
  $("passage-citing-section").hidden = citing.length === 0;
  const dialog = $("passage-dialog");
  dialog.returnFocusTo = opener;
  dialog.showModal();
  $("passage-close").focus();
}

$("passage-close").addEventListener("click", () => $("passage-dialog").close());
$("passage-dialog").addEventListener("close", () => {
  const dialog = $("passage-dialog");
  if (dialog.returnFocusTo && dialog.returnFocusTo.isConnected) dialog.returnFocusTo.focus();
  dialog.returnFocusTo = null;
});
// A click on the backdrop (outside the dialog's box) closes it.
for (const id of ["passage-dialog", "regenerate-dialog"]) {
  $(id).addEventListener("click", (event) => {
    if (event.target === event.currentTarget) {
      const box = event.currentTarget.getBoundingClientRect();
      const inside = event.clientX >= box.left && event.clientX <= box.right && event.clientY >= box.top && event.clientY <= box.bottom;
      if (!inside) event.currentTarget.close();
    }
  });
}

// ---------------------------------------------------------------------------------------------
// The PTKB editor of the open conversation

function renderPtkb() {
  const list = $("ptkb-list");
  const statements = state.current ? state.current.ptkb : [];
  list.replaceChildren(...statements.map((s) => statementItem(s)));
  $("ptkb-empty").hidden = statements.length > 0;
  setError("ptkb-error", "");
}

function statementItem(statement) {
  const item = el("li", { class: "ptkb-item", dataset: { id: statement.id } });
  const show = () => {
    item.replaceChildren(
      el("span", { class: "badge" }, statement.id),
      el("span", { class: "statement-text" }, statement.text),
      el(
        "span",
        { class: "item-actions" },
        el("button", { type: "button", class: "secondary edit", "aria-label": `Edit statement ${statement.id}`, onclick: edit }, "Edit"),
        el("button", { type: "button", class: "secondary remove", "aria-label": `Remove statement ${statement.id}`, onclick: remove }, "Remove"),
      ),
    );
  };
  const edit = () => {
    const inputId = `ptkb-edit-${statement.id}`;
    const input = el("input", { type: "text", id: inputId, value: statement.text, maxlength: 2000 });
    const cancel = () => {
      show();
      item.querySelector(".edit").focus();
    };
    const form = el(
      "form",
      { class: "ptkb-edit" },
      el("label", { for: inputId }, `Statement ${statement.id}`),
      input,
      el("span", { class: "item-actions" }, el("button", { type: "submit" }, "Save"), el("button", { type: "button", class: "secondary", onclick: cancel }, "Cancel")),
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const text = input.value.trim();
      if (!text) {
        setError("ptkb-error", "A statement cannot be empty; use Remove to delete it.");
        input.focus();
        return;
      }
      try {
        const { statement: saved } = await state.api.editStatement(state.current.conversation.id, statement.id, text);
        replaceStatement(saved);
        Object.assign(statement, saved);
        setError("ptkb-error", "");
        show();
        item.querySelector(".edit").focus();
        announce(`Statement ${statement.id} saved. It applies from your next message.`);
      } catch (error) {
        reportError(error, "ptkb-error");
        input.focus();
      }
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        cancel();
      }
    });
    item.replaceChildren(form);
    input.focus();
    input.select();
  };
  const remove = async () => {
    try {
      await state.api.removeStatement(state.current.conversation.id, statement.id);
      state.current.ptkb = state.current.ptkb.filter((s) => s.id !== statement.id);
      renderPtkb();
      $("ptkb-add-input").focus();
      announce(`Statement ${statement.id} removed from your next message on.`);
    } catch (error) {
      reportError(error, "ptkb-error");
    }
  };
  show();
  return item;
}

function replaceStatement(saved) {
  state.current.ptkb = state.current.ptkb.map((s) => (s.id === saved.id ? saved : s));
}

function announce(message) {
  $("announcer").textContent = message;
}

$("ptkb-add").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!state.current) return;
  const input = $("ptkb-add-input");
  const text = input.value.trim();
  if (!text) {
    setError("ptkb-error", "Type the statement first.");
    input.focus();
    return;
  }
  try {
    const { statement } = await state.api.addStatement(state.current.conversation.id, text);
    state.current.ptkb.push(statement);
    input.value = "";
    renderPtkb();
    announce(`Statement ${statement.id} added. It applies from your next message.`);
    input.focus();
  } catch (error) {
    reportError(error, "ptkb-error");
    input.focus();
  }
});

// ---------------------------------------------------------------------------------------------
// Drawers: the conversation list and the PTKB panel slide over the chat on small screens.

const drawers = { sidebar: "toggle-sidebar", "ptkb-panel": "toggle-ptkb" };

function drawerOpen(id) {
  return document.body.classList.contains(`${id}-open`);
}

function isOverlay(id) {
  return id === "sidebar" ? !window.matchMedia("(min-width: 50rem)").matches : !wide.matches;
}

function setDrawer(id, open, moveFocus = true) {
  document.body.classList.toggle(`${id}-open`, open);
  $(drawers[id]).setAttribute("aria-expanded", String(open));
  const overlay = [...Object.keys(drawers)].some((d) => drawerOpen(d) && isOverlay(d));
  document.body.classList.toggle("overlay-open", overlay);
  if (open && moveFocus && isOverlay(id)) {
    const target = $(id).querySelector("a, button, input, textarea, select");
    if (target) target.focus();
  }
}

function closeDrawer(id) {
  if (drawerOpen(id) && isOverlay(id)) setDrawer(id, false, false);
}

for (const [id, toggle] of Object.entries(drawers)) {
  $(toggle).addEventListener("click", () => setDrawer(id, !drawerOpen(id)));
}
$("ptkb-close").addEventListener("click", () => {
  setDrawer("ptkb-panel", false);
  $("toggle-ptkb").focus();
});
$("scrim").addEventListener("click", () => {
  for (const id of Object.keys(drawers)) closeDrawer(id);
});
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || document.querySelector("dialog[open]")) return;
  for (const [id, toggle] of Object.entries(drawers)) {
    if (drawerOpen(id) && isOverlay(id)) {
      setDrawer(id, false);
      $(toggle).focus();
    }
  }
});
wide.addEventListener("change", () => setDrawer("ptkb-panel", wide.matches, false));

// ---------------------------------------------------------------------------------------------
// Start

async function start() {
  setDrawer("ptkb-panel", wide.matches, false);
  setDrawer("sidebar", false, false);
  const token = localStorage.getItem(TOKEN_KEY);
  if (!token) {
    showSignIn();
    return;
  }
  try {
    await signIn(token);
  } catch (error) {
    if (error instanceof ApiError && (error.code === "invalid_token" || error.code === "missing_token")) {
      signOut(describeError(error));
    } else {
      // Keep the token: the server may just be down. Signing in again retries.
      showSignIn(describeError(error));
      $("token-input").value = token;
    }
  }
}

start();
