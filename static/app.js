// The convrag chat page: wires the modules together and routes between the welcome page, the
// new conversation form and a conversation. Plain ES modules, no framework; everything they talk
// to is the public HTTP API of the same origin. No module does anything when imported: the
// start below calls their init functions.

import * as collectionStatus from "./collection-status.js";
import * as composer from "./composer.js";
import * as conversation from "./conversation.js";
import { loadConversations, renderConversationList } from "./conversation-list.js";
import { showSection } from "./dom.js";
import * as documentsPanel from "./documents-panel.js";
import * as drawers from "./drawers.js";
import * as newConversation from "./new-conversation.js";
import * as passageDialog from "./passage-dialog.js";
import * as profilePanel from "./profile-panel.js";
import * as ptkbPanel from "./ptkb-panel.js";
import * as regenerate from "./regenerate.js";
import * as runsView from "./runs-view.js";
import * as session from "./session.js";
import { consumeSignInLink } from "./sign-in-link.js";
import { state } from "./state.js";
import * as turnView from "./turn-view.js";

const UUID = "[0-9a-fA-F-]{36}";

/**
 * Shows what the location's hash names: `#/c/{id}` a conversation, `#/c/{id}/t/{turn}/p/{rank}`
 * one of its turns' passages (the link chat clients get for a citation without a web address),
 * `#/new` the form, `#/runs` the runs.
 */
async function route() {
  if (!state.api) return;
  drawers.closeDrawer("sidebar");
  const hash = location.hash;
  const chat = new RegExp(`^#/c/(${UUID})$`).exec(hash);
  const cited = new RegExp(`^#/c/(${UUID})/t/(${UUID})/p/([0-9]+)$`).exec(hash);
  if (chat) {
    await conversation.openConversation(chat[1]);
  } else if (cited) {
    await conversation.openConversation(cited[1]);
    const { turn } = await state.api.turn(cited[1], cited[2]);
    passageDialog.openPassage(turn, Number(cited[3]), null);
  } else if (hash === "#/runs") {
    state.current = null;
    renderConversationList();
    await runsView.showRuns();
  } else if (hash === "#/new") {
    state.current = null;
    renderConversationList();
    await newConversation.showNewConversation();
  } else {
    state.current = null;
    renderConversationList();
    showSection("welcome-view");
  }
}

function start() {
  drawers.init();
  session.init({
    onSignedIn: async () => {
      await loadConversations();
      await route();
      // A collection that becomes ready refreshes the new conversation form's list.
      collectionStatus.watch({
        onChange: () => location.hash === "#/new" && newConversation.showNewConversation(),
      });
    },
  });
  newConversation.init();
  conversation.init();
  composer.init();
  ptkbPanel.init();
  profilePanel.init();
  documentsPanel.init();
  passageDialog.init();
  regenerate.init();
  runsView.init();
  turnView.init({ openPassage: passageDialog.openPassage, openRegenerate: regenerate.openRegenerate });
  window.addEventListener("hashchange", () => route().catch((e) => session.reportError(e)));
  consumeSignInLink().then((error) => session.resume(error));
}

start();
