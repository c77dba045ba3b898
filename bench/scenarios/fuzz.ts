// `npm run bench:fuzz`: 20,000 messages with mutated params (test/support/fuzz-gen.ts) against the
// gateway on its devnet: HTTP single calls and batches, keyless (`/public/main`) and with a key
// (`/v1/<network>/<key>`, `/rpc/main/evm/<chainId>` with X-API-Key) on every network, and
// WebSocket frames. Prints what was sent, the answers by HTTP status and JSON-RPC error code, the
// answers that break C22/C23, the gateway's error log lines and which chains answer
// eth_blockNumber before and after. Exits 1 on a 5xx other than 502, a chain that stopped
// answering, an answer that breaks C22/C23, a closed WebSocket or an error in the gateway's log.
//
//   npm run bench:fuzz                                   # starts `dist/main.js --devnet` (16 anvil chains)
//   npm run bench:fuzz -- --messages 2000 --seed 7
//   npm run bench:fuzz -- --url http://127.0.0.1:8080 --key <API key>   # a running gateway (its log is not read)
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { MAX_NESTING } from '../../src/rpc/message.ts';
import { judge, paramFuzzer, prng, WsFuzzChannel } from '../../test/support/fuzz-gen.ts';
// @ts-expect-error: a plain .mjs build script without type declarations
import { build } from '../../scripts/build.mjs';
import { type Child, cleanup, cleanupOnSignals, freePort, startChild, tempDir, waitUntil } from '../lib/children.ts';
import { defineScenario, type Values } from '../lib/scenario.ts';
import { record as recordFigures } from '../lib/report/results.ts';

const OPTIONS = {
  messages: { type: 'string', default: '20000' },
  seed: { type: 'string', default: '20261126' },
  url: { type: 'string', help: 'a running gateway instead of starting one' },
  key: { type: 'string', help: 'its API key (an account with every network); without one only /public/main is fuzzed over HTTP' },
  'http-workers': { type: 'string', default: '6' },
} as const;
let opt: Values<typeof OPTIONS>;

export default defineScenario({
  summary: '20,000 messages with mutated params over HTTP and WebSocket against the gateway on its devnet (C22, C23)',
  options: OPTIONS,
  run: async (ctx) => {
    opt = ctx.opt;
    TOTAL = Number(opt.messages);
    SEED = Number(opt.seed);
    return main();
  },
});

let TOTAL = 20_000;
let SEED = 20261126;
const BODY_LIMIT = 1_048_576;
const MAX_BATCH = 100;
/** WebSocket connections (each sends its frames one at a time), on these networks. */
const WS_NETWORKS = ['native-mainnet', 'ethereum', 'polygon', 'native-testnet'];

interface Network {
  slug: string;
  chainId: number;
  native?: boolean;
}

const inc = <K>(m: Map<K, number>, k: K, by = 1) => m.set(k, (m.get(k) ?? 0) + by);

