// Shared by the WebSocket tests: clients that wait for messages, a cuttable relay between the
// gateway and a node, a fake node that emits notifications on demand, and a gateway in front of
// devnet chains reached through such relays.
import { once } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { loadConfig } from '../../src/config/load.ts';
import type { NetworkConfig } from '../../src/config/schema.ts';
import { type Devnet, startDevnet } from '../../src/devnet/devnet.ts';
import { startTestApp, type TestApp, type TestAppOptions } from './app.ts';

/**
 * A JSON-RPC message from the socket, with the members tests read: an answer, or a notification
 * whose params carry its subscription and result. `R` is the result as the test reads it (the
 * Client methods take it as a type argument, as `res.json<T>()` does); which kind of message it
 * is, and whether it carries a result or an error, is what the tests assert.
 */
export interface Json<R = unknown> {
  jsonrpc?: string;
  id?: unknown;
  method?: string;
  params: { subscription: string; result: R };
  result: R;
  error?: { code: number; message: string; data?: unknown };
}

/** A block header as newHeads and eth_getBlockBy* carry it (the members tests read). */
export interface Head {
  number: string;
  hash: string;
}

/** A log as a logs subscription carries it. */
export interface Log {
  address: string;
  data: string;
  topics: string[];
  transactionHash: string;
}

/** A ws message as text: a Buffer by default, fragments or an ArrayBuffer under other binary types. */
function messageText(data: WebSocket.RawData): string {
  return (Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data)).toString();
}

