// The drawers: the conversation list and the "About you" panel are columns on wide screens and
// slide over the chat on small ones (closed by the scrim, Escape or their buttons).

import { $ } from "./dom.js";

/** Each drawer's id with the id of the button that toggles it. */
const DRAWERS = { sidebar: "toggle-sidebar", "ptkb-panel": "toggle-ptkb" };

/** Wide enough for the PTKB panel as a column (set by init). */
let wide = null;

function drawerOpen(id) {
  return document.body.classList.contains(`${id}-open`);
}

function isOverlay(id) {
  return id === "sidebar" ? !window.matchMedia("(min-width: 50rem)").matches : !wide.matches;
}

function setDrawer(id, open, moveFocus = true) {
  document.body.classList.toggle(`${id}-open`, open);
  $(DRAWERS[id]).setAttribute("aria-expanded", String(open));
  const overlay = Object.keys(DRAWERS).some((d) => drawerOpen(d) && isOverlay(d));
  document.body.classList.toggle("overlay-open", overlay);
  if (open && moveFocus && isOverlay(id)) {
    const target = $(id).querySelector("a, button, input, textarea, select");
    if (target) target.focus();
  }
}

/** Closes a drawer that lies over the chat (a column stays). */
export function closeDrawer(id) {
  if (drawerOpen(id) && isOverlay(id)) setDrawer(id, false, false);
}

/** Wires the drawers and sets them for the window's width: the PTKB column open when wide. */
export function init() {
  wide = window.matchMedia("(min-width: 75rem)");
  for (const [id, toggle] of Object.entries(DRAWERS)) {
    $(toggle).addEventListener("click", () => setDrawer(id, !drawerOpen(id)));
  }
  $("ptkb-close").addEventListener("click", () => {
    setDrawer("ptkb-panel", false);
    $("toggle-ptkb").focus();
  });
  $("scrim").addEventListener("click", () => {
    for (const id of Object.keys(DRAWERS)) closeDrawer(id);
  });
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || document.querySelector("dialog[open]")) return;
    for (const [id, toggle] of Object.entries(DRAWERS)) {
      if (drawerOpen(id) && isOverlay(id)) {
        setDrawer(id, false);
        $(toggle).focus();
      }
    }
  });
  wide.addEventListener("change", () => setDrawer("ptkb-panel", wide.matches, false));
  setDrawer("ptkb-panel", wide.matches, false);
  setDrawer("sidebar", false, false);
}
