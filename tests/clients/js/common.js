// Shared set-up of the JavaScript client tests: the server scripts/client-tests.sh started, and
// fresh users. The script exports CONVRAG_CLIENTS_URL, CONVRAG_CLIENTS_ADMIN and
// CONVRAG_CLIENTS_COLLECTION (and CONVRAG_CLIENTS_ORIGIN, the CORS origin the server allows).

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through scripts/client-tests.sh`);
  return value;
}

export const URL_ = required('CONVRAG_CLIENTS_URL').replace(/\/$/, '');
export const ADMIN = required('CONVRAG_CLIENTS_ADMIN');
export const COLLECTION = process.env.CONVRAG_CLIENTS_COLLECTION || 'diet';
export const ORIGIN = required('CONVRAG_CLIENTS_ORIGIN');
// A turn with the small local LLM can take a while on a busy machine.
export const TIMEOUT_MS = 600_000;

/** A plain call to convrag's own API: { status, body }. */
export async function api(method, path, token, body) {
  const response = await fetch(URL_ + path, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

/** A fresh user's token (no conversations, no profile). */
export async function newUser() {
  const name = `js-client-${Math.random().toString(16).slice(2, 14)}`;
  const { status, body } = await api('POST', '/v1/users', ADMIN, { name });
  if (status !== 201) throw new Error(`creating a user: ${status} ${JSON.stringify(body)}`);
  return body.token;
}

/** The server's per-user turn rate (CONVRAG_LIMIT_TURNS_PER_MINUTE, its default). */
export const TURNS_PER_MINUTE = 60;

/**
 * Spends all of this minute's turns of the user of `token` in one request: imported history
 * counts, so a new conversation carrying 59 earlier exchanges and a question costs 60 turns (one
 * of them run). The user's next turn is refused with 429 (the bucket refills one turn a second,
 * so the next request must follow at once).
 */
export async function useUpTurnRate(token) {
  const messages = [];
  for (let i = 1; i < TURNS_PER_MINUTE; i++) {
    messages.push({ role: 'user', content: `Earlier question ${i} about dinner?` });
    messages.push({ role: 'assistant', content: `Earlier answer ${i}.` });
  }
  messages.push({ role: 'user', content: 'What is a quick vegetarian dinner?' });
  const { status, body } = await api('POST', '/v1/chat/completions', token, { model: COLLECTION, messages });
  if (status !== 200 || body.convrag.turn !== TURNS_PER_MINUTE) {
    throw new Error(`using up the turn rate: ${status} ${JSON.stringify(body).slice(0, 500)}`);
  }
}

/** The utterances of each of the user's conversations (newest first), through convrag's API. */
export async function conversationTurns(token) {
  const { status, body } = await api('GET', '/v1/conversations', token);
  if (status !== 200) throw new Error(`listing conversations: ${status} ${JSON.stringify(body)}`);
  const result = [];
  for (const c of body.conversations) {
    const turns = await api('GET', `/v1/conversations/${c.id}/turns`, token);
    if (turns.status !== 200) throw new Error(`listing turns: ${turns.status} ${JSON.stringify(turns.body)}`);
    result.push(turns.body.turns.map((t) => t.utterance));
  }
  return result;
}
