// C46: what recording analytics costs a call on the RPC path, CPU time in process
// (bench/lib/measures/analytics-record.ts); the proxy scenario sets it against the gateway's CPU per request.
import { recordingCost } from '../lib/measures/analytics-record.ts';
import { record } from '../lib/report/results.ts';
import { defineScenario } from '../lib/scenario.ts';

export default defineScenario({
  summary: 'C46: CPU per call of recording analytics, in process (1,000,000 calls, best of 5)',
  options: {},
  run: async () => {
    const c = recordingCost();
    record('per call', 'analytics recording', { with_recording_ns: c.onNs, reading_answer_only_ns: c.offNs, added_ns: c.addedNs });
    console.log(`per call: ${c.onNs.toFixed(1)} ns with recording, ${c.offNs.toFixed(1)} ns reading the answer only; recording adds ${c.addedNs.toFixed(1)} ns`);
  },
});
