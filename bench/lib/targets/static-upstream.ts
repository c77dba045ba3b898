// A JSON-RPC "node" that answers every POST at once with a fixed body: the fastest upstream
// possible, so the bench measures the proxy in front of it. Run as its own process
// (`node --import tsx bench/lib/targets/static-upstream.ts [port]`); it prints `listening <port>`.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

// A fixed body (no id echo): parsing each request would make this process the bottleneck.
// "0x1234" is a valid block number, so the gateway's health probes are satisfied too.
const BODY = Buffer.from('{"jsonrpc":"2.0","id":1,"result":"0x1234"}');
const HEADERS = { 'content-type': 'application/json', 'content-length': String(BODY.length) };

const server = http.createServer((req, res) => {
  req.resume(); // read and drop the request body, then answer
  req.on('end', () => {
    res.writeHead(200, HEADERS);
    res.end(BODY);
  });
});
// Longer than nginx's and undici's idle keep-alive, so a pooled connection is never closed under them.
server.keepAliveTimeout = 75_000;
server.headersTimeout = 80_000;

server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
  console.log(`listening ${(server.address() as AddressInfo).port}`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
