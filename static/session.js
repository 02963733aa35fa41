// Signing in and out with a user's token, and the errors of background actions (a rejected
// token signs out; the rest is shown).

import { Api } from "./api.js";
import { $, hideBanner, setError, showBanner } from "./dom.js";
import { describeError, isAuthError } from "./errors.js";
import { state, TOKEN_KEY } from "./state.js";

/** What runs once a token is accepted (load the conversations, show the page asked for). */
let afterSignIn = async () => {};

/** Handles an error of a background action: a rejected token signs out, the rest is shown. */
export function reportError(error, where = null) {
  if (isAuthError(error)) {
    signOut(describeError(error));
    return;
  }
  if (where) setError(where, describeError(error));
  else showBanner(describeError(error));
}

async function checkServer() {
  for (const [path, id] of [
    ["/healthz", "health"],
    ["/readyz", "ready"],
  ]) {
    const node = $(id);
    try {
      const r = await fetch(path);
      node.textContent = r.ok ? "up" : `unavailable (${r.status})`;
      node.className = r.ok ? "ok" : "down";
    } catch {
      node.textContent = "unreachable";
      node.className = "down";
    }
  }
}

/** The sign-in page, with an error (a refused token, a server down) or a plain note. */
function showSignIn(message = "", note = "") {
  document.body.dataset.view = "signin";
  $("signin-view").hidden = false;
  $("app-view").hidden = true;
  $("sign-out").hidden = true;
  $("who").textContent = "";
  setError("signin-error", message);
  setError("signin-note", note);
  checkServer();
  $("token-input").focus();
}

async function signIn(token) {
  const api = new Api(token);
  const { user } = await api.me();
  state.api = api;
  state.user = user;
  localStorage.setItem(TOKEN_KEY, token);
  document.body.dataset.view = "app";
  $("signin-view").hidden = true;
  $("app-view").hidden = false;
  $("sign-out").hidden = false;
  $("who").textContent = `Signed in as ${user.name}`;
  setError("signin-error", "");
  setError("signin-note", "");
  await afterSignIn();
}

function signOut(message = "", note = "") {
  localStorage.removeItem(TOKEN_KEY);
  state.api = null;
  state.user = null;
  state.current = null;
  state.conversations = [];
  $("token-input").value = "";
  // An open dialog (a passage, your profile) would stay over the sign-in page.
  for (const dialog of document.querySelectorAll("dialog[open]")) dialog.close();
  hideBanner();
  if (location.hash) history.replaceState(null, "", location.pathname);
  showSignIn(message, note);
}

/** Signs in with the token of the last visit, or shows the sign-in page (with `message`). */
export async function resume(message = "") {
  const token = localStorage.getItem(TOKEN_KEY);
  if (!token) {
    showSignIn(message);
    return;
  }
  try {
    await signIn(token);
  } catch (error) {
    if (isAuthError(error)) {
      signOut(describeError(error));
    } else {
      // Keep the token: the server may just be down. Signing in again retries.
      showSignIn(describeError(error));
      $("token-input").value = token;
    }
  }
}

/** Wires the sign-in form and the sign-out button; `onSignedIn` runs after every sign-in. */
export function init({ onSignedIn }) {
  afterSignIn = onSignedIn;
  $("signin-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const token = $("token-input").value.trim();
    if (!token) {
      setError("signin-error", "Paste your token first.");
      return;
    }
    const button = $("signin-button");
    button.disabled = true;
    try {
      await signIn(token);
    } catch (error) {
      setError("signin-error", describeError(error));
      $("token-input").focus();
    } finally {
      button.disabled = false;
    }
  });
  $("sign-out").addEventListener("click", () => signOut("", "You are signed out."));
  $("banner-close").addEventListener("click", hideBanner);
}
