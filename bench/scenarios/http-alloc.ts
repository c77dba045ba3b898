// Bytes allocated per request under HTTP load, and how many of them outlived a young collection:
// the gateway's cached eth_chainId against the fixed answer (the ceiling of a cached answer in
// Node.js, bench/lib/targets/fixed-answer.ts), and its pass-through eth_blockNumber against the
// bare proxy (bench/lib/targets/bare-proxy.ts), each sampled through its inspector while the load
// runs. node:http's own garbage is in both; what the gateway adds over it is its share of the
// collections, which the pipeline bench's loop hides. What outlives a young collection is copied,
// then promoted, and is the old generation's to collect (bench/README.md: "Garbage that lives too long").
// Run: npm run bench -- http-alloc
import http from 'node:http';
import type { AddressInfo } from 'node:net';
// @ts-expect-error: a plain .mjs build script without type declarations
import { build } from '../../scripts/build.mjs';
import { type Child, startScript, stopChild } from '../lib/children.ts';
import { pickLoadGenerator } from '../lib/load/load.ts';
import { allocationsDuring } from '../lib/measures/allocations.ts';
import { record } from '../lib/report/results.ts';
import { defineScenario } from '../lib/scenario.ts';
import { type GatewayVariant, LIMITS, NO_CACHE, startGateway } from '../lib/targets/gateway.ts';

const BODY = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}';
const FORWARDED = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
const UNREACHABLE = { requestsPerMinute: 1_000_000_000, dailyLimit: 1_000_000_000, monthlyLimit: 1_000_000_000 };
const GATEWAY_INSPECT = 9231;
const FIXED_INSPECT = 9232;
const BARE_INSPECT = 9233;

export default defineScenario({
  summary: 'bytes allocated per request under HTTP load, and those that outlived a young collection: cached against the fixed answer, pass-through against the bare proxy, by allocating function',
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
    const measure = async (label: string, inspectPort: number, url: string, headers: Record<string, string>, body: string) => {
      const spec = { url, headers, body, connections };
      await load.run({ ...spec, seconds: 3 });
      // Two passes: every byte allocated, then only those that outlived a young collection.
      const pass = async (kept: boolean) => {
        let requests = 0;
        const a = await allocationsDuring(inspectPort, async () => {
          requests = (await load.run({ ...spec, seconds })).requests;
        }, { kept });
        return { requests, perRequest: a.bytes / Math.max(1, requests), sites: a.sites };
      };
      const made = await pass(false);
      const kept = await pass(true);
      record('bytes allocated per request', label, {
        bytes_per_request: { unit: 'B', better: 'lower', value: [made.perRequest] },
        kept_bytes_per_request: { unit: 'B', better: 'lower', value: [kept.perRequest] },
        requests: made.requests,
      });
      console.log(`${label}: ${made.requests} requests, ${made.perRequest.toFixed(0)} bytes allocated per request; the largest shares:`);
      for (const s of made.sites.slice(0, Number(opt.top))) console.log(`  ${(s.bytes / made.requests).toFixed(0).padStart(6)} B  ${s.site}`);
      console.log(`${label}: ${kept.requests} requests, ${kept.perRequest.toFixed(0)} bytes per request outlived a young collection; the largest shares:`);
      for (const s of kept.sites.slice(0, Number(opt.top))) console.log(`  ${(s.bytes / kept.requests).toFixed(0).padStart(6)} B  ${s.site}`);
      return { made: made.perRequest, kept: kept.perRequest };
    };
    const compare = (label: string, a: { made: number; kept: number }, b: { made: number; kept: number }) => {
      record('bytes allocated per request', label, { ratio: { unit: 'x', better: 'lower', value: [a.made / b.made] }, kept_ratio: { unit: 'x', better: 'lower', value: [a.kept / b.kept] } });
      console.log(`${label}: ${(a.made / b.made).toFixed(2)}x the bytes allocated per request, ${(a.kept / b.kept).toFixed(2)}x those that outlived a young collection`);
    };
    /** Starts a target with its inspector on `inspectPort`, measures it, and stops it. */
    const measured = async (label: string, inspectPort: number, body: string, start: (inspect: string) => Promise<{ child: Child; url: string; headers: Record<string, string> }>) => {
      const target = await start(`--inspect=127.0.0.1:${inspectPort}`);
      try {
        return await measure(label, inspectPort, target.url, target.headers, body);
      } finally {
        await stopChild(target.child);
      }
    };
    const gatewayAt = (variant: GatewayVariant) => async (inspect: string) => {
      const gw = await startGateway(variant, upstreamUrl, { nodeArgs: [inspect] });
      return { child: gw.child, url: gw.rpcUrl, headers: gw.headers };
    };
    const scriptAt = (name: string, file: string, args: string[]) => async (inspect: string) => {
      const s = await startScript(name, file, args, 'target', [inspect]);
      return { child: s.child, url: s.url, headers: {} };
    };
    try {
      const gateway = await measured('gateway, cached eth_chainId', GATEWAY_INSPECT, BODY, gatewayAt({ label: 'gateway, cached eth_chainId', account: { tier: 'free', limits: UNREACHABLE }, config: LIMITS, kind: 'cached', body: BODY }));
      const ceiling = await measured('node:http fixed answer, gateway headers', FIXED_INSPECT, BODY, scriptAt('fixed answer', 'fixed-answer.ts', []));
      compare('gateway, cached vs the fixed answer', gateway, ceiling);
      // Pass-through: the proxy comparison's `X-API-Key` row (enterprise key, response cache off).
      const forwarded = await measured('gateway, X-API-Key (pass-through)', GATEWAY_INSPECT, FORWARDED, gatewayAt({ label: 'gateway, X-API-Key', config: { ...NO_CACHE, ...LIMITS } }));
      const floor = await measured('node:http + undici only', BARE_INSPECT, FORWARDED, scriptAt('bare proxy', 'bare-proxy.ts', [upstreamUrl]));
      compare('gateway, pass-through vs node:http + undici only', forwarded, floor);
    } finally {
      node.close();
    }
  },
});
