// The conversation list in the sidebar: each conversation with its collection and turn count,
// the open one marked.

import { $ } from "./dom.js";
import { el } from "./render.js";
import { state } from "./state.js";

/** Fetches the signed-in user's conversations and shows them. */
export async function loadConversations() {
  const { conversations } = await state.api.conversations();
  state.conversations = conversations;
  renderConversationList();
}

export function renderConversationList() {
  const list = $("conversation-list");
  const openId = state.current && state.current.conversation.id;
  list.replaceChildren(
    ...state.conversations.map((c) =>
      el(
        "li",
        {},
        el(
          "a",
          { href: `#/c/${c.id}`, class: "conversation-link", "aria-current": c.id === openId ? "page" : null },
          el("span", { class: "conversation-title" }, c.title || "Untitled conversation"),
          el(
            "span",
            { class: "conversation-meta" },
            [c.collection || "no collection", `${c.turn_count} ${c.turn_count === 1 ? "turn" : "turns"}`].join(" · "),
          ),
        ),
      ),
    ),
  );
  $("conversation-empty").hidden = state.conversations.length > 0;
}
