// The composer: the message box (Enter sends, the unsent text survives reloads and failures)
// and its answer settings; sending streams the new turn into the chat.

import { loadConversations } from "./conversation-list.js";
import { $, scrollToEnd, setError } from "./dom.js";
import { reportError } from "./session.js";
import { draftKey, setBusy, state } from "./state.js";
import { renderSettingsFields, settingsFrom } from "./turn-settings.js";
import { streamHandlers } from "./stream.js";
import { TurnView } from "./turn-view.js";

/** Puts the unsent message of a conversation (if any) back into the box. */
export function restoreDraft(conversationId) {
  setError("composer-error", "");
  $("composer-input").value = sessionStorage.getItem(draftKey(conversationId)) || "";
}

async function send(event) {
  event.preventDefault();
  if (!state.current || state.busy) return;
  const input = $("composer-input");
  const utterance = input.value.trim();
  if (!utterance) {
    setError("composer-error", "Type a message first.");
    input.focus();
    return;
  }
  const conversation = state.current.conversation;
  const body = { utterance, ...settingsFrom($("composer")) };
  setError("composer-error", "");
  const seq = Math.max(0, ...state.current.turnViews.keys()) + 1;
  const view = new TurnView([], seq);
  view.beginStream(utterance);
  $("turns").append(view.el);
  $("turns-empty").hidden = true;
  input.value = "";
  setBusy(true);
  scrollToEnd();
  const opened = state.current;
  try {
    const turn = await state.api.streamTurn(conversation.id, body, streamHandlers(view));
    view.finish(turn);
    opened.turnViews.set(turn.seq, view);
    sessionStorage.removeItem(draftKey(conversation.id));
    conversation.turn_count = turn.seq;
    loadConversations().catch(() => {});
  } catch (error) {
    view.el.remove();
    if (state.current === opened) {
      // Nothing typed is lost: the message goes back into the box, before anything typed since.
      input.value = input.value.trim() ? `${utterance}\n${input.value}` : utterance;
      sessionStorage.setItem(draftKey(conversation.id), input.value);
      $("turns-empty").hidden = opened.turnViews.size > 0;
    }
    reportError(error, "composer-error");
  } finally {
    if (state.current === opened) {
      setBusy(false);
      scrollToEnd(true);
    }
  }
}

export function init() {
  // A new message's word limit is the chat's; only a regenerated answer sets its own.
  renderSettingsFields($("composer-settings"), "composer", ["max_words"]);
  $("composer").addEventListener("submit", send);
  $("composer-input").addEventListener("input", (event) => {
    if (state.current) sessionStorage.setItem(draftKey(state.current.conversation.id), event.target.value);
  });
  $("composer-input").addEventListener("keydown", (event) => {
    // Enter sends, Shift+Enter starts a new line (as in other chat tools).
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
}
