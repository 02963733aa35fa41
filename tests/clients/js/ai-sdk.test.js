// convrag as a model for the Vercel AI SDK (`ai` 5 with `@ai-sdk/openai` 2): `openai(model)` is
// the Responses API (POST /v1/responses), `openai.chat(model)` chat completions. Both through
// generateText and streamText, with a follow-up that keeps the conversation as the SDK's users
// write it (the previous result's `response.messages` appended to the history: with the
// Responses API the SDK sends the stored answer back as an `item_reference` to its output item),
// a streamed 429 surfacing as the SDK's APICallError, and a bad key.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { APICallError, generateText, streamText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';

import { COLLECTION, TIMEOUT_MS, URL_, conversationTurns, newUser, useUpTurnRate } from './common.js';

const QUESTION = 'What is a quick vegetarian dinner?';
const FOLLOW_UP = 'How much protein does it have?';

function provider(key, fetchFn) {
  return createOpenAI({ baseURL: `${URL_}/v1`, apiKey: key, ...(fetchFn ? { fetch: fetchFn } : {}) });
}

// No retries (a 429 test stays quick); a turn with the small local LLM may take a while.
const options = () => ({ maxRetries: 0, abortSignal: AbortSignal.timeout(TIMEOUT_MS) });

function models(key, fetchFn) {
  const openai = provider(key, fetchFn);
  return { responses: openai(COLLECTION), chat: openai.chat(COLLECTION) };
}

/** streamText's text and the errors it reported (the SDK passes a stream's errors to onError). */
async function streamed(call) {
  const errors = [];
  const result = streamText({ ...options(), ...call, onError: ({ error }) => errors.push(error) });
  let text = '';
  for await (const delta of result.textStream) text += delta;
  return { result, text, errors };
}

function checkSources(sources) {
  assert.ok(sources.length > 0, 'the cited passages are sources');
  for (const s of sources) {
    assert.equal(s.type, 'source');
    if (s.sourceType === 'url') assert.match(s.url, /^https?:\/\//);
    else assert.equal(s.sourceType, 'document');
  }
}

for (const api of ['chat', 'responses']) {
  test(`${api}: generateText answers with sources and a follow-up keeps the conversation`, async () => {
    const token = await newUser();
    const sent = [];
    const recording = async (url, init) => {
      sent.push(JSON.parse(init.body));
      return fetch(url, init);
    };
    const model = models(token, recording)[api];
    const first = await generateText({ ...options(), model, prompt: QUESTION });
    assert.match(first.text, /\[1\]/);
    assert.equal(first.finishReason, 'stop');
    checkSources(first.sources);
    assert.ok(first.usage.inputTokens > 0 && first.usage.outputTokens > 0, JSON.stringify(first.usage));
    const second = await generateText({
      ...options(),
      model,
      messages: [{ role: 'user', content: QUESTION }, ...first.response.messages, { role: 'user', content: FOLLOW_UP }],
    });
    assert.ok(second.text.trim());
    if (api === 'responses') {
      // The stored answer goes back as a reference to the first response's output message.
      const [, item] = sent[1].input;
      assert.deepEqual(item, { type: 'item_reference', id: first.response.messages[0].content[0].providerOptions.openai.itemId });
    }
    assert.deepEqual(await conversationTurns(token), [[QUESTION, FOLLOW_UP]]);
  });

  test(`${api}: streamText streams the answer`, async () => {
    const token = await newUser();
    const { result, text, errors } = await streamed({ model: models(token)[api], prompt: QUESTION });
    assert.deepEqual(errors, []);
    assert.match(text, /\[1\]/);
    assert.equal(await result.finishReason, 'stop');
    checkSources(await result.sources);
    assert.deepEqual(await conversationTurns(token), [[QUESTION]]);
  });

  test(`${api}: a refused streamed turn is the SDK's APICallError with status 429`, async () => {
    const token = await newUser();
    const model = models(token)[api];
    await useUpTurnRate(token);
    const { text, errors } = await streamed({ model, prompt: QUESTION });
    assert.equal(text, '');
    assert.equal(errors.length, 1, errors.map(String).join('\n'));
    const [error] = errors;
    assert.ok(APICallError.isInstance(error), String(error));
    assert.equal(error.statusCode, 429);
    assert.equal(error.isRetryable, true);
    assert.ok(Number(error.responseHeaders['retry-after']) > 0);
    assert.match(error.message, /per minute/);
    assert.equal((await conversationTurns(token)).length, 1, 'the refused turn stored nothing');
  });

  test(`${api}: a bad key is an APICallError with the server's message`, async () => {
    await assert.rejects(
      generateText({ ...options(), model: models('not-a-convrag-token')[api], prompt: 'hello' }),
      (e) => {
        assert.ok(APICallError.isInstance(e), String(e));
        assert.equal(e.statusCode, 401);
        assert.match(e.message, /unknown token/);
        return true;
      },
    );
  });
}

test('responses: previousResponseId continues the conversation; a system message is instructions', async () => {
  const token = await newUser();
  const model = models(token).responses;
  const first = await generateText({ ...options(), model, system: 'Answer briefly.', prompt: QUESTION });
  const responseId = first.providerMetadata.openai.responseId;
  assert.ok(responseId, JSON.stringify(first.providerMetadata));
  const second = await generateText({
    ...options(), model, prompt: FOLLOW_UP, providerOptions: { openai: { previousResponseId: responseId } },
  });
  assert.ok(second.text.trim());
  assert.deepEqual(await conversationTurns(token), [[QUESTION, FOLLOW_UP]]);
});
