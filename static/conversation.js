// The open conversation: its title, its instructions, its turns (every version, grouped by position), its PTKB
// panel and the unsent message; and deleting it.

import { restoreDraft } from "./composer.js";
import { loadConversations, renderConversationList } from "./conversation-list.js";
import { $, hideBanner, scrollToEnd, showSection } from "./dom.js";
import { renderPtkb } from "./ptkb-panel.js";
import { reportError } from "./session.js";
import { draftKey, setBusy, state } from "./state.js";
import { TurnView } from "./turn-view.js";

/** Opens the conversation `id` in the chat (it stays as it was if it is open already). */
export async function openConversation(id) {
  if (state.current && state.current.conversation.id === id) {
    showSection("chat-view");
    return;
  }
  let data, turns;
  try {
    [data, { turns }] = await Promise.all([state.api.conversation(id), state.api.turns(id)]);
  } catch (error) {
    reportError(error);
    state.current = null;
    showSection("welcome-view");
    return;
  }
  hideBanner();
  state.current = { conversation: data.conversation, ptkb: data.ptkb, turnViews: new Map() };
  state.busy = false;
  renderConversationList();
  $("chat-title").textContent = data.conversation.title || "Untitled conversation";
  $("chat-collection").textContent = data.conversation.collection
    ? `Answers from ${data.conversation.collection}`
    : "No collection chosen";
  // A chat client's system message (or the API's `instructions`).
  const instructions = data.conversation.instructions || "";
  $("chat-instructions").hidden = !instructions;
  $("chat-instructions-text").textContent = instructions;
  const bySeq = new Map();
  for (const turn of turns) {
    if (!bySeq.has(turn.seq)) bySeq.set(turn.seq, []);
    bySeq.get(turn.seq).push(turn);
  }
  const list = $("turns");
  list.replaceChildren();
  for (const seq of [...bySeq.keys()].sort((a, b) => a - b)) {
    const view = new TurnView(bySeq.get(seq));
    state.current.turnViews.set(seq, view);
    list.append(view.el);
  }
  $("turns-empty").hidden = bySeq.size > 0;
  renderPtkb();
  restoreDraft(id);
  setBusy(false);
  showSection("chat-view");
  scrollToEnd();
  $("composer-input").focus();
}

async function deleteConversation() {
  if (!state.current) return;
  const { conversation } = state.current;
  if (!window.confirm(`Delete the conversation “${conversation.title || "Untitled conversation"}” and all its turns?`)) return;
  try {
    await state.api.deleteConversation(conversation.id);
    sessionStorage.removeItem(draftKey(conversation.id));
    state.current = null;
    await loadConversations();
    location.hash = "#/";
  } catch (error) {
    reportError(error);
  }
}

export function init() {
  $("delete-conversation").addEventListener("click", deleteConversation);
}
