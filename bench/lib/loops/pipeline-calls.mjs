// The RPC pipeline's CPU per message, in process (bench/scenarios/pipeline.ts runs this with plain
// `node`, on the compiled dist/, so that what is timed is the code `npm start` runs). The app is
// built as main.ts builds it (embedded storage in memory, limits in process, analytics on), an
// account with limits it never reaches and a key; a local node answers eth_chainId once, and
// every timed message is then answered from memory: parse, key, method policy and params, limits,
// usage, analytics, cache. Prints one JSON line: ns per message of each round, and bytes
// allocated per message, per case.
import http from 'node:http';
import inspector from 'node:inspector';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { buildApp } from '../../../dist/app.js';
import { loadConfig } from '../../../dist/config/load.js';
import { openStorage } from '../../../dist/storage/db.js';

const rounds = Number(process.argv[2] ?? 5);
const perRound = Number(process.argv[3] ?? 200_000);

const node = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    const call = JSON.parse(body);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: call.id, result: '0x32' }));
  });
});
await new Promise((resolve) => node.listen(0, '127.0.0.1', resolve));
const adminToken = randomBytes(16).toString('hex');
const config = loadConfig({
  env: { LOG_LEVEL: 'warn', ADMIN_TOKEN: adminToken, UPSTREAM_NATIVE_MAINNET: `http://127.0.0.1:${node.address().port}`, READY_WHEN: 'storage' },
  overrides: { auth: { passwordHashCost: 10 } },
});
const storage = await openStorage({ databaseUrl: null, queryTimeoutMs: 10_000, dataDir: 'memory' });
const secrets = { jwtSecret: randomBytes(32).toString('hex'), keyEncryptionSecret: randomBytes(32).toString('hex') };
const app = await buildApp(config, { storage, secrets, logStream: new Writable({ write: (_c, _e, cb) => cb() }) });
await app.ready();

const register = await app.inject({ method: 'POST', url: '/api/v1/auth/register', payload: { email: 'bench@example.com', password: 'bench password 123', name: 'Bench' } });
const { user, tokens } = register.json().data;
const unreachable = { requestsPerMinute: 1_000_000_000, dailyLimit: 1_000_000_000, monthlyLimit: 1_000_000_000 };
await app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${user.id}`, headers: { 'x-admin-token': adminToken }, payload: { tier: 'free', limits: unreachable } });
const made = await app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: { authorization: `Bearer ${tokens.accessToken}` }, payload: { name: 'bench' } });
const apiKey = made.json().data.key;

const { pipeline, networks } = app.parts;
const network = networks.bySlug('native-mainnet');
const single = Buffer.from('{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}');
const batch = Buffer.from(JSON.stringify(Array.from({ length: 10 }, (_, id) => ({ jsonrpc: '2.0', id, method: 'eth_chainId', params: [] }))));
const input = (body) => ({ network, apiKey, body, ip: '127.0.0.1', origin: undefined, authorization: undefined, requestId: 'bench', arrivedAt: performance.now() });

// The first call asks the node (and looks the key up); every later one is answered from memory.
const first = await pipeline.handle(input(single));
if (first.status !== 200) throw new Error(`the first call answered ${first.status}: ${String(first.body)}`);

async function timed(body, n) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const out = pipeline.handle(input(body));
    if (out instanceof Promise) await out; // an answer from memory is none (see the pipeline)
  }
  return Number(process.hrtime.bigint() - t0) / n;
}
const cases = { 'cached eth_chainId': { body: single, calls: 1 }, 'batch of 10 cached eth_chainId': { body: batch, calls: 10 } };
const out = {};
for (const [name, c] of Object.entries(cases)) {
  await timed(c.body, Math.min(perRound, 50_000)); // warm-up
  out[name] = { calls: c.calls, nsPerMessage: [] };
  for (let r = 0; r < rounds; r++) out[name].nsPerMessage.push(await timed(c.body, Math.ceil(perRound / c.calls)));
}
// Bytes allocated per message, after the timed rounds (sampling slows the calls): V8's sampling
// heap profiler with the objects the young and old collections freed kept in its account, so it
// counts what was made, not what lived. Garbage per call is work under HTTP load (collections
// shared with node:http's), where this loop's timing hides most of it.
const session = new inspector.Session();
session.connect();
const post = (method, params) => new Promise((resolve, reject) => session.post(method, params, (err, r) => (err ? reject(err) : resolve(r))));
await post('HeapProfiler.enable');
for (const [name, c] of Object.entries(cases)) {
  const messages = Math.ceil(100_000 / c.calls);
  await post('HeapProfiler.startSampling', { samplingInterval: 256, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  await timed(c.body, messages);
  const { profile } = await post('HeapProfiler.stopSampling');
  let bytes = 0;
  const walk = (node) => {
    bytes += node.selfSize;
    for (const child of node.children) walk(child);
  };
  walk(profile.head);
  out[name].bytesPerMessage = bytes / messages;
}
session.disconnect();
console.log(JSON.stringify(out));
await app.close();
await storage.close();
node.close();
