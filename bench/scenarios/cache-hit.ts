// Micro-benchmark of the response cache's hit path (C44): plan (key) + lookup + answer text.
// Run: npm run bench -- cache-hit
import { ResponseCache, answerText } from '../../src/rpc/dispatch/cache.ts';
import { record } from '../lib/report/results.ts';
import { defineScenario } from '../lib/scenario.ts';

export default defineScenario({
  summary: 'C44: the response cache\'s hit path (plan + get + answerText), ns per call, in process',
  options: {},
  run: async () => {
    run();
  },
});

function run(): void {

const cache = new ResponseCache({ enabled: true, maxBytesPerNetwork: 32 * 1024 * 1024, safeDepth: 64 });
const net = { slug: 'ethereum' };
const head = 20_000_000;
const blocks = 1000;
// A block header without transactions is ~1.5 KB of JSON on Ethereum.
const result = JSON.stringify({ number: '0x0', hash: `0x${'ab'.repeat(32)}`, logsBloom: `0x${'00'.repeat(256)}`, extraData: '0x', transactions: Array(20).fill(`0x${'cd'.repeat(32)}`) });
for (let i = 0; i < blocks; i++) {
  const plan = cache.plan(net, 'eth_getBlockByNumber', [`0x${i.toString(16)}`, false], head);
  if (!plan) throw new Error('not cacheable');
  cache.put(plan, `{"jsonrpc":"2.0","id":1,"result":${result}}`);
}
const params = Array.from({ length: blocks }, (_, i) => [`0x${i.toString(16)}`, false]);

function pass(n: number): number {
  let sink = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const plan = cache.plan(net, 'eth_getBlockByNumber', params[i % blocks], head);
    const hit = plan && cache.get(net, plan.key);
    if (!hit) throw new Error('miss');
    sink += answerText('42', hit).length;
  }
  const ns = Number(process.hrtime.bigint() - t0) / n;
  if (sink === 0) throw new Error('unreachable');
  return ns;
}

pass(200_000); // warm up
const rounds = [pass(1_000_000), pass(1_000_000), pass(1_000_000)];
record('hit path', `plan + get + answerText, ${result.length}-char result`, { per_call_ns: rounds });
console.log(`hit path (plan + get + answerText), ${result.length}-char result: ${Math.min(...rounds).toFixed(0)} ns/op (best of 3; ${rounds.map((r) => r.toFixed(0)).join(', ')})`);
console.log(`stats: ${JSON.stringify(cache.stats())}`);
}
