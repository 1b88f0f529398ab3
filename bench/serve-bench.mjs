#!/usr/bin/env node
// Load generator for any OpenAI-compatible server (trine serve, llama-server, ...): at each
// concurrency, C clients each send R streamed completion requests back to back, and the run
// reports time to first token (TTFT), inter-token latency (ITL) p50/p99 and the aggregate
// generated tok/s (completion tokens of all requests / wall time of the level).
//
//   node bench/serve-bench.mjs --url http://127.0.0.1:8080 [--concurrency 1,4,8,16] \
//     [--prompt-tokens 128] [--max-tokens 128] [--requests 2] [--api-key KEY] [--json]
//
// Prompts are made of words until the server's /tokenize (trine and llama-server both have it)
// counts --prompt-tokens tokens; each client's prompt starts with its own number, so prompts differ
// from their first token and no prefix cache turns prompt work into a lookup. Requests ask for
// ignore_eos (both servers honour it), so each generates exactly --max-tokens tokens.
// Node 20 or later; no packages.

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => {
    if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1] && !all[i + 1].startsWith('--') ? all[i + 1] : 'true']);
    return acc;
  }, []));
const url = (args.url ?? 'http://127.0.0.1:8080').replace(/\/$/, '');
const levels = (args.concurrency ?? '1,4,8,16').split(',').map(Number);
const promptTokens = Number(args['prompt-tokens'] ?? 128);
const maxTokens = Number(args['max-tokens'] ?? 128);
const perClient = Number(args.requests ?? 2);
const headers = { 'Content-Type': 'application/json' };
if (args['api-key']) headers.Authorization = `Bearer ${args['api-key']}`;

const words = 'the cat sat on a warm mat while rain fell softly over quiet hills and old roads'.split(' ');

async function countTokens(text) {
  const r = await fetch(`${url}/tokenize`, { method: 'POST', headers, body: JSON.stringify({ content: text }) });
  if (!r.ok) throw new Error(`/tokenize: HTTP ${r.status}`);
  return (await r.json()).tokens.length;
}

async function makePrompt(client) {
  let n = promptTokens;
  for (let attempt = 0; attempt < 8; ++attempt) {
    const text = `${client} ` + Array.from({ length: n }, (_, i) => words[(i * 7 + client) % words.length]).join(' ');
    const got = await countTokens(text);
    if (got === promptTokens) return text;
    n = Math.max(1, n + (promptTokens - got));
  }
  throw new Error(`could not make a prompt of ${promptTokens} tokens`);
}

// One streamed request: [ttft ms, gaps between later tokens in ms, completion tokens].
async function one(prompt) {
  const t0 = performance.now();
  const r = await fetch(`${url}/v1/completions`, {
    method: 'POST', headers,
    body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0, stream: true, ignore_eos: true,
                           stream_options: { include_usage: true } }),
  });
  if (!r.ok) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
  const decoder = new TextDecoder();
  let buf = '', ttft = -1, last = 0, tokens = 0, chunks = 0;
  const gaps = [];
  for await (const part of r.body) {
    buf += decoder.decode(part, { stream: true });
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, end);
      buf = buf.slice(end + 2);
      if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
      const j = JSON.parse(event.slice(6));
      if (j.usage) tokens = j.usage.completion_tokens;
      if (!j.choices?.[0]?.text) continue;
      const now = performance.now();
      if (ttft < 0) ttft = now - t0; else gaps.push(now - last);
      last = now;
      ++chunks;
    }
  }
  return [ttft, gaps, tokens || chunks];
}

const pct = (v, p) => {
  if (v.length === 0) return NaN;
  const s = [...v].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

const rows = [];
for (const c of levels) {
  const prompts = await Promise.all(Array.from({ length: c }, (_, i) => makePrompt(i)));
  const ttfts = [], gaps = [];
  let tokens = 0;
  const t0 = performance.now();
  await Promise.all(prompts.map(async (p) => {
    for (let k = 0; k < perClient; ++k) {
      const [ttft, g, n] = await one(p);
      ttfts.push(ttft);
      gaps.push(...g);
      tokens += n;
    }
  }));
  const wall = (performance.now() - t0) / 1000;
  rows.push({ concurrency: c, requests: c * perClient, prompt_tokens: promptTokens, max_tokens: maxTokens,
              ttft_p50_ms: pct(ttfts, 50), ttft_p99_ms: pct(ttfts, 99), itl_p50_ms: pct(gaps, 50),
              itl_p99_ms: pct(gaps, 99), gen_tok_s: tokens / wall, wall_s: wall });
}

if (args.json) {
  for (const r of rows) console.log(JSON.stringify(r));
} else {
  console.log('| C | requests | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | gen tok/s |');
  console.log('|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    console.log(`| ${r.concurrency} | ${r.requests} | ${r.ttft_p50_ms.toFixed(0)} | ${r.ttft_p99_ms.toFixed(0)} | ` +
                `${r.itl_p50_ms.toFixed(1)} | ${r.itl_p99_ms.toFixed(1)} | ${r.gen_tok_s.toFixed(1)} |`);
  }
}