async function postJson<T>(url: string, body: unknown, headers: Record<string, string> = {}, method = 'POST'): Promise<T> {
  const res = await fetch(url, { method, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${new URL(url).pathname} answered ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

/** Starts the compiled gateway with --devnet; an enterprise account's key (every network), and error log lines counted. */
async function startDevnetGateway(): Promise<{ child: Child; url: string; key: string; errorLines: string[] }> {
  const built = await build();
  console.log(`dist/: ${built.built} file(s) built`);
  const port = await freePort();
  const adminToken = randomBytes(16).toString('hex');
  const configFile = path.join(tempDir('fuzz-config'), 'config.json');
  // The keyless address takes as many calls as the key does: a rate limit would hide what is behind it.
  writeFileSync(configFile, JSON.stringify({ limits: { publicRpcPerMinute: 10_000_000, registrationsPerHour: 1_000_000 } }));
  const child = startChild('gateway --devnet', process.execPath, ['dist/main.js', '--devnet'], {
    env: {
      ...process.env,
      DATABASE_URL: undefined,
      REDIS_URL: undefined,
      GATEWAY_CONFIG: configFile,
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: tempDir('fuzz-data'),
      LOG_LEVEL: 'info',
      ADMIN_TOKEN: adminToken,
    },
  });
  // Every line at level error or fatal (pino writes JSON lines when not on a terminal).
  const errorLines: string[] = [];
  let partial = '';
  child.proc.stdout?.on('data', (d: Buffer) => {
    const lines = (partial + d.toString()).split('\n');
    partial = lines.pop() ?? '';
    for (const l of lines) if (/"level":(50|60)\b/.test(l)) errorLines.push(l);
  });
  const url = `http://127.0.0.1:${port}`;
  await waitUntil(child, 'readiness (devnet chains up)', async () => (await fetch(`${url}/health/ready`)).ok, 240_000);
  const session = await postJson<{ data: { user: { id: string }; tokens: { accessToken: string } } }>(`${url}/api/v1/auth/register`, {
    email: `fuzz-${Date.now()}@example.com`,
    password: 'fuzz password 123',
    name: 'Fuzz',
  });
  await postJson(`${url}/api/v1/admin/users/${session.data.user.id}`, { tier: 'enterprise' }, { 'x-admin-token': adminToken }, 'PATCH');
  const key = (await postJson<{ data: { key: string } }>(`${url}/api/v1/api-keys`, { name: 'fuzz' }, { authorization: `Bearer ${session.data.tokens.accessToken}` })).data.key;
  return { child, url, key, errorLines };
}

/** Which networks answer eth_blockNumber with a block number. */
async function alive(url: string, key: string | undefined, networks: Network[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const n of networks) {
    const path = key ? `/v1/${n.slug}/${key}` : n.slug === 'native-mainnet' ? '/public/main' : null;
    if (!path) continue;
    let answer = 'no answer';
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const res = await fetch(`${url}${path}`, { method: 'POST', body: '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' });
        const json = (await res.json()) as { result?: string; error?: { code: number } };
        answer = typeof json.result === 'string' ? json.result : `HTTP ${res.status} ${JSON.stringify(json.error)}`;
        if (json.result) break;
      } catch (err) {
        answer = (err as Error).message;
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
    out.set(n.slug, answer);
  }
  return out;
}

async function main(): Promise<number> {
  cleanupOnSignals();
  const started = opt.url ? undefined : await startDevnetGateway();
  const url = opt.url ?? (started as { url: string }).url;
  const key = opt.key ?? started?.key;
  const networks = ((await (await fetch(`${url}/api/v1/networks`)).json()) as { data: Network[] }).data;
  const before = await alive(url, key, networks);

  const sent = new Map<string, number>();
  const statuses = new Map<number, number>();
  const codes = new Map<number, number>();
  const problems: string[] = [];
  const over502: string[] = [];
  const wsCloses = new Map<string, number>();
  const errorMessages = new Map<string, number>();
  let answered = 0;
  let results = 0;

  const opts = (native: boolean, overLimit: boolean) => ({ maxNesting: MAX_NESTING, maxBatch: MAX_BATCH, maxBytes: BODY_LIMIT, overLimit, native });
  /** Message i, the same whatever ran before it (one generator per message, seeded by its index). */
  const messageAt = (i: number, native: boolean, overLimit: boolean) => paramFuzzer(prng(SEED * 1_000_003 + i), opts(native, overLimit)).message();
  const record = (where: string, input: string, status: number | undefined, answer: string | null) => {
    answered++;
    const v = judge(input, status, answer, { maxNesting: MAX_NESTING, maxBytes: BODY_LIMIT });
    for (const c of v.codes) inc(codes, c);
    results += v.results;
    // Messages without their numbers and hex, so one kind of refusal is one line.
    for (const m of v.messages) inc(errorMessages, m.replace(/0x[0-9a-fA-F]+|\d+/g, 'N').slice(0, 90));
    if (v.problems.length) problems.push(`${where}: ${v.problems.join('; ')} for ${input.slice(0, 200)}`);
  };
  const kind = (input: string) => (input.startsWith('[') ? 'batch' : 'single');

  // 60% over HTTP (half keyless), 40% over WebSocket; message i goes where i says.
  const httpIdx: number[] = [];
  const wsIdx: number[][] = WS_NETWORKS.map(() => []);
  for (let i = 0; i < TOTAL; i++) {
    if (i % 10 < 6 || !key) httpIdx.push(i);
    else wsIdx[i % WS_NETWORKS.length]?.push(i);
  }
  const nets = networks.filter((n) => key || n.slug === 'native-mainnet');
  const t0 = Date.now();
  let next = 0;
  let progress = 0;
  const tick = () => {
    if (++progress % 2000 === 0) console.log(`  ${progress} / ${TOTAL} sent (${Math.round((Date.now() - t0) / 1000)} s)`);
  };

  const httpWorker = async () => {
    while (next < httpIdx.length) {
      const i = httpIdx[next++] as number;
      const keyless = !key || i % 2 === 0;
      const n = keyless ? (networks.find((x) => x.slug === 'native-mainnet') as Network) : (nets[i % nets.length] as Network);
      const path = keyless ? '/public/main' : i % 4 === 1 ? `/v1/${n.slug}/${key}` : `/rpc/main/evm/${n.chainId}`;
      const headers: Record<string, string> = path.startsWith('/rpc/') ? { 'x-api-key': key as string } : {};
      const input = messageAt(i, n.native === true, true);
      inc(sent, `HTTP ${kind(input)} ${keyless ? 'keyless' : 'with key'}`);
      tick();
      try {
        const res = await fetch(`${url}${path}`, { method: 'POST', headers, body: input });
        const text = await res.text();
        inc(statuses, res.status);
        if (res.status >= 500 && res.status !== 502) over502.push(`HTTP ${res.status} at ${n.slug} for ${input.slice(0, 200)}: ${text.slice(0, 200)}`);
        record(`HTTP ${n.slug}`, input, res.status, text);
      } catch (err) {
        problems.push(`HTTP ${n.slug}: ${(err as Error).message} for ${input.slice(0, 200)}`);
      }
    }
  };

  const wsWorker = async (w: number) => {
    const slug = WS_NETWORKS[w] as string;
    const native = networks.find((n) => n.slug === slug)?.native === true;
    const address = `${url.replace(/^http/, 'ws')}/ws/${slug}?apiKey=${key}`;
    let ch = await WsFuzzChannel.open(address);
    for (const i of wsIdx[w] ?? []) {
      const input = messageAt(i, native, false);
      inc(sent, `WebSocket ${kind(input)}`);
      tick();
      const out = await ch.send(input);
      if ('answer' in out) {
        record(`WebSocket ${slug}`, input, undefined, out.answer);
        continue;
      }
      const why = ch.closed ? `closed ${ch.closed.code} ${ch.closed.reason}` : out.failed;
      inc(wsCloses, why);
      problems.push(`WebSocket ${slug}: ${why} after ${input.slice(0, 200)}`);
      await ch.close();
      ch = await WsFuzzChannel.open(address);
    }
    await ch.close();
  };

  const workers = Number(opt['http-workers']);
  await Promise.all([...Array.from({ length: workers }, httpWorker), ...(key ? WS_NETWORKS.map((_, w) => wsWorker(w)) : [])]);
  const seconds = (Date.now() - t0) / 1000;
  const after = await alive(url, key, networks);

  const isBlock = (s: string | undefined) => s !== undefined && /^0x[0-9a-f]+$/.test(s);
  const killed = [...before].filter(([slug, b]) => isBlock(b) && !isBlock(after.get(slug))).map(([slug]) => slug);
  const sorted = <K>(m: Map<K, number>) => [...m].sort((a, b) => b[1] - a[1]);

  console.log(`\nfuzz: seed ${SEED}, ${TOTAL} messages in ${seconds.toFixed(0)} s against ${opt.url ? url : 'dist/main.js --devnet'}`);
  console.log('\nMessages sent');
  for (const [k, v] of [...sent].sort()) console.log(`  ${k.padEnd(28)} ${v}`);
  console.log(`  ${'total'.padEnd(28)} ${[...sent.values()].reduce((a, b) => a + b, 0)} (answers judged: ${answered})`);
  console.log('\nHTTP answers by status');
  for (const [k, v] of [...statuses].sort((a, b) => a[0] - b[0])) console.log(`  ${String(k).padEnd(28)} ${v}`);
  console.log('\nJSON-RPC error codes (one per error item, HTTP and WebSocket)');
  for (const [k, v] of sorted(codes)) console.log(`  ${String(k).padEnd(28)} ${v}`);
  console.log(`  ${'(items with a result)'.padEnd(28)} ${results}`);
  console.log('\nMost frequent error messages (numbers as N)');
  for (const [k, v] of sorted(errorMessages).slice(0, 15)) console.log(`  ${String(v).padStart(6)}  ${k}`);
  console.log(`\n5xx other than 502: ${over502.length}`);
  for (const p of over502.slice(0, 10)) console.log(`  ${p}`);
  console.log(`Answers breaking C22/C23 (wrong id, not JSON, none): ${problems.length}`);
  for (const p of problems.slice(0, 10)) console.log(`  ${p}`);
  console.log(`WebSocket connections lost: ${[...wsCloses.values()].reduce((a, b) => a + b, 0)}${wsCloses.size ? ` (${sorted(wsCloses).map(([k, v]) => `${k}: ${v}`).join(', ')})` : ''}`);
  console.log(`Gateway log lines at level error or fatal: ${started ? started.errorLines.length : 'not read (a running gateway)'}`);
  for (const l of started?.errorLines.slice(0, 5) ?? []) console.log(`  ${l.slice(0, 400)}`);
  const aliveBefore = [...before.values()].filter(isBlock).length;
  const aliveAfter = [...after.values()].filter(isBlock).length;
  console.log(`\nChains answering eth_blockNumber: ${aliveBefore}/${before.size} before, ${aliveAfter}/${after.size} after; killed: ${killed.length ? killed.join(', ') : 'none'}`);
  for (const [slug, b] of before) console.log(`  ${slug.padEnd(20)} ${String(b).padEnd(12)} -> ${after.get(slug)}`);

  const failed = over502.length > 0 || killed.length > 0 || problems.length > 0 || (started?.errorLines.length ?? 0) > 0;
  recordFigures(`seed ${SEED}`, `${TOTAL} messages`, {
    per_s: { unit: 'messages/s', better: 'higher', value: TOTAL / seconds },
    over_502: { unit: 'answers', better: 'lower', value: over502.length },
    broken_answers: { unit: 'answers', better: 'lower', value: problems.length },
    chains_killed: { unit: 'chains', better: 'lower', value: killed.length },
  });
  await cleanup();
  if (failed) console.log('\nFAILED');
  return failed ? 1 : 0;
}
