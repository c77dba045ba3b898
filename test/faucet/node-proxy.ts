import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A JSON-RPC node in front of a real one (an anvil chain): passes every call on unchanged,
 * counts calls per method, and can refuse chosen methods with a JSON-RPC error, as a node that
 * rejects a transaction would.
 */
export interface NodeProxy {
  readonly url: string;
  /** Where calls go; may be set after start (the devnet comes up later). */
  target: string;
  /** Methods answered with `{code: -32000, message: refusal}` instead of being passed on. */
  readonly refuse: Set<string>;
  refusal: string;
  callCount(method: string): number;
  close(): Promise<void>;
}

export async function startNodeProxy(target = ''): Promise<NodeProxy> {
  const calls = new Map<string, number>();
  const state = { target, refusal: 'transaction refused by the test', refuse: new Set<string>() };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: { id?: unknown; method?: string } | Array<{ method?: string }> | undefined;
        try {
          parsed = JSON.parse(text);
        } catch {}
        for (const item of Array.isArray(parsed) ? parsed : parsed ? [parsed] : []) {
          if (item.method) calls.set(item.method, (calls.get(item.method) ?? 0) + 1);
        }
        if (parsed && !Array.isArray(parsed) && parsed.method && state.refuse.has(parsed.method)) {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ jsonrpc: '2.0', id: parsed.id ?? null, error: { code: -32000, message: state.refusal } }));
          return;
        }
        try {
          const up = await fetch(state.target, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text });
          res.writeHead(up.status, { 'content-type': 'application/json' });
          res.end(Buffer.from(await up.arrayBuffer()));
        } catch {
          res.writeHead(502);
          res.end();
        }
      })();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get target() {
      return state.target;
    },
    set target(t: string) {
      state.target = t;
    },
    refuse: state.refuse,
    get refusal() {
      return state.refusal;
    },
    set refusal(m: string) {
      state.refusal = m;
    },
    callCount: (m) => calls.get(m) ?? 0,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
