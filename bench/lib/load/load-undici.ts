// Fallback load generator when wrk is not installed; runs in its own process (bench/lib/load/load.ts
// starts it). Usage: node --import tsx bench/lib/load/load-undici.ts '<LoadSpec JSON + timeoutS>'.
// One undici Client per connection, each sending its next request when the last answer is in;
// prints one JSON line with the LoadResult. Less efficient than wrk: on a small machine it takes
// more of the CPU that the target could use.
import { Client } from 'undici';
import { Histogram } from '../measures/histogram.ts';
import type { LoadSpec } from './load.ts';

const spec = JSON.parse(process.argv[2] ?? '{}') as LoadSpec & { timeoutS: number };
const url = new URL(spec.url);
const headers = { 'content-type': 'application/json', ...spec.headers };

const latency = new Histogram();
let errors = 0;
let non2xx = 0;

async function connection(until: number): Promise<void> {
  const client = new Client(url.origin, { pipelining: 1, headersTimeout: spec.timeoutS * 1000, bodyTimeout: spec.timeoutS * 1000 });
  while (performance.now() < until) {
    const started = performance.now();
    try {
      const res = await client.request({ method: 'POST', path: url.pathname + url.search, headers, body: spec.body });
      await res.body.dump();
      if (res.statusCode >= 400) non2xx++;
      latency.record((performance.now() - started) * 1000);
    } catch {
      errors++;
    }
  }
  await client.close().catch(() => undefined);
}

const started = performance.now();
const until = started + spec.seconds * 1000;
await Promise.all(Array.from({ length: spec.connections }, () => connection(until)));
const seconds = (performance.now() - started) / 1000;
const requests = latency.count;
const pct = (p: number) => latency.percentileMs(p);
console.log(JSON.stringify({ requests, seconds, rps: requests / seconds, p50Ms: pct(50), p99Ms: pct(99), p999Ms: pct(99.9), errors, non2xx }));
