// "Your documents": the signed-in user's private collections (GET/POST/DELETE /v1/collections), files
// dropped or picked into one (POST /v1/collections/{name}/documents, multipart), and the progress
// of their indexing (GET /v1/collections/{name}) until they can be chosen for a new conversation.

import { $, announce, closeOnBackdropClick, setError } from "./dom.js";
import { el } from "./render.js";
import { reportError } from "./session.js";
import { state } from "./state.js";

/** The user's private collections as last loaded. */
let collections = [];

function statusText(c) {
  if (c.status === "building") {
    const p = c.progress;
    const percent = p && p.bytes_total ? ` ${Math.floor((100 * p.bytes_done) / p.bytes_total)}%` : "";
    return `indexing ${c.files_total} file(s)…${percent}`;
  }
  if (c.status === "failed") return `the last upload failed: ${c.error || "unknown error"}`;
  return `${c.documents} document(s), ${Number(c.passages).toLocaleString()} passages`;
}

function render() {
  $("documents-list").replaceChildren(
    ...collections.map((c) =>
      el(
        "li",
        { class: "ptkb-item", dataset: { name: c.name, status: c.status } },
        el("span", { class: "statement-text" }, c.name),
        el("span", { class: "muted small collection-status" }, statusText(c)),
        el(
          "button",
          { type: "button", class: "secondary remove", "aria-label": `Delete collection ${c.name}`, disabled: c.status === "building", onclick: () => deleteCollection(c.name) },
          "Delete",
        ),
      ),
    ),
  );
  $("documents-empty").hidden = collections.length > 0;
  const select = $("documents-target");
  const chosen = select.value;
  select.replaceChildren(...collections.map((c) => el("option", { value: c.name }, c.name)));
  if (chosen && collections.some((c) => c.name === chosen)) select.value = chosen;
  $("documents-upload").hidden = collections.length === 0;
}

async function load() {
  const all = (await state.api.collections()).collections;
  collections = all.filter((c) => c.visibility === "private");
  // The new conversation form lists every collection: make it ask again.
  state.collections = null;
  render();
}

async function createCollection(event) {
  event.preventDefault();
  const input = $("documents-name");
  try {
    const { collection } = await state.api.createCollection(input.value.trim());
    input.value = "";
    setError("documents-error", "");
    await load();
    $("documents-target").value = collection.name;
    announce(`Collection ${collection.name} created. Add files to it.`);
  } catch (error) {
    reportError(error, "documents-error");
  }
}

async function deleteCollection(name) {
  if (!window.confirm(`Delete ${name} and every document in it? Conversations over it keep their answers.`)) return;
  try {
    await state.api.deleteCollection(name);
    setError("documents-error", "");
    await load();
    announce(`Collection ${name} deleted.`);
  } catch (error) {
    reportError(error, "documents-error");
  }
}

/** Polls the collection until its upload is indexed, updating the list as it goes. */
async function follow(name) {
  for (;;) {
    const { collection } = await state.api.collection(name);
    collections = collections.map((c) => (c.name === name ? collection : c));
    render();
    if (collection.status !== "building") return collection;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

async function upload(files) {
  const name = $("documents-target").value;
  if (!name || !files.length) return;
  setError("documents-error", "");
  $("documents-progress").textContent = `Uploading ${files.length} file(s) to ${name}…`;
  try {
    await state.api.uploadDocuments(name, files);
    const done = await follow(name);
    await load();
    const message =
      done.status === "ready"
        ? `${name} is ready: ${done.documents} document(s). Start a new conversation with it.`
        : `${name}: ${statusText(done)}`;
    $("documents-progress").textContent = message;
    announce(message);
  } catch (error) {
    $("documents-progress").textContent = "";
    reportError(error, "documents-error");
  }
}

async function openDocuments() {
  setError("documents-error", "");
  $("documents-progress").textContent = "";
  collections = [];
  $("documents-list").replaceChildren();
  $("documents-empty").hidden = true;
  $("documents-dialog").showModal();
  $("documents-name").focus();
  try {
    await load();
  } catch (error) {
    reportError(error, "documents-error");
  }
}

export function init() {
  const dialog = $("documents-dialog");
  $("open-documents").addEventListener("click", () => openDocuments().catch((e) => reportError(e, "documents-error")));
  $("documents-close").addEventListener("click", () => dialog.close());
  $("documents-create").addEventListener("submit", createCollection);
  const picker = $("documents-files");
  picker.addEventListener("change", () => {
    const files = [...picker.files];
    picker.value = "";
    upload(files);
  });
  const drop = $("documents-drop");
  drop.addEventListener("dragover", (event) => {
    event.preventDefault();
    drop.classList.add("dragging");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("dragging"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("dragging");
    upload([...event.dataTransfer.files]);
  });
  dialog.addEventListener("close", () => $("open-documents").focus());
  closeOnBackdropClick(dialog);
}
