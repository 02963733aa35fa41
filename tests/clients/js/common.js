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
