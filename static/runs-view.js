// "Runs": the signed-in user's stored batch runs (GET /v1/runs) with their summary measures
// against judgments they chose or uploaded (GET/PUT /v1/qrels), one run's turns with their
// measures (GET /v1/runs/{run}), and two runs compared turn by turn (GET /v1/runs/compare):
// both rewrites, both selected PTKB statements, both top passages with their grades, and the
// difference, sortable by it. The server computes every number (convrag eval's code).

import { $, announce, setError, showSection } from "./dom.js";
import { el } from "./render.js";
import { reportError } from "./session.js";
import { state } from "./state.js";

/** The summary measures, as the server names them, with their column labels. */
const MEASURES = [
  ["ndcg_cut_3", "nDCG@3"],
  ["ndcg_cut_10", "nDCG@10"],
  ["P_10", "P@10"],
  ["recall_100", "R@100"],
  ["map", "MAP"],
];
/** Passages shown per run and turn in the comparison. */
const COMPARED_PASSAGES = 5;

let runs = [];
/** Names of the ticked runs, in the order ticked (the first is A). */
let ticked = [];
/** The comparison shown, kept to re-sort it. */
let comparison = null;

function value(v) {
  return v === null || v === undefined ? "–" : v.toFixed(4);
}

function signed(v) {
  if (v === null || v === undefined) return "–";
  return (v > 0 ? "+" : v < 0 ? "−" : "±") + Math.abs(v).toFixed(4);
}

function qrelsName() {
  return $("runs-qrels").value;
}

async function loadQrels(select) {
  const { qrels } = await state.api.qrels();
  const chosen = select ?? qrelsName();
  $("runs-qrels").replaceChildren(
    ...qrels.map((q) => el("option", { value: q.name }, `${q.name} (${q.queries} judged turns)`)),
  );
  if (qrels.some((q) => q.name === chosen)) $("runs-qrels").value = chosen;
  $("runs-note").textContent = qrels.length ? "" : "Upload judgments (TREC qrels) to see the measures.";
}

function measureCells(measures) {
  return MEASURES.map(([name]) => el("td", { class: "num", dataset: { measure: name } }, value(measures ? measures[name] : null)));
}

function runRow(run, summary) {
  const tick = el("input", {
    type: "checkbox",
    "aria-label": `Compare ${run.name}`,
    checked: ticked.includes(run.name),
    onchange: (event) => {
      ticked = ticked.filter((n) => n !== run.name);
      if (event.target.checked) ticked.push(run.name);
      // Two at most: the oldest tick goes.
      while (ticked.length > 2) ticked.shift();
      for (const box of $("runs-rows").querySelectorAll("input[type=checkbox]")) {
        box.checked = ticked.includes(box.closest("tr").dataset.run);
      }
      $("runs-compare").disabled = ticked.length !== 2;
    },
  });
  const open = el("button", { type: "button", class: "link", onclick: () => openRun(run.name) }, run.name);
  return el(
    "tr",
    { dataset: { run: run.name } },
    el("td", {}, tick),
    el("th", { scope: "row" }, open),
    el("td", {}, run.task),
    el("td", {}, new Date(run.created_at).toLocaleString()),
    el("td", { class: "num" }, String(run.topics)),
    el("td", { class: "num" }, String(run.turns)),
    ...measureCells(summary),
  );
}

/** Lists the runs with their summaries for the chosen judgments. */
async function renderRuns() {
  const qrels = qrelsName();
  const summaries = await Promise.all(
    runs.map((r) => (qrels ? state.api.run(r.name, qrels).then((x) => x.summary) : Promise.resolve(null))),
  );
  $("runs-rows").replaceChildren(...runs.map((r, i) => runRow(r, summaries[i])));
  $("runs-empty").hidden = runs.length > 0;
  $("runs-compare").disabled = ticked.length !== 2;
}

/** Shows the Runs view (the `#/runs` route). */
export async function showRuns() {
  showSection("runs-view");
  try {
    runs = (await state.api.runs()).runs;
    ticked = ticked.filter((n) => runs.some((r) => r.name === n));
    await loadQrels();
    await renderRuns();
    setError("runs-error", "");
  } catch (error) {
    reportError(error, "runs-error");
  }
}

async function openRun(name) {
  const qrels = qrelsName();
  if (!qrels) {
    setError("runs-error", "Choose or upload judgments first.");
    return;
  }
  try {
    const report = await state.api.run(name, qrels);
    $("run-detail-title").textContent = `${name}: ${report.judged_turns} judged turns (${qrels})`;
    $("run-detail-rows").replaceChildren(
      ...report.turns.map((t) =>
        el(
          "tr",
          { dataset: { turn: t.turn_id } },
          el("th", { scope: "row" }, t.turn_id),
          el("td", {}, t.utterance),
          el("td", { class: "rewrite" }, t.rewrite ?? "–"),
          ...measureCells(t.judged ? t.measures : null),
        ),
      ),
    );
    $("run-detail").hidden = false;
    setError("runs-error", "");
    $("run-detail-title").scrollIntoView({ block: "start" });
    announce(`Run ${name} opened.`);
  } catch (error) {
    reportError(error, "runs-error");
  }
}

