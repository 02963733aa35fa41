// The cited passage: opened from a citation marker or the "why" panel, with the parts the
// answer cites highlighted and the sentences citing it listed.

import { $, closeOnBackdropClick } from "./dom.js";
import { el, highlightedText, passageScores, passageTitle } from "./render.js";

/** Shows the passage of rank `rank` of `turn`; focus returns to `opener` when it closes. */
export function openPassage(turn, rank, opener) {
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
  $("passage-scores").textContent = passageScores(turn, passage);
  const text = passage.text || "(the text of this passage was not stored)";
  $("passage-text").replaceChildren(highlightedText(text, passage.text ? passage.cited_spans : []));
  $("passage-citing").replaceChildren(...citing.map((s) => el("li", {}, s)));
  $("passage-citing-section").hidden = citing.length === 0;
  const dialog = $("passage-dialog");
  dialog.returnFocusTo = opener;
  dialog.showModal();
  $("passage-close").focus();
}

export function init() {
  const dialog = $("passage-dialog");
  $("passage-close").addEventListener("click", () => dialog.close());
  dialog.addEventListener("close", () => {
    if (dialog.returnFocusTo && dialog.returnFocusTo.isConnected) dialog.returnFocusTo.focus();
    dialog.returnFocusTo = null;
  });
  closeOnBackdropClick(dialog);
}
