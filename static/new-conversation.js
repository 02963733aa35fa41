// The new conversation form: a title, the collection to answer from, and the first PTKB
// statements.

import { collectionLabel, preferredCollection } from "./collection-status.js";
import { loadConversations } from "./conversation-list.js";
import { $, setError, showSection } from "./dom.js";
import { el } from "./render.js";
import { reportError } from "./session.js";
import { state } from "./state.js";

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

export async function showNewConversation() {
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
    ...state.collections.map((c) => {
      const option = el("option", { value: c.name }, collectionLabel(c));
      option.disabled = Boolean(c.status) && c.status !== "ready";
      return option;
    }),
  );
  const kept = chosen && select.querySelector(`option[value="${CSS.escape(chosen)}"]`);
  if (kept && !kept.disabled) select.value = chosen;
  else select.value = preferredCollection(state.collections);
  if (!state.collections.length) {
    setError("new-error", "This server has no passage collection yet. An administrator adds one with `convrag index`.");
  }
  $("new-title").focus();
}

async function create(event) {
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
}

export function init() {
  $("add-statement-row").addEventListener("click", () => {
    const row = statementRow();
    $("new-statements").append(row);
    numberStatementRows();
    row.querySelector("input").focus();
  });
  $("new-form").addEventListener("submit", create);
  $("new-conversation").addEventListener("click", () => {
    if (location.hash === "#/new") showNewConversation();
    else location.hash = "#/new";
  });
}
