// Building the DOM of turns: the answer with citation buttons, the "why this answer" panel
// (the search query with its words marked by origin, ranked statements, ranked passages,
// timings), the comparison of two versions, and the cited passage with its cited part
// highlighted. Text goes in as text; answer sentences are Markdown, rendered by the vendored
// marked and sanitized by DOMPurify into DOM nodes.

import { Marked } from "./marked.esm.js";
import DOMPurify from "./purify.es.mjs";

/** Creates an element: el("p", {class: "x", onclick: f}, "text", child, ...). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
}

export function formatScore(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  const abs = Math.abs(value);
  return abs >= 100 ? value.toFixed(0) : abs >= 10 ? value.toFixed(1) : value.toFixed(3);
}

export function formatMs(value) {
  if (value === null || value === undefined) return "–";
  return value >= 100 ? `${Math.round(value)} ms` : `${value.toFixed(1)} ms`;
}

/** A passage's display title: its title, else its id. */
export function passageTitle(passage) {
  return (passage.title && passage.title.trim()) || passage.passage_id || `Passage ${passage.rank}`;
}

/** The passage ranks that `sentences` cite. */
export function citedRanks(sentences) {
  const ranks = new Set();
  for (const s of sentences || []) for (const c of s.citations || []) ranks.add(c);
  return ranks;
}

/**
 * Answer sentences are Markdown. marked renders them (GitHub-flavoured), with raw HTML turned
 * into text first, so `<script>` from a document's code reads as text; DOMPurify then sanitizes
 * what marked produced (links to `javascript:` and the like) and hands back DOM nodes, so nothing
 * here assigns HTML strings. Style attributes are refused too: the CSP would block them anyway.
 */
const markdown = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: {
    html: ({ text }) => escapeHtml(text),
  },
});

const SANITIZE = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed"],
  FORBID_ATTR: ["style"],
};

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

/** Whether a sentence's Markdown is a block of its own (code, heading, list, table, quote). */
function isBlock(text) {
  const tokens = markdown.lexer(String(text)).filter((t) => t.type !== "space");
  return !(tokens.length === 1 && tokens[0].type === "paragraph");
}

/** A sentence's Markdown as sanitized DOM nodes: inline for prose, blocks otherwise. */
export function markdownFragment(text, block = isBlock(text)) {
  const html = block ? markdown.parse(String(text)) : markdown.parseInline(String(text));
  const fragment = DOMPurify.sanitize(html, SANITIZE);
  for (const link of fragment.querySelectorAll("a[href]")) link.setAttribute("rel", "noopener noreferrer nofollow");
  for (const pre of fragment.querySelectorAll("pre")) wrapCodeBlock(pre);
  return fragment;
}

/**
 * One answer sentence (Markdown, rendered) with its citation markers as buttons. `onCite(rank,
 * button)` opens the passage; a marker naming a passage the turn does not have is shown but
 * disabled. The sentence's Markdown stays on the node (`data-markdown`).
 */
export function sentenceNode(sentence, passages, onCite) {
  const block = isBlock(sentence.text);
  const node = el(block ? "div" : "span", { class: block ? "sentence block" : "sentence", dataset: { markdown: sentence.text } });
  node.append(markdownFragment(sentence.text, block));
  // A block's markers follow its last line of text (a list's last item, a heading), or the block.
  const last = node.lastElementChild;
  const host = block && last && !last.classList.contains("code") && last.tagName !== "TABLE" ? lastTextBlock(last) : node;
  for (const rank of sentence.citations || []) {
    const passage = (passages || []).find((p) => p.rank === rank);
    const label = passage ? `Source ${rank}: ${passageTitle(passage)}` : `Source ${rank} (not available)`;
    host.append(
      " ",
      el(
        "button",
        {
          type: "button",
          class: "cite",
          "aria-label": label,
          title: label,
          disabled: !passage,
          dataset: { rank: String(rank) },
          onclick: (event) => onCite(rank, event.currentTarget),
        },
        String(rank),
      ),
    );
  }
  return node;
}

function lastTextBlock(node) {
  let at = node;
  while (at.lastElementChild && ["UL", "OL", "LI", "BLOCKQUOTE"].includes(at.tagName)) at = at.lastElementChild;
  return at;
}