/** One run's side of a compared turn. */
function side(label, outcome) {
  if (!outcome) return el("div", { class: "compare-side" }, el("h4", {}, label), el("p", { class: "muted" }, "No such turn in this run."));
  const passages = outcome.passages.slice(0, COMPARED_PASSAGES).map((p) =>
    el(
      "li",
      { class: p.grade > 0 ? "relevant" : null },
      el("span", { class: "badge grade" }, p.grade === null ? "unjudged" : `grade ${p.grade}`),
      " ",
      el("span", { class: "passage-name" }, p.title || p.passage_id),
    ),
  );
  return el(
    "div",
    { class: "compare-side" },
    el("h4", {}, label),
    el("p", { class: "rewrite" }, outcome.rewrite ?? "–"),
    el("p", { class: "small muted" }, "Selected statements"),
    outcome.ptkb.length
      ? el("ul", { class: "compare-ptkb" }, outcome.ptkb.map((s) => el("li", {}, s)))
      : el("p", { class: "small muted" }, "none"),
    el("p", { class: "small muted" }, "Top passages"),
    el("ol", { class: "compare-passages" }, passages),
  );
}

function sortedTurns() {
  const order = $("run-compare-sort").value;
  const turns = [...comparison.turns];
  if (order === "turn") return turns;
  const key = (t) => (t.difference === null ? null : t.difference);
  const sign = order === "difference-desc" ? -1 : 1;
  // Turns without a difference (unjudged) last, whichever way.
  return turns.sort((x, y) => {
    const a = key(x);
    const b = key(y);
    if (a === null || b === null) return (a === null) - (b === null);
    return sign * (a - b);
  });
}

function renderComparison() {
  const c = comparison;
  $("run-compare-turns").replaceChildren(
    ...sortedTurns().map((t) =>
      el(
        "li",
        { class: "compare-turn", dataset: { turn: t.turn_id } },
        el(
          "div",
          { class: "compare-head" },
          el("strong", {}, t.turn_id),
          " ",
          el("span", {}, t.utterance),
          el(
            "span",
            { class: "compare-values" },
            `A ${value(t.value_a)} · B ${value(t.value_b)} · `,
            el("span", { class: "difference", dataset: { value: t.difference ?? "" } }, signed(t.difference)),
          ),
        ),
        el("div", { class: "compare-sides" }, side(`A: ${c.a.name}`, t.a), side(`B: ${c.b.name}`, t.b)),
      ),
    ),
  );
}

async function compareTicked() {
  const [a, b] = ticked;
  const qrels = qrelsName();
  if (!qrels) {
    setError("runs-error", "Choose or upload judgments first.");
    return;
  }
  try {
    comparison = await state.api.compareRuns(a, b, qrels, $("runs-measure").value);
    const c = comparison;
    $("run-compare-title").textContent = `${c.b.name} − ${c.a.name} on ${c.measure}`;
    const p = (v) => (v === null || v === undefined ? "–" : v.toFixed(4));
    $("run-compare-summary").textContent =
      `Means: A ${value(c.mean_a)}, B ${value(c.mean_b)} (difference ${signed(c.mean_difference)}); ` +
      `B better on ${c.wins}, equal on ${c.ties}, worse on ${c.losses} turns; ` +
      `paired t-test p = ${p(c.t_test_p)}, randomization test p = ${p(c.randomization_p)}.`;
    renderComparison();
    $("run-compare").hidden = false;
    setError("runs-error", "");
    $("run-compare-title").scrollIntoView({ block: "start" });
    announce(`Runs ${a} and ${b} compared.`);
  } catch (error) {
    reportError(error, "runs-error");
  }
}

async function uploadQrels(event) {
  event.preventDefault();
  const name = $("qrels-name").value.trim();
  const file = $("qrels-file").files[0];
  if (!file) {
    setError("runs-error", "Choose a qrels file to upload.");
    return;
  }
  try {
    const { qrels } = await state.api.putQrels(name, await file.text());
    await loadQrels(qrels.name);
    await renderRuns();
    setError("runs-error", "");
    $("qrels-upload").reset();
    announce(`Judgments ${qrels.name} stored: ${qrels.judgments} judgments of ${qrels.queries} turns.`);
  } catch (error) {
    reportError(error, "runs-error");
  }
}

export function init() {
  $("open-runs").addEventListener("click", () => {
    location.hash = "#/runs";
  });
  $("runs-qrels").addEventListener("change", () => {
    $("run-detail").hidden = true;
    $("run-compare").hidden = true;
    renderRuns().catch((error) => reportError(error, "runs-error"));
  });
  $("runs-compare").addEventListener("click", compareTicked);
  $("run-compare-sort").addEventListener("change", renderComparison);
  $("qrels-upload").addEventListener("submit", uploadQrels);
}
