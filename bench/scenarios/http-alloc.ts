// Bytes allocated per request under HTTP load: the gateway's cached eth_chainId against the fixed
// answer (the ceiling of a cached answer in Node.js, bench/lib/targets/fixed-answer.ts), each
// sampled through its inspector while wrk runs. node:http's own garbage is in both; what the
// gateway adds over it is its share of the collections, which the pipeline bench's loop hides.
// Run: npm run bench -- http-alloc
import http from 'node:http';
import type { AddressInfo } from 'node:net';
// @ts-expect-error: a plain .mjs build script without type declarations
import { build } from '../../scripts/build.mjs';
import { startScript, stopChild } from '../lib/children.ts';
import { pickLoadGenerator } from '../lib/load/load.ts';
import { allocationsDuring } from '../lib/measures/allocations.ts';
import { record } from '../lib/report/results.ts';
import { defineScenario } from '../lib/scenario.ts';
import { LIMITS, startGateway } from '../lib/targets/gateway.ts';

const BODY = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}';
const UNREACHABLE = { requestsPerMinute: 1_000_000_000, dailyLimit: 1_000_000_000, monthlyLimit: 1_000_000_000 };
const GATEWAY_INSPECT = 9231;
const FIXED_INSPECT = 9232;

export default defineScenario({
  summary: 'bytes allocated per request under HTTP load: the gateway\'s cached eth_chainId against the fixed answer, by allocating function',
  options: {
    seconds: { type: 'string', default: '5', help: 'sampled seconds per target (after 3 s of warm-up)' },
    connections: { type: 'string', default: '32', help: 'keep-alive connections' },
    top: { type: 'string', default: '25', help: 'allocating functions printed per target' },
  },
  duration: { option: 'seconds', unit: 's' },
  run: async ({ opt }) => {
    await build();
    const load = pickLoadGenerator();
    const node = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const call = JSON.parse(body) as { id: unknown };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: call.id, result: '0x32' }));
      });
    });
    await new Promise<void>((resolve) => node.listen(0, '127.0.0.1', resolve));
    const upstreamUrl = `http://127.0.0.1:${(node.address() as AddressInfo).port}`;
    const connections = Number(opt.connections);
    const seconds = Number(opt.seconds);
    const measure = async (label: string, inspectPort: number, url: string, headers: Record<string, string>) => {
      const spec = { url, headers, body: BODY, connections };
      await load.run({ ...spec, seconds: 3 });
      let requests = 0;
      const a = await allocationsDuring(inspectPort, async () => {
        requests = (await load.run({ ...spec, seconds })).requests;
      });
      const perRequest = a.bytes / Math.max(1, requests);
      record('bytes allocated per request', label, { bytes_per_request: { unit: 'B', better: 'lower', value: [perRequest] }, requests });
      console.log(`${label}: ${requests} requests, ${perRequest.toFixed(0)} bytes allocated per request; the largest shares:`);
      for (const s of a.sites.slice(0, Number(opt.top))) console.log(`  ${(s.bytes / requests).toFixed(0).padStart(6)} B  ${s.site}`);
      return perRequest;
    };
    try {
      const gw = await startGateway({ label: 'gateway, cached eth_chainId', account: { tier: 'free', limits: UNREACHABLE }, config: LIMITS, kind: 'cached', body: BODY }, upstreamUrl, { nodeArgs: [`--inspect=127.0.0.1:${GATEWAY_INSPECT}`] });
      let gateway: number;
      try {
        gateway = await measure('gateway, cached eth_chainId', GATEWAY_INSPECT, gw.rpcUrl, gw.headers);
      } finally {
        await stopChild(gw.child);
      }
      const fixed = await startScript('fixed answer', 'fixed-answer.ts', [], 'target', [`--inspect=127.0.0.1:${FIXED_INSPECT}`]);
      let ceiling: number;
      try {
        ceiling = await measure('node:http fixed answer, gateway headers', FIXED_INSPECT, fixed.url, {});
      } finally {
        await stopChild(fixed.child);
      }
      record('bytes allocated per request', 'gateway vs the fixed answer', { ratio: { unit: 'x', better: 'lower', value: [gateway / ceiling] } });
      console.log(`gateway, cached eth_chainId vs the fixed answer: ${(gateway / ceiling).toFixed(2)}x the bytes allocated per request`);
    } finally {
      node.close();
    }
  },
});
