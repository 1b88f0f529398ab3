// The official `openai` npm client against a running `trine serve` (started by
// tests/server/openai_client_test.sh). Usage: node openai_client_test.mjs http://127.0.0.1:PORT
// Exits non-zero on the first mismatch.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const base = process.argv[2];
assert.ok(base, 'usage: node openai_client_test.mjs http://127.0.0.1:PORT');
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'test-key', timeout: 60_000, maxRetries: 0 });

async function metric(name) {
  const body = await (await fetch(`${base}/metrics`, { headers: { Authorization: 'Bearer test-key' } })).text();
  const m = body.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  assert.ok(m, `metric ${name}`);
  return Number(m[1]);
}

const chat = (content, max_tokens) => ({
  model: 'trine', messages: [{ role: 'user', content }], max_tokens, temperature: 0,
});

async function streamText(params, signal) {
  const stream = await client.chat.completions.create({ ...params, stream: true }, { signal });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (c?.delta?.content) text += c.delta.content;
    if (c?.finish_reason) finish = c.finish_reason;
  }
  return { text, finish };
}

const checks = [];
const check = (name, fn) => checks.push([name, fn]);

check('models.list', async () => {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].object, 'model');
  assert.ok(models.data[0].id.endsWith('.gguf'));
});

check('chat, non-streaming and streaming give the same text', async () => {
  const r = await client.chat.completions.create(chat('Tell me a story about a dog.', 24));
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 24);
  assert.ok(r.choices[0].message.content.length > 0);
  const s = await streamText(chat('Tell me a story about a dog.', 24));
  assert.equal(s.text, r.choices[0].message.content);
  assert.equal(s.finish, 'length');
});

check('completions', async () => {
  const r = await client.completions.create({ model: 'trine', prompt: 'Once upon a time', max_tokens: 10, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.usage.completion_tokens, 10);
  assert.ok(r.choices[0].text.length > 0);
});

check('8 concurrent streams each get their alone text', async () => {
  const prompts = [...Array(8).keys()].map((i) => `Story number ${i}: there was a`);
  const alone = [];
  for (const p of prompts) alone.push((await client.chat.completions.create(chat(p, 16))).choices[0].message.content);
  const together = await Promise.all(prompts.map((p) => streamText(chat(p, 16))));
  together.forEach((t, i) => assert.equal(t.text, alone[i], `stream ${i}`));
});

check('an aborted stream frees its slot', async () => {
  const before = await metric('trine_requests_cancelled_total');
  const ac = new AbortController();
  const stream = await client.chat.completions.create(
    // 4000 tokens (the server runs with -c 4096): still running, on any machine, when the client aborts.
    { ...chat('Tell me a long story.', 4000), stream: true, ignore_eos: true }, { signal: ac.signal });
  let chunks = 0;
  try {
    for await (const _ of stream) {
      if (++chunks === 3) ac.abort();
    }
  } catch (e) {
    assert.ok(e.name === 'APIUserAbortError' || e.name === 'AbortError', `abort error, got ${e.name}`);
  }
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline && ((await metric('trine_busy_slots')) !== 0 ||
                                   (await metric('trine_requests_cancelled_total')) < before + 1)) {
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(await metric('trine_busy_slots'), 0);
  assert.equal(await metric('trine_requests_cancelled_total'), before + 1);
});

check('errors arrive as the client\'s typed errors', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'trine', messages: [] }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /at least one message/.test(e.message));
  await assert.rejects(client.chat.completions.create({ ...chat('hi', 1), temperature: 5 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
  const anon = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(anon.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

let failed = 0;
for (const [name, fn] of checks) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
  }
}
process.exit(failed === 0 ? 0 : 1);
