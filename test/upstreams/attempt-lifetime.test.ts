// How long an attempt's objects live after its answer (C48's attempt watch, src/upstreams/http/attempt.ts).
// Not a timing: the bytes V8 moves to its old generation per forwarded call, which grow when a
// finished call stays reachable across two scavenges (bench/README.md: "Garbage that lives too long").
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const here = path.dirname(fileURLToPath(import.meta.url));

test('a finished attempt is not kept reachable by the attempt watch: old-generation growth per call stays near what one call holds', async (t) => {
  // In a process of its own: the test runner's own bookkeeping would add to what is measured.
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', path.join(here, 'attempt-lifetime-fixture.ts')], { timeout: 60_000 });
  const { bytesPerCall } = JSON.parse(stdout.trim().split('\n').at(-1) as string) as { bytesPerCall: number };
  t.diagnostic(`old generation: ${bytesPerCall} bytes per call`);
  // A Set of the attempts under way, added to and deleted from per call, rebuilt its table every
  // few dozen calls; the tables it left behind, once old, kept finished calls alive through the
  // scavenges: 1,770-1,910 bytes per call here (Node 20, 22, 24) against 290-320 with the slots.
  assert.ok(bytesPerCall < 800, `the old generation grew by ${bytesPerCall} bytes per call`);
});
