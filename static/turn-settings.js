// The answer settings forms (the composer's and the regenerate dialog's), both rendered from one
// spec: their fields are the request fields of `POST .../turns`, which differ from the names of the settings stored with a
// turn (`TurnSettings` in src/pipeline/turn.rs).

/**
 * The one spec of an answer settings form: each field's request name, the id suffix of its
 * control (`composer-…`, `regenerate-…`), its label, and its kind: a choice among `options`
 * (the first, empty, is the server's default), a checkbox, or a number.
 */
const FIELDS = [
  {
    name: "generator", id: "generator", label: "Generator", options: [
      ["", "Server default"],
      ["extractive", "Extractive (sentences from the passages)"],
      ["llm", "Language model"],
    ],
  },
  {
    name: "rewriter", id: "rewriter", label: "Query rewriter", options: [
      ["", "Server default (conversation history)"],
      ["history", "Conversation history"],
      ["llm", "Language model"],
    ],
  },
  {
    name: "retrieval", id: "retrieval", label: "First stage", options: [
      ["", "Server default"],
      ["bm25", "BM25 (words)"],
      ["dense", "Dense (meaning, the bi-encoder)"],
      ["hybrid", "Hybrid (both, fused)"],
    ],
  },
  { name: "rerank", id: "rerank", label: "Rerank with the model", checkbox: true },
  { name: "rerank_depth", id: "depth", label: "Rerank depth", number: true },
  { name: "passages", id: "passages", label: "Passages", number: true },
  { name: "max_words", id: "words", label: "Word limit", number: true },
];

/** The numeric request fields a settings form may have. */
const NUMBER_FIELDS = FIELDS.filter((f) => f.number).map((f) => f.name);
/** The first stages a form offers (`retrieval`; empty: the server's default). */
const RETRIEVALS = FIELDS.find((f) => f.name === "retrieval").options.map(([value]) => value).filter(Boolean);

/**
 * Puts the spec's controls into `grid` (a `.settings-grid`), ids prefixed with `prefix`; the
 * request fields in `omit` are left out.
 */
export function renderSettingsFields(grid, prefix, omit = []) {
  for (const field of FIELDS) {
    if (omit.includes(field.name)) continue;
    const id = `${prefix}-${field.id}`;
    const label = document.createElement("label");
    label.htmlFor = id;
    label.textContent = field.label;
    let control;
    if (field.options) {
      control = document.createElement("select");
      for (const [value, text] of field.options) control.append(new Option(text, value));
    } else {
      control = document.createElement("input");
      if (field.checkbox) {
        control.type = "checkbox";
        control.checked = true;
      } else {
        control.type = "number";
        control.inputMode = "numeric";
        control.placeholder = "default";
      }
    }
    control.id = id;
    control.name = field.name;
    grid.append(label, control);
  }
}

/** Request fields from a settings form (only the ones set). */
export function settingsFrom(form) {
  const body = {};
  const generator = form.querySelector('[name="generator"]').value;
  if (generator) body.generator = generator;
  const rewriter = form.querySelector('[name="rewriter"]');
  if (rewriter && rewriter.value) body.rewriter = rewriter.value;
  const retrieval = form.querySelector('[name="retrieval"]');
  if (retrieval && retrieval.value) body.retrieval = retrieval.value;
  const rerank = form.querySelector('[name="rerank"]');
  if (rerank && !rerank.checked) body.rerank = false;
  for (const name of NUMBER_FIELDS) {
    const input = form.querySelector(`[name="${name}"]`);
    if (input && input.value.trim() !== "") body[name] = Number(input.value);
  }
  return body;
}

/**
 * The form values (by request field) that run a turn again as the stored `turn` ran: its
 * settings name the rerank depth `depth` and the word limit `limit.max_words`. Its first stage is
 * the one asked for (`settings.retrieval`), not a BM25 fallback, so a rerun asks for it again.
 */
export function formValuesOf(turn) {
  const settings = turn.settings || {};
  const generator = String(turn.generator || "");
  return {
    generator: generator.startsWith("llm") ? "llm" : generator === "extractive" ? "extractive" : "",
    rewriter: settings.rewriter === "llm" ? "llm" : "",
    retrieval: RETRIEVALS.includes(settings.retrieval) ? settings.retrieval : "",
    rerank: settings.rerank !== false,
    rerank_depth: settings.depth ?? "",
    passages: settings.passages ?? "",
    max_words: (settings.limit && settings.limit.max_words) ?? "",
  };
}

/** Fills a settings form with what `turn` ran with. */
export function fillSettingsForm(form, turn) {
  const values = formValuesOf(turn);
  form.querySelector('[name="generator"]').value = values.generator;
  form.querySelector('[name="rewriter"]').value = values.rewriter;
  form.querySelector('[name="retrieval"]').value = values.retrieval;
  form.querySelector('[name="rerank"]').checked = values.rerank;
  for (const name of NUMBER_FIELDS) form.querySelector(`[name="${name}"]`).value = values[name];
}
