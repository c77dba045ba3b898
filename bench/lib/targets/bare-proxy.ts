// The floor for any Node.js proxy on this machine: node:http in, an undici Pool out, nothing else
// (no routing, auth, logging or metrics). The gateway's row against this one is the cost of the
// gateway's own code; this row against nginx is the cost of Node.js itself.
// Run as its own process: `node --import tsx bench/lib/targets/bare-proxy.ts <upstream-url>`; prints `listening <port>`.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

const upstream = new URL(process.argv[2] ?? 'http://127.0.0.1:8545');
// The same pool settings as the gateway's upstream pool (32 connections, no pipelining).
const pool = new Pool(upstream.origin, { connections: 32, pipelining: 1 });
const HEADERS = { 'content-type': 'application/json' };

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', async () => {
    try {
      const r = await pool.request({ method: 'POST', path: upstream.pathname, headers: HEADERS, body: Buffer.concat(chunks) });
      const body = Buffer.from(await r.body.arrayBuffer());
      res.writeHead(r.statusCode, { 'content-type': 'application/json', 'content-length': body.length });
      res.end(body);
    } catch {
      res.writeHead(502).end();
    }
  });
});
server.keepAliveTimeout = 75_000;

server.listen(0, '127.0.0.1', () => {
  console.log(`listening ${(server.address() as AddressInfo).port}`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => void pool.close().finally(() => process.exit(0)));
});
