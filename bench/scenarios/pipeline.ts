// The RPC pipeline's CPU per message in process, on the compiled dist/ (bench/lib/loops/pipeline-calls.mjs):
// what the gateway's own work costs a cached call with keys, limits, usage and analytics on, apart
// from HTTP. The proxy scenario's cached row is this plus node:http's share.
// Run: npm run bench -- pipeline
import { spawnSync } from 'node:child_process';
import path from 'node:path';
// @ts-expect-error: a plain .mjs build script without type declarations
import { build } from '../../scripts/build.mjs';
import { median, record } from '../lib/report/results.ts';
import { defineScenario } from '../lib/scenario.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

export default defineScenario({
  summary: 'the RPC pipeline\'s CPU per cached message in process (compiled dist/, plain node): ns per message, median of rounds, and bytes allocated per call',
  options: {
    rounds: { type: 'string', default: '5', help: 'timed rounds (the median is reported)' },
    calls: { type: 'string', default: '200000', help: 'calls per round' },
  },
  run: async ({ opt }) => {
    const built = await build();
    console.log(`dist/: ${built.built} file(s) built, ${built.removed} stray removed`);
    const run = spawnSync(process.execPath, [path.join(ROOT, 'bench', 'lib', 'loops', 'pipeline-calls.mjs'), opt.rounds, opt.calls], { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 20 });
    if (run.status !== 0) {
      console.error(run.stderr || run.stdout);
      return 1;
    }
    const line = run.stdout.trim().split('\n').at(-1) ?? '{}';
    const cases = JSON.parse(line) as Record<string, { calls: number; nsPerMessage: number[]; bytesPerMessage: number }>;
    for (const [name, c] of Object.entries(cases)) {
      const m = median(c.nsPerMessage);
      record('in process', name, {
        ns_per_message: { unit: 'ns', better: 'lower', value: c.nsPerMessage },
        ns_per_call: { unit: 'ns', better: 'lower', value: c.nsPerMessage.map((n) => n / c.calls) },
        bytes_per_call: { unit: 'B', better: 'lower', value: [c.bytesPerMessage / c.calls] },
      });
      console.log(`${name}: ${m.toFixed(0)} ns per message (${(m / c.calls).toFixed(0)} per call), rounds ${c.nsPerMessage.map((n) => n.toFixed(0)).join(', ')}; ${(c.bytesPerMessage / c.calls).toFixed(0)} bytes allocated per call`);
    }
  },
});