/** A WebSocket client that keeps every message it received and can wait for the next matching one. */
export class Client {
  readonly messages: Json[] = [];
  readonly raw: string[] = [];
  #waiters: Array<{ match: (m: Json) => boolean; resolve: (m: Json) => void }> = [];
  #seen = 0;
  closed: Promise<{ code: number; reason: string }>;
  #nextId = 1;

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const text = messageText(data);
      this.raw.push(text);
      const m = JSON.parse(text) as Json;
      this.messages.push(m);
      const i = this.#waiters.findIndex((w) => w.match(m));
      if (i >= 0) this.#waiters.splice(i, 1)[0]?.resolve(m);
    });
    this.closed = new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: String(reason) })));
    ws.on('error', () => {});
  }

  /** The next message (from now on, or already received and not yet taken) that matches, its result read as `R`. */
  next<R = unknown>(match: (m: Json<R>) => boolean = () => true, timeoutMs = 8_000): Promise<Json<R>> {
    const matches = match as (m: Json) => boolean;
    const found = this.messages.slice(this.#seen).find(matches);
    if (found) {
      this.#seen = this.messages.indexOf(found) + 1;
      return Promise.resolve(found as Json<R>);
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        match: matches,
        resolve: (m: Json) => {
          clearTimeout(timer);
          this.#seen = this.messages.length;
          resolve(m as Json<R>);
        },
      };
      // A waiter that timed out is taken off the list: it must not swallow a later message.
      const timer = setTimeout(() => {
        const i = this.#waiters.indexOf(waiter);
        if (i >= 0) this.#waiters.splice(i, 1);
        reject(new Error(`no matching message within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#waiters.push(waiter);
    });
  }

  /** Sends one call and waits for the answer with its id. */
  async call<R = unknown>(method: string, params: unknown[] = []): Promise<Json<R>> {
    const id = this.#nextId++;
    this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    return this.next<R>((m) => m.id === id);
  }

  /** Sends raw text (or anything) and waits for the next answer that is not a notification. */
  async send<R = unknown>(data: string | Buffer, opts: { binary?: boolean } = {}): Promise<Json<R>> {
    this.ws.send(data, { binary: opts.binary ?? false });
    return this.next<R>((m) => m.method !== 'eth_subscription');
  }

  async subscribe(params: unknown[]): Promise<string> {
    const answer = await this.call('eth_subscribe', params);
    if (typeof answer.result !== 'string') throw new Error(`eth_subscribe failed: ${JSON.stringify(answer.error)}`);
    return answer.result;
  }

  /** The next notification of a subscription. */
  notification<R = unknown>(subscription: string, timeoutMs = 8_000): Promise<Json<R>> {
    return this.next<R>((m) => m.method === 'eth_subscription' && m.params?.subscription === subscription, timeoutMs);
  }

  notificationsOf<R = unknown>(subscription: string): Array<Json<R>> {
    return this.messages.filter((m) => m.method === 'eth_subscription' && m.params?.subscription === subscription) as Array<Json<R>>;
  }

  close(): Promise<{ code: number; reason: string }> {
    this.ws.close();
    return this.closed;
  }
}

/** The gateway's ws:// address for a path. */
export const wsAddress = (t: TestApp, path: string) => `${t.url.replace(/^http/, 'ws')}${path}`;

/** Opens a WebSocket; rejects with the HTTP status when the upgrade is refused. */
export async function connect(url: string, opts: WebSocket.ClientOptions = {}): Promise<Client> {
  const ws = new WebSocket(url, opts);
  const client = new Client(ws);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    ws.once('error', reject);
  });
  return client;
}

/** What the gateway answers to an upgrade: the 101's headers, or the refusal's status, headers and body. */
export async function tryUpgrade(url: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: IncomingHttpHeaders; body: string; ws?: WebSocket }> {
  const ws = new WebSocket(url, { headers });
  ws.on('error', () => {});
  return new Promise((resolve) => {
    ws.once('upgrade', (res) => resolve({ status: 101, headers: res.headers, body: '', ws }));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
  });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A WebSocket relay between the gateway and a node: counts the JSON-RPC methods the gateway
 * sends upstream, and can cut every relayed connection or refuse new ones.
 */
export interface Relay {
  url: string;
  calls: Map<string, number>;
  count(method: string): number;
  /** Connections relayed now. */
  readonly open: number;
  /** Accepted connections so far. */
  readonly accepted: number;
  cut(): void;
  refuse(on: boolean): void;
  close(): Promise<void>;
}

export async function startRelay(target: string): Promise<Relay> {
  let refusing = false;
  let accepted = 0;
  const calls = new Map<string, number>();
  const pairs = new Set<{ client: WebSocket; node: WebSocket }>();
  const server = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    verifyClient: (_info, cb) => cb(!refusing, 503),
  });
  await once(server, 'listening');
  server.on('connection', (client) => {
    accepted++;
    const node = new WebSocket(target);
    const pair = { client, node };
    pairs.add(pair);
    const queue: string[] = [];
    node.on('open', () => {
      for (const m of queue.splice(0)) node.send(m);
    });
    client.on('message', (data) => {
      const text = messageText(data);
      try {
        const m = JSON.parse(text) as Json;
        if (m.method) calls.set(m.method, (calls.get(m.method) ?? 0) + 1);
      } catch {}
      if (node.readyState === WebSocket.OPEN) node.send(text);
      else queue.push(text);
    });
    node.on('message', (data) => client.readyState === WebSocket.OPEN && client.send(messageText(data)));
    const end = () => {
      pairs.delete(pair);
      client.terminate();
      node.terminate();
    };
    client.on('close', end);
    node.on('close', end);
    client.on('error', () => {});
    node.on('error', () => {});
  });
  const relay: Relay = {
    url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    count: (m) => calls.get(m) ?? 0,
    get open() {
      return pairs.size;
    },
    get accepted() {
      return accepted;
    },
    cut() {
      for (const p of pairs) {
        p.client.terminate();
        p.node.terminate();
      }
    },
    refuse(on) {
      refusing = on;
    },
    async close() {
      relay.cut();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  return relay;
}

/**
 * A fake node's WebSocket side: answers eth_subscribe / eth_unsubscribe and emits notifications
 * for its live subscriptions when told to.
 */
export interface FakeWsNode {
  url: string;
  readonly subscribes: number;
  readonly unsubscribes: number;
  readonly connections: number;
  /** Live subscriptions of a kind (first eth_subscribe param). */
  live(kind: string): number;
  /** Sends one notification with `result` to every live subscription of `kind`; returns how many were sent. */
  emit(kind: string, result: unknown): number;
  close(): Promise<void>;
}

export async function startFakeWsNode(): Promise<FakeWsNode> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await once(server, 'listening');
  const subs = new Map<string, { ws: WebSocket; kind: string }>();
  let subscribes = 0;
  let unsubscribes = 0;
  let next = 1;
  server.on('connection', (ws) => {
    ws.on('error', () => {});
    ws.on('message', (data) => {
      // Calls from the gateway: eth_subscribe's first param is the kind, eth_unsubscribe's the id.
      const m = JSON.parse(messageText(data)) as { id?: unknown; method?: string; params: [string] };
      if (m.method === 'eth_subscribe') {
        subscribes++;
        const id = `0x${(next++).toString(16).padStart(32, '0')}`;
        subs.set(id, { ws, kind: m.params[0] });
        ws.send(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: id }));
      } else if (m.method === 'eth_unsubscribe') {
        unsubscribes++;
        ws.send(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: subs.delete(m.params[0]) }));
      } else {
        ws.send(JSON.stringify({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'not here' } }));
      }
    });
    ws.on('close', () => {
      for (const [id, s] of subs) if (s.ws === ws) subs.delete(id);
    });
  });
  return {
    url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get subscribes() {
      return subscribes;
    },
    get unsubscribes() {
      return unsubscribes;
    },
    get connections() {
      return server.clients.size;
    },
    live: (kind) => [...subs.values()].filter((s) => s.kind === kind).length,
    emit(kind, result) {
      let n = 0;
      const body = JSON.stringify(result);
      for (const [id, s] of subs) {
        if (s.kind !== kind || s.ws.readyState !== WebSocket.OPEN) continue;
        s.ws.send(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${id}","result":${body}}}`);
        n++;
      }
      return n;
    },
    async close() {
      for (const c of server.clients) c.terminate();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** The shipped network definitions, for overrides that replace upstreams. */
export function defaultNetworks(): NetworkConfig[] {
  return structuredClone<NetworkConfig[]>(loadConfig({ env: {} }).networks);
}

/** Networks with the given upstreams replaced (others keep the shipped ones, which tests never reach). */
export function withUpstreams(upstreams: Record<string, NetworkConfig['upstreams']>): NetworkConfig[] {
  return defaultNetworks().map((n) => (upstreams[n.slug] ? { ...n, upstreams: upstreams[n.slug] as NetworkConfig['upstreams'] } : n));
}

/**
 * A gateway in front of devnet chains whose WebSocket side is reached through relays, so a test
 * can count upstream subscriptions and cut the hub's connection. `relays[slug]` lists the relays
 * of a network (each an upstream entry with the chain's HTTP address).
 */
export async function startRelayedGateway(
  networks: string[],
  opts: { relaysPerNetwork?: number; env?: Record<string, string>; overrides?: TestAppOptions['overrides'] } = {},
): Promise<{ t: TestApp; devnet: Devnet; relays: Record<string, Relay[]>; close(): Promise<void> }> {
  const defs = defaultNetworks();
  const devnet = await startDevnet({
    networks: networks.map((slug) => {
      const n = defs.find((d) => d.slug === slug);
      if (!n) throw new Error(`no network ${slug}`);
      return { slug, chainId: n.chainId, native: n.native === true };
    }),
    nativeBlockTimeSeconds: 1,
  });
  const relays: Record<string, Relay[]> = {};
  const upstreams: Record<string, NetworkConfig['upstreams']> = {};
  for (const slug of networks) {
    const chain = devnet.upstreams[slug] as { http: string; ws: string };
    relays[slug] = await Promise.all(Array.from({ length: opts.relaysPerNetwork ?? 1 }, () => startRelay(chain.ws)));
    upstreams[slug] = relays[slug].map((r) => ({ http: chain.http, ws: r.url }));
  }
  const t = await startTestApp({
    listen: true,
    ...(opts.env ? { env: opts.env } : {}),
    overrides: { ...opts.overrides, networks: withUpstreams(upstreams) },
  });
  return {
    t,
    devnet,
    relays,
    async close() {
      await t.close();
      for (const list of Object.values(relays)) for (const r of list) await r.close();
      await devnet.stop();
    },
  };
}
