// The collections' readiness: while the server prepares its default collection (the PostgreSQL
// manual on a fresh server), a status line shows its progress, and the new conversation form
// lists it as not ready yet; once ready, the form offers it and it is preselected.

import { $ } from "./dom.js";
import { state } from "./state.js";

const POLL_MS = 2000;
let timer = null;

/** The label of a collection in the form's list. */
export function collectionLabel(c) {
  if (c.status === "ready") return `${c.name} (${Number(c.passages).toLocaleString()} passages)`;
  if (c.status === "failed") return `${c.name} (could not be prepared)`;
  return `${c.name} (preparing… ${Math.floor((c.progress || 0) * 100)}%)`;
}

/** The collection a new conversation should start with: the default one when it is ready. */
export function preferredCollection(collections) {
  const ready = collections.filter((c) => c.status === undefined || c.status === "ready");
  const preferred = ready.find((c) => c.default) || (ready.length === 1 ? ready[0] : null);
  return preferred ? preferred.name : "";
}

function describe(c) {
  const what = c.name === "postgresql-manual" ? "the PostgreSQL manual" : `the collection ${c.name}`;
  if (c.status === "failed") return `The server could not prepare ${what}: ${c.error || "see its log"}.`;
  return `Preparing ${what}… ${Math.floor((c.progress || 0) * 100)}%. You can start a conversation once it is ready.`;
}

function render(collections) {
  const pending = collections.filter((c) => c.status && c.status !== "ready");
  const line = $("collection-status");
  line.textContent = pending.map(describe).join(" ");
  line.hidden = pending.length === 0;
  return pending.some((c) => c.status === "pending" || c.status === "building");
}

/** Fetches the collections (into `state.collections`) and polls while one is being prepared. */
export async function watch({ onChange = () => {} } = {}) {
  clearTimeout(timer);
  if (!state.api) return;
  let collections;
  try {
    collections = (await state.api.collections()).collections;
  } catch {
    return; // The page's own requests report a server that is down.
  }
  const before = JSON.stringify((state.collections || []).map((c) => [c.name, c.status]));
  state.collections = collections;
  if (render(collections)) timer = setTimeout(() => watch({ onChange }), POLL_MS);
  if (before !== JSON.stringify(collections.map((c) => [c.name, c.status]))) onChange();
}
