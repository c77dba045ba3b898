import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * How the fake node behaves:
 * - `ok`: answers `eth_blockNumber` with the head, other methods with `{ method, params }` as result
 * - `refuse`: not listening (connection refused), same port as before
 * - `stall`: reads the request and never answers
 * - `status500` / `status429`: that status with a JSON-RPC-looking body
 * - `garbage`: 200 with an HTML page
 */
export type FakeMode = 'ok' | 'refuse' | 'stall' | 'status500' | 'status429' | 'garbage';

export interface FakeUpstreamOptions {
  mode?: FakeMode;
  head?: number;
  /** Milliseconds to wait before answering in `ok` mode. */
  delayMs?: number;
}

export interface FakeUpstream {
  /** `http://127.0.0.1:PORT`; append a path or put credentials in as you like. */
  readonly url: string;
  readonly port: number;
  /** JSON-RPC calls received per method (batch items count one by one), in every mode but `refuse`. */
  readonly calls: Map<string, number>;
  /** Path and headers of the last HTTP request received. */
  readonly last: { path: string; headers: http.IncomingHttpHeaders } | undefined;
  /** Resolves once the switch is done (`refuse` closes the listener, leaving it listens again on the same port). */
  setMode(mode: FakeMode): Promise<void>;
  setHead(head: number): void;
  setDelay(ms: number): void;
  /** In `ok` mode, answer `method` with exactly these bytes (`null` restores the default). */
  setRaw(method: string, body: string | null): void;
  callCount(method: string): number;
  close(): Promise<void>;
}

/** Starts a fake JSON-RPC node on 127.0.0.1, port 0, whose behaviour can be switched at run time. */
export async function startFakeUpstream(opts: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  let mode: FakeMode = opts.mode ?? 'ok';
  let head = opts.head ?? 100;
  let delayMs = opts.delayMs ?? 0;
  let last: FakeUpstream['last'];
  const raw = new Map<string, string>();
  const calls = new Map<string, number>();
  const sockets = new Set<Socket>();

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      last = { path: req.url ?? '', headers: req.headers };
      const text = Buffer.concat(chunks).toString('utf8');
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      const items = (Array.isArray(parsed) ? parsed : [parsed]) as Array<{ id?: unknown; method?: unknown; params?: unknown }>;
      for (const item of items) {
        const method = typeof item?.method === 'string' ? item.method : '(invalid)';
        calls.set(method, (calls.get(method) ?? 0) + 1);
      }
      switch (mode) {
        case 'stall':
          return; // the socket is destroyed on close()
        case 'status500':
        case 'status429': {
          const status = mode === 'status500' ? 500 : 429;
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32603, message: `fake ${status}` } }));
          return;
        }
        case 'garbage':
          res.writeHead(200, { 'content-type': 'text/html' });
          res.end('<html><body>502 Bad Gateway</body></html>');
          return;
        default: {
          const answer = (item: (typeof items)[number]): string => {
            const method = typeof item?.method === 'string' ? item.method : '';
            const rawBody = raw.get(method);
            if (rawBody !== undefined) return rawBody;
            const result = method === 'eth_blockNumber' ? `0x${head.toString(16)}` : { method, params: item?.params ?? null };
            return JSON.stringify({ jsonrpc: '2.0', id: item?.id ?? null, result });
          };
          const body = Array.isArray(parsed) ? `[${items.map(answer).join(',')}]` : answer(items[0] ?? {});
          setTimeout(() => {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(body);
          }, delayMs);
        }
      }
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;

  const stop = async (): Promise<void> => {
    if (!server.listening) return;
    const closed = once(server, 'close');
    server.close();
    for (const s of sockets) s.destroy();
    await closed;
  };

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    calls,
    get last() {
      return last;
    },
    async setMode(next) {
      if (next === 'refuse') await stop();
      else if (!server.listening) {
        server.listen(port, '127.0.0.1');
        await once(server, 'listening');
      }
      // Leaving `stall`: let the held requests go (their sockets are reset).
      if (mode === 'stall') for (const s of sockets) s.destroy();
      mode = next;
    },
    setHead(n) {
      head = n;
    },
    setDelay(ms) {
      delayMs = ms;
    },
    setRaw(method, body) {
      if (body === null) raw.delete(method);
      else raw.set(method, body);
    },
    callCount(method) {
      return calls.get(method) ?? 0;
    },
    close: stop,
  };
}
