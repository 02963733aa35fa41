// "Your profile": the signed-in user's profile statements (GET/POST/DELETE
// /v1/profile/statements), listed, added and removed in a dialog opened from the top bar. The
// server copies them into the "About you" of every conversation created afterwards.

import { $, announce, closeOnBackdropClick, setError } from "./dom.js";
import { el } from "./render.js";
import { reportError } from "./session.js";
import { state } from "./state.js";

/** The statements as last loaded from the server, oldest first. */
let statements = [];

function render() {
  $("profile-list").replaceChildren(...statements.map((s, i) => statementItem(s, i + 1)));
  $("profile-empty").hidden = statements.length > 0;
}

/** One statement, numbered by its place in the list (the ids are the server's, not the person's). */
function statementItem(statement, position) {
  const remove = async () => {
    try {
      await state.api.removeProfileStatement(statement.id);
      statements = statements.filter((s) => s.id !== statement.id);
      setError("profile-error", "");
      render();
      $("profile-add-input").focus();
      announce(`Profile statement ${position} removed. New conversations no longer get it.`);
    } catch (error) {
      reportError(error, "profile-error");
    }
  };
  return el(
    "li",
    { class: "ptkb-item", dataset: { id: String(statement.id) } },
    el("span", { class: "badge" }, String(position)),
    el("span", { class: "statement-text" }, statement.text),
    el(
      "span",
      { class: "item-actions" },
      el("button", { type: "button", class: "secondary remove", "aria-label": `Remove profile statement ${position}`, onclick: remove }, "Remove"),
    ),
  );
}

/** Sends what was typed as it is: the server refuses a blank statement and says why. */
async function addStatement(event) {
  event.preventDefault();
  const input = $("profile-add-input");
  try {
    const { statement } = await state.api.addProfileStatement(input.value);
    statements.push(statement);
    input.value = "";
    setError("profile-error", "");
    render();
    announce(`Profile statement ${statements.length} added. New conversations get it.`);
  } catch (error) {
    reportError(error, "profile-error");
  }
  input.focus();
}

/** Opens the dialog with the statements as the server has them now. */
async function openProfile() {
  const dialog = $("profile-dialog");
  setError("profile-error", "");
  // Nothing is shown until the server answers: neither an old list nor "No statements yet".
  statements = [];
  $("profile-list").replaceChildren();
  $("profile-empty").hidden = true;
  dialog.showModal();
  $("profile-add-input").focus();
  try {
    statements = (await state.api.profileStatements()).statements;
    render();
  } catch (error) {
    reportError(error, "profile-error");
  }
}

export function init() {
  const dialog = $("profile-dialog");
  $("open-profile").addEventListener("click", () => openProfile().catch((e) => reportError(e, "profile-error")));
  $("profile-close").addEventListener("click", () => dialog.close());
  $("profile-add").addEventListener("submit", addStatement);
  dialog.addEventListener("close", () => $("open-profile").focus());
  closeOnBackdropClick(dialog);
}