/** Puts a rendered code block (monospaced) in a box with a button copying its code. */
function wrapCodeBlock(pre) {
  const code = pre.querySelector("code") || pre;
  const text = code.textContent.replace(/\n$/, "");
  pre.classList.add("code-block");
  const copy = el(
    "button",
    {
      type: "button",
      class: "copy-code",
      "aria-label": "Copy the code",
      title: "Copy the code",
      onclick: async (event) => {
        const button = event.currentTarget;
        try {
          await navigator.clipboard.writeText(text);
          button.textContent = "Copied";
        } catch {
          button.textContent = "Copy failed";
        }
        setTimeout(() => (button.textContent = "Copy"), 1500);
      },
    },
    "Copy",
  );
  const box = el("div", { class: "code" });
  pre.replaceWith(box);
  box.append(pre, copy);
}

/** The answer of a turn (a block: code blocks are blocks of their own). */
export function answerNode(turn, onCite) {
  const answer = el("div", { class: "answer" });
  (turn.sentences || []).forEach((s, i) => {
    if (i > 0) answer.append(" ");
    answer.append(sentenceNode(s, turn.passages, onCite));
  });
  return answer;
}

/** A short human description of a generator name (`extractive`, `llm:<model>`). */
export function generatorLabel(generator) {
  if (!generator) return "unknown generator";
  if (generator === "extractive") return "extractive (sentences taken from the passages)";
  if (generator === "imported") return "imported from a chat client's history (no retrieval ran)";
  if (generator.startsWith("llm:")) return `language model ${generator.slice(4)}`;
  return generator;
}

/** What went wrong with the language model, by the server's fallback kind, in plain words. */
const FALLBACK_WORDS = {
  unreachable: "could not be reached",
  timeout: "took too long to answer",
  http_status: "answered with an error",
  malformed: "sent an answer convrag could not read",
  request: "failed while answering",
  empty: "gave an empty answer",
  no_cited_sentence: "gave no answer that cites the passages",
};

/** The notice of a turn whose LLM answer failed and was replaced by an extractive one, or null. */
export function fallbackNotice(turn) {
  const fallback = turn.diagnostics && turn.diagnostics.fallback;
  if (!fallback) return null;
  const who = fallback.from && fallback.from.startsWith("llm:") ? `The language model ${fallback.from.slice(4)}` : "The language model";
  const what = FALLBACK_WORDS[fallback.kind] || `failed (${String(fallback.kind || "unknown").replace(/_/g, " ")})`;
  return el(
    "div",
    { class: "notice fallback", role: "note" },
    el("p", {}, `${who} ${what}, so this answer was put together from the passages instead.`),
    fallback.reason ? el("details", { class: "small" }, el("summary", {}, "Technical details"), el("p", { class: "reason" }, fallback.reason)) : null,
  );
}

/**
 * The statements about the user that shaped a turn, shown under the answer (the "why" panel has
 * the full ranking). Null while the ranking is not known yet.
 */
export function personalNote(turn) {
  if (!turn.ptkb_ranking) return null;
  const selected = turn.ptkb_ranking.filter((s) => s.selected);
  if (turn.ptkb_ranking.length === 0) return null;
  if (selected.length === 0) {
    return el("p", { class: "personal none" }, "None of your statements matched this question: the answer is not personalized.");
  }
  return el(
    "p",
    { class: "personal" },
    el("span", { class: "personal-label" }, "Personalized with "),
    selected.map((s) => el("q", { class: "chip" }, s.text)),
  );
}

const STAGES = ["ptkb", "rewrite", "retrieve", "rerank", "generate"];
const STAGE_NAMES = {
  ptkb: "Rank statements",
  rewrite: "Rewrite query",
  retrieve: "Retrieve",
  rerank: "Rerank (model)",
  generate: "Generate answer",
  total: "Total",
};

function section(title, ...content) {
  return el("section", { class: "why-section" }, el("h4", {}, title), ...content);
}

