// convrag as a model for the Vercel AI SDK (`ai` with `@ai-sdk/openai`): the provider's default
// `openai(model)`, which calls POST /v1/responses, and `openai.chat(model)`, which calls
// POST /v1/chat/completions.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createOpenAI } from '@ai-sdk/openai';
import { APICallError, generateText, streamText } from 'ai';

import {
  BAD_TOKEN, BAD_TOKEN_REASON, COLLECTION, FIRST, FOLLOW_UP, TIMEOUT_MS, URL_, checkRateLimited,
  exhaustTurns, newUser, singleConversationWith,
} from './support.js';

/** What a stream delivered: its text and its errors (the AI SDK streams errors as parts). */
async function drain(result) {
  const errors = [];
  let text = '';
  try {
    for await (const part of result.fullStream) {
      if (part.type === 'error') errors.push(part.error);
      if (part.type === 'text-delta') text += part.text ?? part.delta ?? '';
    }
  } catch (error) {
    errors.push(error);
  }
  return { text, errors };
}

for (const [api, model] of [
  ['responses', (provider) => provider(COLLECTION)],
  ['chat', (provider) => provider.chat(COLLECTION)],
]) {
  describe(`the AI SDK's ${api === 'responses' ? 'openai(model)' : 'openai.chat(model)'}`, { timeout: 4 * TIMEOUT_MS }, () => {
    // No retries: a retried 429 would wait out Retry-After instead of failing.
    const options = (token) => ({
      model: model(createOpenAI({ baseURL: `${URL_}/v1`, apiKey: token })),
      maxRetries: 0,
      abortSignal: AbortSignal.timeout(TIMEOUT_MS),
    });

    test('a rate-limited stream fails with APICallError 429', async () => {
      const token = await newUser();
      await exhaustTurns(token);
      const { errors } = await drain(streamText({ ...options(token), prompt: FIRST, onError: () => {} }));
      assert.ok(errors.length > 0, 'the stream reported no error');
      const error = errors[0];
      assert.ok(APICallError.isInstance(error), `not an APICallError: ${error}`);
      assert.equal(error.statusCode, 429);
      assert.ok(error.url.endsWith(api === 'responses' ? '/v1/responses' : '/v1/chat/completions'), error.url);
      checkRateLimited(error.message);
    });

    test('the history continues one conversation', async () => {
      const token = await newUser();
      const first = await generateText({ ...options(token), prompt: FIRST });
      assert.match(first.text, /\[1\]/);
      // The SDK's own messages of the first answer, as an app keeps them, then the follow-up.
      const messages = [{ role: 'user', content: FIRST }, ...first.response.messages, { role: 'user', content: FOLLOW_UP }];
      const { text, errors } = await drain(streamText({ ...options(token), messages, onError: () => {} }));
      assert.deepEqual(errors.map(String), []);
      assert.ok(text.trim());
      await singleConversationWith(token, [FIRST, FOLLOW_UP]);
    });

    test('a bad token fails with APICallError 401 and the reason', async () => {
      await assert.rejects(generateText({ ...options(BAD_TOKEN), prompt: FIRST }), (error) => {
        assert.ok(APICallError.isInstance(error), `not an APICallError: ${error}`);
        assert.equal(error.statusCode, 401);
        assert.ok(error.message.includes(BAD_TOKEN_REASON), error.message);
        return true;
      });
    });
  });
}
