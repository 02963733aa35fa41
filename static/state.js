// The app state: who is signed in, their conversations, the open one, and whether a turn is
// being answered. The modules share this one object; only the functions below re-render for it.

import { $ } from "./dom.js";

export const TOKEN_KEY = "convrag.token";

/** Where the unsent message of a conversation is kept (sessionStorage) across reloads. */
export const draftKey = (conversationId) => `convrag.draft.${conversationId}`;

export const state = {
  api: null,
  user: null,
  conversations: [],
  collections: null,
  /** The open conversation: {conversation, ptkb, turnViews: Map(seq -> TurnView)}. */
  current: null,
  /** True while a turn of the open conversation is being answered. */
  busy: false,
};

/** Sets whether a turn is being answered: sending and regenerating wait for it. */
export function setBusy(busy) {
  state.busy = busy;
  $("send").disabled = busy;
  $("send").textContent = busy ? "Answering…" : "Send";
  for (const view of state.current ? state.current.turnViews.values() : []) view.renderActions();
}
