// convrag as a tool server for the official MCP TypeScript SDK over Streamable HTTP (/mcp).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { extractWWWAuthenticateParams } from '@modelcontextprotocol/sdk/client/auth.js';
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { COLLECTION, TIMEOUT_MS, URL_, newUser } from './common.js';

function transport(token, fetchFn) {
  return new StreamableHTTPClientTransport(new URL(`${URL_}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    ...(fetchFn ? { fetch: fetchFn } : {}),
  });
}

test('initialize, list tools and call them over Streamable HTTP', async () => {
  const client = new Client({ name: 'convrag-js-tests', version: '1.0.0' });
  await client.connect(transport(await newUser()));
  try {
    assert.equal(client.getServerVersion().name, 'convrag');
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const name of ['search', 'ask', 'list_ptkb', 'add_ptkb', 'remove_ptkb']) {
      assert.ok(names.includes(name), names.join(', '));
    }
    // The SDK validates structured content against a tool's outputSchema when it declares one.
    for (const name of ['search', 'ask', 'list_ptkb', 'add_ptkb', 'remove_ptkb', 'list_profile',
      'add_profile', 'remove_profile']) {
      assert.ok(tools.find((t) => t.name === name).outputSchema, `${name} declares outputSchema`);
    }
    const found = await client.callTool(
      { name: 'search', arguments: { collection: COLLECTION, query: 'peanut allergy', k: 3 } },
      undefined,
      { timeout: TIMEOUT_MS },
    );
    assert.ok(!found.isError, JSON.stringify(found.content));
    assert.equal(found.structuredContent.results.length, 3);
    assert.match(found.structuredContent.results[0].text.toLowerCase(), /peanut/);

    const asked = await client.callTool(
      { name: 'ask', arguments: { collection: COLLECTION, question: 'What is a quick vegetarian dinner?' } },
      undefined,
      { timeout: TIMEOUT_MS },
    );
    assert.ok(!asked.isError, JSON.stringify(asked.content));
    const answer = asked.structuredContent;
    assert.equal(answer.turn, 1);
    assert.ok(answer.passages.length > 0);
    for (const p of answer.passages) assert.ok(answer.answer.includes(`[${p.n}]`));

    // The PTKB and profile tools: each result validates against the tool's outputSchema.
    const call = async (name, args) => {
      const result = await client.callTool({ name, arguments: args });
      assert.ok(!result.isError, `${name}: ${JSON.stringify(result.content)}`);
      return result.structuredContent;
    };
    const conversation_id = answer.conversation_id;
    const added = await call('add_ptkb', { conversation_id, text: 'I cycle to work every day.' });
    assert.equal(added.statement.text, 'I cycle to work every day.');
    const listed = await call('list_ptkb', { conversation_id });
    assert.deepEqual(listed.statements.map((s) => s.id), [added.statement.id]);
    assert.equal((await call('remove_ptkb', { conversation_id, statement_id: added.statement.id })).removed,
      added.statement.id);
    const profile = await call('add_profile', { text: 'I am vegetarian.' });
    assert.ok(Number.isInteger(profile.statement.id));
    assert.equal((await call('list_profile', {})).statements.length, 1);
    assert.equal((await call('remove_profile', { id: profile.statement.id })).removed, profile.statement.id);

    const bad = await client.callTool({ name: 'ask', arguments: { question: 'no collection given' } });
    assert.equal(bad.isError, true);
    assert.match(bad.content[0].text, /collection/);
  } finally {
    await client.close();
  }
});

test('a refused token is 401 with WWW-Authenticate: Bearer', async () => {
  let refused;
  const recording = async (url, init) => {
    const response = await fetch(url, init);
    if (response.status === 401) refused = response.clone();
    return response;
  };
  const client = new Client({ name: 'convrag-js-tests', version: '1.0.0' });
  await assert.rejects(client.connect(transport('not-a-token', recording)), (e) => {
    assert.ok(e instanceof StreamableHTTPError, String(e));
    assert.equal(e.code, 401);
    return true;
  });
  assert.ok(refused, 'the server answered 401');
  assert.match(refused.headers.get('www-authenticate'), /^Bearer/);
  assert.equal(extractWWWAuthenticateParams(refused).error, 'invalid_token');
});
