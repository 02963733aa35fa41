// The "About you" panel: the open conversation's PTKB statements, added, edited and removed
// in place (changes apply from the next message on).

import { $, announce, setError } from "./dom.js";
import { el } from "./render.js";
import { reportError } from "./session.js";
import { state } from "./state.js";

/** Shows the open conversation's statements. */
export function renderPtkb() {
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

async function addStatement(event) {
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
}

export function init() {
  $("ptkb-add").addEventListener("submit", addStatement);
}