/** How the query was rewritten, and why the language model's rewrite was not used if so. */
function rewriteMethodNote(turn) {
  const diagnostics = turn.diagnostics || {};
  const method = turn.rewrite_method || diagnostics.rewrite_method;
  const fallback = diagnostics.rewrite_fallback;
  if (fallback) {
    return el(
      "p",
      { class: "muted small" },
      `method: ${method || "history"} (the language model's rewrite was not used: ${fallback.reason})`,
    );
  }
  return method ? el("p", { class: "muted small" }, `method: ${method}`) : null;
}

/** The origins of search query words the page marks, in the legend's order. */
const WORD_ORIGINS = ["history", "answer", "ptkb", "rewriter"];
const ORIGIN_LEGEND = {
  history: "from your earlier messages",
  answer: "from earlier answers",
  ptkb: "from your statements",
  rewriter: "added by the rewriter",
};

/** Where a word of the search query came from, in words; null for the utterance's own words. */
function originLabel(word, turn) {
  switch (word.origin) {
    case "history":
      return `from turn ${word.turn}`;
    case "answer":
      return `from the answer in turn ${word.turn}`;
    case "ptkb": {
      const statement = (turn.ptkb_ranking || []).find((s) => s.id === word.ptkb_id);
      return statement ? `from your statement: ${statement.text}` : "from your statements";
    }
    case "rewriter": {
      const method = turn.rewrite_method || (turn.diagnostics || {}).rewrite_method;
      return method === "llm" ? "added by the language model" : "added by the rewriter";
    }
    default:
      return null;
  }
}

/**
 * The search query with each word not of the utterance marked by its origin (a class, a title,
 * and the same words for screen readers), and a legend of the marks used. Turns stored before
 * the query was kept show the rewrite as it was.
 */
function searchQueryContent(turn) {
  const query = turn.search_query;
  if (!query) {
    const rewrite = turn.rewritten_utterance;
    return rewrite ? el("p", { class: "rewrite" }, rewrite) : el("p", { class: "muted" }, turn.pending ? "…" : "(none)");
  }
  const nodes = [];
  const used = new Set();
  let at = 0;
  for (const word of query.words) {
    const found = query.text.indexOf(word.text, at);
    if (found < 0) break;
    nodes.push(query.text.slice(at, found));
    const label = originLabel(word, turn);
    if (label && WORD_ORIGINS.includes(word.origin)) {
      used.add(word.origin);
      nodes.push(
        el("mark", { class: `origin origin-${word.origin}`, title: label }, word.text, el("span", { class: "visually-hidden" }, ` (${label})`)),
      );
    } else {
      nodes.push(word.text);
    }
    at = found + word.text.length;
  }
  nodes.push(query.text.slice(at));
  const legend = WORD_ORIGINS.filter((origin) => used.has(origin)).map((origin) =>
    el("li", {}, el("span", { class: `swatch origin-${origin}`, "aria-hidden": "true" }), ORIGIN_LEGEND[origin]),
  );
  return [
    el("p", { class: "rewrite search-query" }, nodes),
    legend.length ? el("ul", { class: "origin-legend", "aria-label": "Marked words" }, legend) : null,
  ];
}

const RETRIEVAL_NAMES = { bm25: "BM25 (words)", dense: "the bi-encoder (meaning)", hybrid: "BM25 and the bi-encoder, fused" };
const FIRST_STAGE_SCORE = { bm25: "BM25", dense: "cosine", hybrid: "BM25" };
const FALLBACK_REASONS = {
  vectors_building: "its passages are still being embedded",
  vectors_missing: "its passages are not embedded",
};

/** The first stage that ran: the stored turn's, else the one its settings asked for. */
function retrievalUsed(turn) {
  const diagnostics = turn.diagnostics || {};
  return diagnostics.retrieval || (turn.settings && turn.settings.retrieval) || "bm25";
}

/**
 * A passage's scores in `turn`: its first stage's (BM25's, also after hybrid retrieval, where a
 * passage BM25 did not return has none; or the cosine), the model's and the final one.
 */
export function passageScores(turn, p) {
  const used = retrievalUsed(turn);
  const first = used === "hybrid" && p.bm25_rank == null ? "–" : formatScore(p.retrieval_score);
  return `${FIRST_STAGE_SCORE[used] || "first stage"} ${first} · model ${formatScore(p.rerank_score)} · final ${formatScore(p.score)}`;
}

