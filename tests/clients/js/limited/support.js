// Shared set-up of the JavaScript client tests against the second server of
// scripts/client-tests.sh: no LLM (extractive answers, about a second a turn) and a tiny turn rate
// (CONVRAG_CLIENTS_TURNS_PER_MINUTE), so a rate-limited request is reached in a few quick turns
// and stays refused for many seconds. CONVRAG_CLIENTS_ORIGIN is the origin that server allows
// (browser.test.js serves its page there).
import assert from 'node:assert/strict';

import { COLLECTION, api } from '../common.js';

export { ADMIN, COLLECTION, ORIGIN, URL_, api, newUser } from '../common.js';

export const TURNS_PER_MINUTE = Number(process.env.CONVRAG_CLIENTS_TURNS_PER_MINUTE);
if (!(TURNS_PER_MINUTE > 0)) {
  throw new Error('CONVRAG_CLIENTS_TURNS_PER_MINUTE is not set: run these tests through scripts/client-tests.sh');
}
// Extractive turns take about a second; generous for a busy 2-core machine.
export const TIMEOUT_MS = 120_000;
export const FIRST = 'What is a quick vegetarian dinner?';
export const FOLLOW_UP = 'How much protein does it have?';
export const BAD_TOKEN = 'not-a-convrag-token';
// The server's reason for refusing BAD_TOKEN, which every client must let the user read.
export const BAD_TOKEN_REASON = 'unknown token';

/**
 * Spends the user's turns with plain chat completions until the server refuses one with a 429
 * whose Retry-After leaves the caller many seconds of refusal (a refusal just before a refill is
 * spent through too).
 */
export async function exhaustTurns(token) {
  for (let i = 0; i < 3 * TURNS_PER_MINUTE + 3; i++) {
    const response = await fetch(`${process.env.CONVRAG_CLIENTS_URL.replace(/\/$/, '')}/v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: COLLECTION, messages: [{ role: 'user', content: FIRST }] }),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const text = await response.text();
    if (response.status === 429) {
      const retryAfter = Number(response.headers.get('retry-after'));
      if (retryAfter >= 10) return retryAfter;
      await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000));
    } else {
      assert.equal(response.status, 200, text);
    }
  }
  throw new Error('the turn rate never refused a turn');
}

/** The user has exactly one conversation, whose turns are these utterances in order. */
export async function singleConversationWith(token, utterances) {
  const list = await api('GET', '/v1/conversations', token);
  assert.equal(list.status, 200);
  assert.equal(list.body.conversations.length, 1, JSON.stringify(list.body.conversations));
  const id = list.body.conversations[0].id;
  const turns = await api('GET', `/v1/conversations/${id}/turns`, token);
  assert.equal(turns.status, 200);
  assert.deepEqual(turns.body.turns.map((t) => t.utterance), utterances);
  return id;
}

/** The server's own reason for the refusal is in the client's error. */
export function checkRateLimited(message) {
  assert.ok(message.includes(`at most ${TURNS_PER_MINUTE} turns per minute`), message);
}
