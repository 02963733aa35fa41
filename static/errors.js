// Errors of the API (and of reaching it), and what they mean in plain words. No DOM access: the
// stream parser (stream.js) uses ApiError and is imported by node in the tests.

/** An error answer of the API (or a failure to reach it: status 0). */
export class ApiError extends Error {
  constructor(status, code, message, field = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

/** Codes that mean the token no longer signs anyone in. */
const AUTH_CODES = ["invalid_token", "missing_token", "token_expired", "token_revoked", "user_disabled"];

/** The server refused the token: the page signs out instead of showing the error. */
export function isAuthError(error) {
  return error instanceof ApiError && AUTH_CODES.includes(error.code);
}

/** A failure to reach the server (or to read its answer), as an ApiError with status 0. */
export function unreachable(cause) {
  const error = new ApiError(0, "unreachable", String(cause && cause.message ? cause.message : cause));
  error.cause = cause;
  return error;
}

/** Readable names of request fields, for error messages. */
const FIELD_NAMES = {
  utterance: "your message",
  generator: "the generator",
  rerank: "reranking",
  rerank_depth: "the rerank depth",
  passages: "the number of passages",
  max_words: "the word limit",
  rewrite: "the rewrite",
  regenerate: "the turn to regenerate",
  title: "the title",
  collection: "the collection",
  text: "the statement",
};

function fieldName(field) {
  if (!field) return "your input";
  const statement = /^ptkb\[(\d+)\]/.exec(field);
  if (statement) return `statement ${Number(statement[1]) + 1}`;
  return FIELD_NAMES[field] || field;
}

/** What went wrong, in plain words for the person using the page. */
export function describeError(error) {
  if (!(error instanceof ApiError)) {
    return "Something went wrong in the page: " + (error && error.message ? error.message : String(error));
  }
  const detail = error.message ? ` (${error.message})` : "";
  switch (error.code) {
    case "unreachable":
      return "The convrag server cannot be reached. Check that it is running and that you are online, then try again.";
    case "stream_cut":
    case "bad_stream":
      return "The connection to the server broke off before the answer was complete. Nothing was saved; try again.";
    case "missing_token":
    case "invalid_token":
      return "The server did not accept your token. Sign in again with a valid token.";
    case "token_expired":
      return "Your token has expired. Sign in again with a new token.";
    case "token_revoked":
      return "Your token has been revoked. Sign in again with another token.";
    case "user_disabled":
      return "Your account is disabled. Ask the administrator to enable it.";
    case "quota_exceeded":
      return `You have reached a limit of the server${detail}. Remove something first.`;
    case "rate_limited":
      return `You are sending too many requests; wait a moment and try again${detail}.`;
    case "invalid_field":
      return `Please check ${fieldName(error.field)}: ${error.message}.`;
    case "malformed_json":
    case "unsupported_media_type":
      return `The server could not read the request${detail}.`;
    case "payload_too_large":
      return "That is too long for the server to accept. Shorten it and try again.";
    case "not_found":
      return `It is not there any more: it may have been deleted${detail}.`;
    case "conflict":
      return `That clashes with what is already there${detail}.`;
    case "conversation_busy":
      return "Another answer in this conversation is still being written. Try again when it is done.";
    case "idempotency_key_reused":
      return "The server already used that request's key for a different request, so nothing was changed.";
    case "database_unavailable":
      return "The server's database is not answering. Try again in a moment.";
    case "collection_unavailable":
      return `The collection cannot be searched right now${detail}. Nothing was saved; send it again in a moment.`;
    case "model_unavailable":
      return `A model the server needs is not available${detail}. Try other settings (for example without reranking).`;
    case "route_not_found":
    case "method_not_allowed":
      return `This server does not offer that yet${detail}. It may be an older version of convrag.`;
    default:
      if (error.status >= 500) {
        const short = error.message && error.message.length > 160 ? `${error.message.slice(0, 157)}…` : error.message;
        return `The server failed to do that, so nothing was changed. Try again, or tell the administrator${short ? ` (${short})` : ""}.`;
      }
      return `The server refused that${detail}.`;
  }
}