/** Which first stage found the passages, and why it is not the one asked for if so. */
function retrievalNote(turn) {
  if (turn.pending && !turn.diagnostics) return null;
  const diagnostics = turn.diagnostics || {};
  const used = retrievalUsed(turn);
  const fallback = diagnostics.retrieval_fallback;
  const text = fallback
    ? `Found by ${RETRIEVAL_NAMES[used] || used}: ${fallback.requested} retrieval was asked for, but ${FALLBACK_REASONS[fallback.reason] || String(fallback.reason).replace(/_/g, " ")} yet.`
    : `Found by ${RETRIEVAL_NAMES[used] || used}.`;
  return el("p", { class: fallback ? "retrieval fallback small" : "retrieval muted small" }, text);
}

/** Where a passage stood in each retriever's list ("BM25 #3 · dense #1 · fused #1"). */
function foundBy(p) {
  const ranks = [
    ["BM25", p.bm25_rank],
    ["dense", p.dense_rank],
    ["fused", p.fused_rank],
  ].filter(([, rank]) => rank != null);
  if (ranks.length === 0) return null;
  return el("span", { class: "found-by" }, ranks.map(([name, rank]) => `${name} #${rank}`).join(" · "));
}

/**
 * The contents of the "why this answer" panel of a (possibly still partial) turn.
 * `onPassage(rank, button)` opens a passage.
 */
export function whyContent(turn, onPassage) {
  const parts = [];

  parts.push(section("Search query", searchQueryContent(turn), rewriteMethodNote(turn)));

  const ranking = turn.ptkb_ranking || [];
  parts.push(
    section(
      "Your statements, ranked",
      ranking.length === 0
        ? el("p", { class: "muted" }, turn.pending ? "…" : "No statements in this conversation.")
        : el(
            "ol",
            { class: "ptkb-ranking" },
            ranking.map((s) =>
              el(
                "li",
                { class: s.selected ? "selected" : "", value: s.rank },
                el("span", { class: "badge" }, s.selected ? "used" : "not used"),
                " ",
                el("span", { class: "statement-text" }, s.text),
                " ",
                el("span", { class: "score" }, `score ${formatScore(s.score)}`),
              ),
            ),
          ),
    ),
  );

  const passages = turn.passages || [];
  const cited = citedRanks(turn.sentences);
  parts.push(
    section(
      "Passages, ranked",
      retrievalNote(turn),
      passages.length === 0
        ? el("p", { class: "muted" }, turn.pending ? "…" : "No passages were found.")
        : el(
            "ol",
            { class: "passage-ranking" },
            passages.map((p) => {
              // `used` is the server's word for "cited by the answer".
              const state = cited.has(p.rank) || p.used ? "cited" : "not cited";
              return el(
                "li",
                { class: state.replace(" ", "-"), value: p.rank },
                el(
                  "button",
                  { type: "button", class: "link", onclick: (e) => onPassage(p.rank, e.currentTarget) },
                  passageTitle(p),
                ),
                " ",
                el("span", { class: "badge" }, state),
                el(
                  "span",
                  { class: "scores" },
                  passageScores(turn, p),
                ),
                foundBy(p),
              );
            }),
          ),
    ),
  );

  const timings = turn.timings_ms;
  if (timings && typeof timings === "object") {
    const total = timings.total || STAGES.reduce((sum, k) => sum + (timings[k] || 0), 0) || 1;
    const keys = [...STAGES.filter((k) => k in timings), ...Object.keys(timings).filter((k) => !STAGES.includes(k) && k !== "total")];
    parts.push(
      section(
        "Timings",
        el(
          "table",
          { class: "timings" },
          el(
            "tbody",
            {},
            keys.map((k) => {
              const value = timings[k];
              const width = Math.max(1, Math.min(100, ((value || 0) / total) * 100));
              return el(
                "tr",
                {},
                el("th", { scope: "row" }, STAGE_NAMES[k] || k),
                el("td", { class: "ms" }, formatMs(value)),
                el("td", { class: "bar-cell", "aria-hidden": "true" }, bar(width)),
              );
            }),
            "total" in timings
              ? el("tr", { class: "total" }, el("th", { scope: "row" }, "Total"), el("td", { class: "ms" }, formatMs(timings.total)), el("td"))
              : null,
          ),
        ),
      ),
    );
  } else if (turn.pending) {
    parts.push(section("Timings", el("p", { class: "muted" }, "…")));
  }

  if (turn.settings && Object.keys(turn.settings).length) {
    parts.push(section("Settings", settingsList(turn)));
  }
  return parts;
}

