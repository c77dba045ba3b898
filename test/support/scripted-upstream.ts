import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * A fake JSON-RPC node for tests of the gateway's own JSON-RPC handling, where `fake-upstream.ts`
 * cannot behave as needed:
 * - it echoes each `id` as the exact bytes it received (a real node keeps them as raw JSON), so a
 *   test sees what the gateway did to an id;
 * - it can answer a batch in reverse order (JSON-RPC allows any order);
 * - it can stay silent on notifications as geth and anvil do (HTTP 204 or 200, no body);
 * - it can pass each call on to another node one by one (for a node that cannot do batches).
 */
export interface ScriptedUpstreamOptions {
  /** Order of the answers to a batch; `same` by default. */
  batchOrder?: 'same' | 'reversed';
  /** Notifications get no answer item; a lone notification (or a batch of them) gets this status with no body. */
  silentNotifications?: 204 | 200;
  /** Answer every call by asking this node with a single request (its answer goes back unchanged). */
  forwardTo?: string;
}

export interface ScriptedUpstream {
  readonly url: string;
  /** Calls received per method, batch items one by one (health probes are `eth_blockNumber`). */
  readonly calls: Map<string, number>;
  /** Every HTTP body received, as text, health probes left out. */
  readonly bodies: string[];
  callCount(method: string): number;
  /** Calls other than `eth_blockNumber` (the pool's health probe). */
  totalCalls(): number;
  close(): Promise<void>;
}

/** The raw text of each element of a JSON array, or of each member of a JSON object, at the top level. */
export function topLevel(text: string): { kind: 'array' | 'object' | 'other'; parts: Array<{ key?: string; raw: string }> } {
  const s = text.trim();
  const kind = s.startsWith('[') ? 'array' : s.startsWith('{') ? 'object' : 'other';
  if (kind === 'other') return { kind, parts: [] };
  const parts: Array<{ key?: string; raw: string }> = [];
  let depth = 0;
  let start = 1;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '"') {
      for (i++; i < s.length && s[i] !== '"'; i++) if (s[i] === '\\') i++;
      continue;
    }
    if (c === '[' || c === '{') depth++;
    else if (c === ']' || c === '}') depth--;
    if ((c === ',' && depth === 1) || depth === 0) {
      const piece = s.slice(start, i).trim();
      start = i + 1;
      if (piece === '') continue;
      if (kind === 'array') parts.push({ raw: piece });
      else {
        const colon = memberColon(piece);
        parts.push({ key: JSON.parse(piece.slice(0, colon)) as string, raw: piece.slice(colon + 1).trim() });
      }
      if (depth === 0) break;
    }
  }
  return { kind, parts };
}

/** The `id` of a JSON-RPC object exactly as written (`12345678901234567890` stays as it is), or undefined. */
export function rawId(objectText: string): string | undefined {
  return topLevel(objectText).parts.find((p) => p.key === 'id')?.raw;
}

/** Index of the `:` after the key of `"key": value`. */
function memberColon(member: string): number {
  let i = 1;
  for (; i < member.length && member[i] !== '"'; i++) if (member[i] === '\\') i++;
  return member.indexOf(':', i);
}

interface Item {
  /** Raw JSON text of the id; undefined for a notification. */
  idText: string | undefined;
  method: string;
  params: unknown;
  raw: string;
}

function readItem(raw: string): Item {
  const members = topLevel(raw).parts;
  const get = (k: string) => members.find((m) => m.key === k)?.raw;
  let method = '(invalid)';
  let params: unknown = null;
  try {
    const m = JSON.parse(get('method') ?? 'null');
    if (typeof m === 'string') method = m;
    params = JSON.parse(get('params') ?? 'null');
  } catch {
    // counted as (invalid)
  }
  return { idText: get('id'), method, params, raw };
}

/** Starts the node on 127.0.0.1, port 0. */
export async function startScriptedUpstream(opts: ScriptedUpstreamOptions = {}): Promise<ScriptedUpstream> {
  const calls = new Map<string, number>();
  const bodies: string[] = [];
  const sockets = new Set<Socket>();

  const answer = async (item: Item): Promise<string | undefined> => {
    if (item.idText === undefined && opts.silentNotifications) return undefined;
    if (opts.forwardTo) {
      const res = await fetch(opts.forwardTo, { method: 'POST', headers: { 'content-type': 'application/json' }, body: item.raw });
      return (await res.text()).trim();
    }
    const result = item.method === 'eth_blockNumber' ? '"0x64"' : JSON.stringify({ method: item.method, params: item.params });
    return `{"jsonrpc":"2.0","id":${item.idText ?? 'null'},"result":${result}}`;
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const top = topLevel(text);
      const items = top.kind === 'array' ? top.parts.map((p) => readItem(p.raw)) : [readItem(text.trim())];
      for (const it of items) calls.set(it.method, (calls.get(it.method) ?? 0) + 1);
      if (!(items.length === 1 && items[0]?.method === 'eth_blockNumber' && top.kind === 'object')) bodies.push(text);
      try {
        const answers = (await Promise.all(items.map(answer))).filter((a): a is string => a !== undefined);
        if (opts.batchOrder === 'reversed') answers.reverse();
        if (answers.length === 0) {
          res.writeHead(opts.silentNotifications ?? 200).end();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(top.kind === 'array' ? `[${answers.join(',')}]` : answers[0]);
      } catch {
        res.writeHead(502).end();
      }
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    bodies,
    callCount: (method) => calls.get(method) ?? 0,
    totalCalls: () => [...calls].reduce((n, [m, c]) => (m === 'eth_blockNumber' ? n : n + c), 0),
    async close() {
      if (!server.listening) return;
      const closed = once(server, 'close');
      server.close();
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}
