// convrag as a model for the official `openai` JavaScript client (openai-node).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';

import { COLLECTION, ORIGIN, TIMEOUT_MS, URL_, api, newUser } from './common.js';

const MARKER = /\[(\d+)\]/g;
const QUESTION = 'What is a quick vegetarian dinner?';

function client(key) {
  return new OpenAI({ baseURL: `${URL_}/v1`, apiKey: key, timeout: TIMEOUT_MS, maxRetries: 0 });
}

/** Every [n] marker names a returned passage, and every returned passage is cited. */
function checkCited(content, convrag) {
  const numbers = new Set([...content.matchAll(MARKER)].map((m) => Number(m[1])));
  assert.ok(numbers.size > 0, `no [n] markers in ${JSON.stringify(content)}`);
  const passages = new Set(convrag.passages.map((p) => p.n));
  assert.deepEqual([...numbers].sort(), [...passages].sort());
  for (const p of convrag.passages) assert.ok(p.passage_id && p.text);
}

test('models are listed and retrieved by id', async () => {
  const oai = client(await newUser());
  const ids = [];
  for await (const model of oai.models.list()) ids.push(model.id);
  assert.ok(ids.includes(COLLECTION), ids.join(', '));
  const model = await oai.models.retrieve(COLLECTION);
  assert.equal(model.id, COLLECTION);
  assert.equal(model.object, 'model');
  await assert.rejects(oai.models.retrieve('no-such-collection'), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.code, 'model_not_found');
    return true;
  });
});

test('a completion answers with citations', async () => {
  const completion = await client(await newUser()).chat.completions.create({
    model: COLLECTION,
    messages: [{ role: 'user', content: QUESTION }],
  });
  const choice = completion.choices[0];
  assert.equal(choice.message.role, 'assistant');
  assert.equal(choice.finish_reason, 'stop');
  checkCited(choice.message.content, completion.convrag);
  assert.equal(completion.convrag.turn, 1);
  assert.ok(choice.message.annotations.length > 0, 'url_citation annotations');
  for (const a of choice.message.annotations) {
    assert.equal(a.type, 'url_citation');
    const marked = choice.message.content.slice(a.url_citation.start_index, a.url_citation.end_index);
    assert.match(marked, /^\[\d+\]$/);
  }
  assert.ok(completion.usage.prompt_tokens > 0 && completion.usage.completion_tokens > 0);
  assert.equal(
    completion.usage.total_tokens,
    completion.usage.prompt_tokens + completion.usage.completion_tokens,
  );
});

test('streaming with include_usage ends with a usage chunk', async () => {
  const stream = await client(await newUser()).chat.completions.create({
    model: COLLECTION,
    messages: [{ role: 'user', content: QUESTION }],
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.ok(last.usage.prompt_tokens > 0 && last.usage.completion_tokens > 0, JSON.stringify(last.usage));
  assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + last.usage.completion_tokens);
  for (const c of chunks.slice(0, -1)) assert.ok(!c.usage, 'usage only in the last chunk');
  const content = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  const finished = chunks.findLast((c) => c.choices.length > 0);
  assert.equal(finished.choices[0].finish_reason, 'stop');
  assert.equal(finished.convrag.content, content);
  checkCited(content, finished.convrag);
});

test('a history the server never stored keeps its context', async () => {
  const token = await newUser();
  const history = [
    { role: 'user', content: QUESTION },
    { role: 'assistant', content: 'Red lentil dal cooks in twenty minutes.' },
    { role: 'user', content: 'How much protein does it have?' },
  ];
  const completion = await client(token).chat.completions.create({ model: COLLECTION, messages: history });
  const { conversation_id: conversation, turn } = completion.convrag;
  assert.equal(turn, 2, 'the imported exchange is turn 1');
  const { status, body } = await api('GET', `/v1/conversations/${conversation}/turns`, token);
  assert.equal(status, 200);
  const [first, second] = body.turns;
  assert.equal(first.utterance, history[0].content);
  assert.equal(first.response_text, history[1].content);
  assert.equal(first.generator, 'imported');
  assert.equal(second.utterance, history[2].content);
  assert.notEqual(second.generator, 'imported');
  assert.equal(second.diagnostics.history_turns, 1, 'the question was asked in the imported context');
});

test('one message is a new session; a key replays; an answered history regenerates', async () => {
  const token = await newUser();
  const oai = client(token);
  const messages = [{ role: 'user', content: QUESTION }];
  const first = (await oai.chat.completions.create({ model: COLLECTION, messages })).convrag;
  const again = (await oai.chat.completions.create({ model: COLLECTION, messages })).convrag;
  // A single user message starts a session of its own, even a question asked before.
  assert.notEqual(again.conversation_id, first.conversation_id);
  assert.equal(again.turn, 1);
  const keyed = await oai.chat.completions.create(
    { model: COLLECTION, messages }, { headers: { 'Idempotency-Key': 'js-retry-1' } });
  const retried = await oai.chat.completions.create(
    { model: COLLECTION, messages }, { headers: { 'Idempotency-Key': 'js-retry-1' } });
  assert.equal(retried.convrag.turn_id, keyed.convrag.turn_id, 'a keyed retry replays');
  // The history ending with the answer to its question asks for it anew: a new version of
  // turn 1 of the newest conversation holding it.
  const answered = [...messages, { role: 'assistant', content: keyed.choices[0].message.content }];
  const anew = (await oai.chat.completions.create({ model: COLLECTION, messages: answered })).convrag;
  assert.equal(anew.conversation_id, keyed.convrag.conversation_id);
  assert.equal(anew.turn, 1);
  assert.notEqual(anew.turn_id, keyed.convrag.turn_id);
  const { status, body } = await api(
    'GET', `/v1/conversations/${anew.conversation_id}/turns?all_versions=true`, token);
  assert.equal(status, 200);
  assert.equal(body.turns.length, 2);
});

test('n=2 is refused in OpenAI shape naming the parameter, and nothing is stored', async () => {
  const token = await newUser();
  await assert.rejects(
    client(token).chat.completions.create({
      model: COLLECTION, messages: [{ role: 'user', content: QUESTION }], n: 2,
    }),
    (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.status, 400);
      assert.equal(e.param, 'n');
      assert.equal(e.type, 'invalid_request_error');
      return true;
    },
  );
  const { body } = await api('GET', '/v1/conversations', token);
  assert.deepEqual(body.conversations, []);
});

test('a bad key is 401 in OpenAI shape', async () => {
  await assert.rejects(
    client('not-a-convrag-token').chat.completions.create({
      model: COLLECTION, messages: [{ role: 'user', content: 'hello' }],
    }),
    (e) => {
      assert.ok(e instanceof OpenAI.AuthenticationError, String(e));
      assert.equal(e.code, 'invalid_api_key');
      return true;
    },
  );
});

test('a CORS preflight from an allowed origin is answered', async () => {
  for (const path of ['/v1/chat/completions', '/mcp']) {
    const response = await fetch(URL_ + path, {
      method: 'OPTIONS',
      headers: {
        Origin: ORIGIN,
        'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': 'authorization, content-type',
      },
    });
    assert.equal(response.status, 200, path);
    assert.equal(response.headers.get('access-control-allow-origin'), ORIGIN, path);
    assert.match(response.headers.get('access-control-allow-methods'), /POST/);
  }
  const other = await fetch(`${URL_}/v1/models`, {
    method: 'OPTIONS',
    headers: { Origin: 'http://elsewhere.example', 'Access-Control-Request-Method': 'GET' },
  });
  assert.equal(other.headers.get('access-control-allow-origin'), null);
});