/** A timing bar; its width is set through the CSSOM, which the page's CSP allows (unlike style attributes). */
function bar(percent) {
  const node = el("span", { class: "bar" });
  node.style.width = `${percent.toFixed(1)}%`;
  return node;
}

function formatSetting(value) {
  if (typeof value === "number" && !Number.isInteger(value)) return String(Number(value.toPrecision(3)));
  return String(value);
}

/** The settings a turn ran with. */
function settingsList(turn) {
  return el("dl", { class: "settings" }, settingRows(turn).map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

/** A turn's settings as flat [name, value] rows ("limit max words"), generator first. */
function settingRows(turn) {
  const s = turn.settings || {};
  const rows = [["generator", turn.generator || s.generator || "–"]];
  for (const [key, value] of Object.entries(s)) {
    if (key === "generator") continue;
    if (value && typeof value === "object") {
      for (const [inner, v] of Object.entries(value)) if (typeof v !== "object") rows.push([`${key} ${inner}`, v]);
    } else {
      rows.push([key, value]);
    }
  }
  return rows.map(([k, v]) => [k.replace(/_/g, " "), formatSetting(v)]);
}

/**
 * Two versions of a turn side by side: what differs in their settings, each answer, the passages
 * each cited (those cited by one version only marked), and the time taken.
 */
export function comparisonNode(older, newer, onCite) {
  const citedIds = (t) => new Set((t.passages || []).filter((p) => p.used || citedRanks(t.sentences).has(p.rank)).map((p) => p.passage_id));
  const olderCited = citedIds(older);
  const newerCited = citedIds(newer);
  const newerSettings = new Map(settingRows(newer));
  const olderSettings = new Map(settingRows(older));
  const changed = [...new Set([...olderSettings.keys(), ...newerSettings.keys()])].filter(
    (k) => olderSettings.get(k) !== newerSettings.get(k),
  );
  const column = (turn, own, other, settings, heading) =>
    el(
      "div",
      { class: "compare-column" },
      el("h4", {}, heading),
      el(
        "dl",
        { class: "settings" },
        changed.map((k) => [el("dt", {}, k), el("dd", {}, settings.get(k) ?? "–")]),
        el("dt", {}, "took"),
        el("dd", {}, formatMs(turn.timings_ms && turn.timings_ms.total)),
      ),
      answerNode(turn, (rank, button) => onCite(turn, rank, button)),
      fallbackNotice(turn),
      el("h5", {}, "Passages cited"),
      el(
        "ul",
        { class: "compare-passages" },
        (turn.passages || [])
          .filter((p) => own.has(p.passage_id))
          .map((p) =>
            el(
              "li",
              { class: other.has(p.passage_id) ? "" : "only-here" },
              passageTitle(p),
              other.has(p.passage_id) ? null : el("span", { class: "badge" }, "only here"),
            ),
          ),
      ),
    );
  return el(
    "div",
    { class: "compare", role: "group", "aria-label": `Version ${older.version} and version ${newer.version} compared` },
    column(older, olderCited, newerCited, olderSettings, `Version ${older.version}`),
    column(newer, newerCited, olderCited, newerSettings, `Version ${newer.version}`),
  );
}

/**
 * The passage text with `spans` in <mark>: the server's `cited_spans`, sorted {start, end}
 * ranges in Unicode characters (code points, not the UTF-16 units string indices count).
 */
export function highlightedText(passage, spans) {
  const chars = Array.from(passage);
  const fragment = document.createDocumentFragment();
  let at = 0;
  for (const { start, end } of spans || []) {
    fragment.append(chars.slice(at, start).join(""), el("mark", {}, chars.slice(start, end).join("")));
    at = end;
  }
  fragment.append(chars.slice(at).join(""));
  return fragment;
}
