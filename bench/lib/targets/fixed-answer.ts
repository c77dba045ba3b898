// The ceiling of a cached answer in Node.js: node:http answering every POST at once with a fixed
// body and the headers the gateway sends with a cached answer (content type and length, x-cache,
// the rate-limit and compute-unit headers, a fresh x-request-id), no routing, key, limits or
// cache lookup. The gateway's cached row as a fraction of this one is how close it comes.
// Run as its own process (`node --import tsx bench/lib/targets/fixed-answer.ts`); it prints `listening <port>`.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const BODY = Buffer.from('{"jsonrpc":"2.0","id":1,"result":"0x32"}');
const LENGTH = String(BODY.length);
const RESET = String(Math.ceil(Date.now() / 60_000) * 60);
let remaining = 1_000_000_000;

const server = http.createServer((req, res) => {
  req.resume(); // read and drop the request body, then answer
  req.on('end', () => {
    remaining--;
    res.writeHead(200, {
      'x-request-id': randomUUID(),
      'x-ratelimit-limit': '1000000000',
      'x-ratelimit-remaining': String(remaining),
      'x-ratelimit-reset': RESET,
      'x-cu-remaining': String(remaining),
      'x-cache': 'HIT',
      'content-type': 'application/json; charset=utf-8',
      'content-length': LENGTH,
    });
    res.end(BODY);
  });
});
server.keepAliveTimeout = 75_000;

server.listen(0, '127.0.0.1', () => {
  console.log(`listening ${(server.address() as AddressInfo).port}`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
