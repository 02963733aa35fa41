// Signing in from the one-time link `convrag serve` prints on a fresh server
// (`/#sign-in=CODE` on the server's address): the code leaves the address bar at once (so it is not
// kept in the history or bookmarked) and is exchanged, once, for a token.

import { TOKEN_KEY } from "./state.js";

const PREFIX = "#sign-in=";

/**
 * Exchanges the location's sign-in code, if any, for a token kept like a typed one. Resolves to
 * an error message for the sign-in page when the code is refused, else to "".
 */
export async function consumeSignInLink() {
  if (!location.hash.startsWith(PREFIX)) return "";
  const code = decodeURIComponent(location.hash.slice(PREFIX.length));
  history.replaceState(null, "", location.pathname + location.search);
  let response;
  try {
    response = await fetch("/v1/sign-in", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ code }),
    });
  } catch {
    return "The server could not be reached to use the sign-in link. Open the link again once it is up.";
  }
  const body = await response.json().catch(() => null);
  if (!response.ok || !body || typeof body.token !== "string") {
    return (body && body.error && body.error.message) || `The sign-in link was refused (${response.status}).`;
  }
  localStorage.setItem(TOKEN_KEY, body.token);
  return "";
}
