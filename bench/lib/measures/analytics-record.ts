/**
 * C46: what recording analytics costs a call on the RPC path, in process: the recorder's `call()`
 * (three map lookups, a bucket index, a few additions) and the two clock reads (arrival and
 * answer) the pipeline makes only while analytics is on. Whether the answer is an error is read
 * either way (the metrics need it), so both loops do that. CPU time, not wall time: a busy
 * machine that deschedules the process does not count, which is why this figure holds to a
 * fraction of a per cent where req/s on a shared VM swings by a quarter.
 *
 * The proxy scenario prints it against the gateway's CPU per request; alone: `npm run bench -- analytics-record`.
 */
import { AnalyticsRecorder, NODE_ERROR, OK } from '../../../src/analytics/recorder.ts';
import { answerErrorCode } from '../../../src/json/lossless.ts';

const CALLS = 1_000_000;
const methods = ['eth_blockNumber', 'eth_call', 'eth_getBalance', 'eth_getLogs', 'eth_chainId'];
const networks = ['native-mainnet', 'ethereum'];
const answer = Buffer.from('{"jsonrpc":"2.0","id":1,"result":"0x4ca5e22"}');
// The pipeline hands the recorder the key's own strings (hash cached), never new ones per call.
const keys = ['key-0', 'key-1', 'key-2', 'key-3'];

function run(record: boolean): number {
  const rec = new AnalyticsRecorder(methods);
  const start = process.cpuUsage();
  let errors = 0;
  for (let i = 0; i < CALLS; i++) {
    const at = record ? performance.now() : 0;
    const outcome = answerErrorCode(answer) === null ? OK : NODE_ERROR;
    if (record) rec.call('user-1', keys[i & 3] as string, networks[i & 1] as string, methods[i % 5] as string, 1, outcome, performance.now() - at);
    else errors += outcome;
  }
  const used = process.cpuUsage(start);
  if (errors < 0) console.log(errors); // keeps the loop from being optimised away
  return ((used.user + used.system) * 1000) / CALLS;
}

/** Nanoseconds of CPU per call with and without recording: the best of five runs each, after a warm-up. */
export function recordingCost(): { onNs: number; offNs: number; addedNs: number } {
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
  const onNs = Math.min(...on);
  const offNs = Math.min(...off);
  return { onNs, offNs, addedNs: Math.max(0, onNs - offNs) };
}
