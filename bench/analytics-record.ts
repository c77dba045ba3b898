/**
 * C46: what recording analytics costs a call on the RPC path, in process: the recorder's
 * `call()` (three map lookups, a bucket index, a few additions) plus reading whether the answer is
 * an error, as the pipeline does per admitted call. CPU-bound, so less at the mercy of a busy
 * machine than the pass-through rows of `npm run bench`; compare it with the gateway's CPU per
 * forwarded request there. Run: `npx tsx bench/analytics-record.ts`.
 */
import { AnalyticsRecorder, NODE_ERROR, OK } from '../src/analytics/recorder.ts';
import { answerErrorCode } from '../src/rpc/pipeline.ts';

const CALLS = 2_000_000;
const methods = ['eth_blockNumber', 'eth_call', 'eth_getBalance', 'eth_getLogs', 'eth_chainId'];
const networks = ['native-mainnet', 'ethereum'];
const answer = Buffer.from('{"jsonrpc":"2.0","id":1,"result":"0x4ca5e22"}');
// The pipeline hands the recorder the key's own strings (hash cached), never new ones per call.
const keys = ['key-0', 'key-1', 'key-2', 'key-3'];
const latencies = Array.from({ length: 1024 }, (_, i) => 0.2 + ((i * 7919) % 1000) / 10);

function run(record: boolean): number {
  const rec = new AnalyticsRecorder(methods);
  // CPU time, not wall time: on a busy machine the process is descheduled, which wall time would count.
  const start = process.cpuUsage();
  let errors = 0;
  for (let i = 0; i < CALLS; i++) {
    const outcome = answerErrorCode(answer) === null ? OK : NODE_ERROR;
    if (record) rec.call('user-1', keys[i & 3] as string, networks[i & 1] as string, methods[i % 5] as string, 1, outcome, latencies[i & 1023] as number);
    else errors += outcome;
  }
  const used = process.cpuUsage(start);
  const ns = ((used.user + used.system) * 1000) / CALLS;
  if (errors < 0) console.log(errors);
  return ns;
}

// Warm up both loops, then take the best of five of each (the least disturbed).
for (let i = 0; i < 2; i++) {
  run(true);
  run(false);
}
const on: number[] = [];
const off: number[] = [];
for (let i = 0; i < 5; i++) {
  on.push(run(true));
  off.push(run(false));
}
const best = (xs: number[]) => Math.min(...xs);
console.log(`per call: ${best(on).toFixed(1)} ns with recording, ${best(off).toFixed(1)} ns reading the answer only; recording adds ${(best(on) - best(off)).toFixed(1)} ns`);
