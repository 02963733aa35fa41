// The answer settings forms (the composer's and the regenerate dialog's): their fields are the
// request fields of `POST .../turns`, which differ from the names of the settings stored with a
// turn (`TurnSettings` in src/pipeline/turn.rs).

/** The numeric request fields a settings form may have. */
const NUMBER_FIELDS = ["rerank_depth", "passages", "max_words"];
/** The first stages a form offers (`retrieval`; empty: the server's default). */
const RETRIEVALS = ["bm25", "dense", "hybrid"];

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
