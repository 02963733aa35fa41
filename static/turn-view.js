// One turn position of the chat: its versions and the one shown, the answer streaming in,
// regeneration, the "Why this answer" panel and the comparison of two versions.

import { scrollToEnd } from "./dom.js";
import { describeError, isAuthError } from "./errors.js";
import {
  answerNode,
  comparisonNode,
  el,
  fallbackNotice,
  generatorLabel,
  personalNote,
  sentenceNode,
  whyContent,
} from "./render.js";
import { reportError } from "./session.js";
import { setBusy, state } from "./state.js";
import { streamHandlers } from "./stream.js";

/** The dialogs a turn opens: the cited passage and "Regenerate…" (given by init). */
const dialogs = {
  openPassage: () => {},
  openRegenerate: () => {},
};

export function init({ openPassage, openRegenerate }) {
  Object.assign(dialogs, { openPassage, openRegenerate });
}

export class TurnView {
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
    this.answer = turn.pending ? el("div", { class: "answer", "aria-live": "polite" }) : answerNode(turn, (rank, button) => this.cite(turn, rank, button));
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
        { type: "button", class: "secondary regenerate-button", disabled: state.busy, onclick: (e) => dialogs.openRegenerate(this, e.currentTarget) },
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
    dialogs.openPassage(turn, rank, button);
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
      if (isAuthError(error)) {
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
