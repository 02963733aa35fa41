// The "Regenerate…" dialog: runs a turn again, with its settings to start from.

import { $, closeOnBackdropClick } from "./dom.js";
import { fillSettingsForm, renderSettingsFields, settingsFrom } from "./turn-settings.js";

/** The turn view being regenerated and the button that opened the dialog (focus returns there). */
let target = null;

/** Opens the dialog for the shown version of a turn view. */
export function openRegenerate(view, opener) {
  target = { view, opener };
  const form = $("regenerate-form");
  fillSettingsForm(form, view.turn);
  $("regenerate-utterance").textContent = view.turn.utterance;
  $("regenerate-dialog").showModal();
  form.querySelector('[name="generator"]').focus();
}

export function init() {
  renderSettingsFields($("regenerate-settings"), "regenerate");
  $("regenerate-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = target;
    $("regenerate-dialog").close();
    if (chosen) chosen.view.regenerate(settingsFrom($("regenerate-form")));
  });
  $("regenerate-cancel").addEventListener("click", () => $("regenerate-dialog").close());
  $("regenerate-dialog").addEventListener("close", () => {
    const closed = target;
    target = null;
    if (closed && closed.opener.isConnected) closed.opener.focus();
  });
  closeOnBackdropClick($("regenerate-dialog"));
}
