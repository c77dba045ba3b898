import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';

/**
 * How the node takes a request as a whole:
 * - `ok`: answers each call (see `FakeNodeOptions` for what it answers)
 * - `refuse`: not listening (connection refused), same port as before
 * - `stall`: reads the request and never answers
 * - `stallCalls`: answers its lone `eth_blockNumber` health probes, never any other call (a node that looks healthy and hangs)
 * - `status500` / `status429`: that status with a JSON-RPC-looking body
 * - `garbage`: 200 with an HTML page
 */
export type FakeMode = 'ok' | 'refuse' | 'stall' | 'stallCalls' | 'status500' | 'status429' | 'garbage';

export interface FakeNodeOptions {
  mode?: FakeMode;
  /** The `eth_blockNumber` answer; 100 by default (0x4ca5e22 with `native`). */
  head?: number;
  /** Milliseconds to wait before answering in `ok` mode. */
  delayMs?: number;
  /**
   * A native (XDC-like) node: the XDPoS methods that `nat_*` calls are translated to answer with
   * fixtures of the real shapes (test/fixtures/native), sent byte for byte; other methods get the
   * node's -32601 error.
   */
  native?: boolean;
  /** Answer each call by asking this node with a single request (its answer goes back unchanged). */
  forwardTo?: string;
  /** Order of the answers to a batch; `same` by default (JSON-RPC allows any). */
  batchOrder?: 'same' | 'reversed';
  /** Notifications get no answer item; a lone notification (or a batch of them) gets this status with no body, as geth and anvil do. */
  silentNotifications?: 204 | 200;
}

export interface RpcCall {
  method: string;
  params: unknown;
}

export interface FakeNode {
  /** `http://127.0.0.1:PORT`; append a path or put credentials in as you like. */
  readonly url: string;
  readonly port: number;
  /** Calls received per method (batch items one by one), in every mode but `refuse`. */
  readonly calls: Map<string, number>;
  /** Every call received, in order. */
  readonly log: RpcCall[];
  /** Every HTTP body received, as text, lone `eth_blockNumber` health probes left out. */
  readonly bodies: string[];
  /** Every HTTP request received, its body as text and its headers, lone `eth_blockNumber` health probes left out. */
  readonly requests: ReadonlyArray<{ body: string; headers: http.IncomingHttpHeaders }>;
  /** Path and headers of the last HTTP request received. */
  readonly last: { path: string; headers: http.IncomingHttpHeaders } | undefined;
  /** Methods answered with the JSON-RPC error `{code: -32000, message: refusal}`, as a node rejecting a transaction would. */
  readonly refuse: Set<string>;
  callCount(method: string): number;
  /** HTTP answers done (sent to the end, or cut by the caller) in `ok` mode, lone `eth_blockNumber` health probes left out. */
  answersSent(): number;
  /** Calls other than `eth_blockNumber` (the pool's health probe). */
  totalCalls(): number;
  /** `log` without the `eth_blockNumber` health probes. */
  logWithoutProbes(): RpcCall[];
  /** Resolves once the switch is done (`refuse` closes the listener, leaving it listens again on the same port). */
  setMode(mode: FakeMode): Promise<void>;
  setHead(head: number): void;
  setDelay(ms: number): void;
  /** In `ok` mode, answer `method` with exactly these bytes (`null` restores the default). */
  setRaw(method: string, body: string | null): void;
  /**
   * In `ok` mode, answer `method` with the `result` text `script` gives for the call (its params, and
   * how many calls of the method came before it); a null from it answers as usual. `null` removes it.
   */
  setScript(method: string, script: ((params: unknown, before: number) => string | null) | null): void;
  /** Native: `XDPoS_getV2BlockByNumber` answers a block whose `Error` is set, as for an unknown number. */
  setBlockError(on: boolean): void;
  /** Native: `XDPoS_getMasternodesByNumber` answers with `Error: {}` (how Go marshals its error value). */
  setMasternodesError(on: boolean): void;
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
  /** Raw JSON text of the id, answered as received (a real node keeps it as raw JSON); undefined for a notification. */
  idText: string | undefined;
  method: string;
  params: unknown;
  raw: string;
}

function readItem(raw: string): Item {
  let members: Array<{ key?: string; raw: string }> = [];
  try {
    members = topLevel(raw).parts;
  } catch {
    // not JSON: counted as (invalid)
  }
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

const FIXTURES = new URL('../fixtures/native/', import.meta.url);
/** The epoch whose block has a reward record in `rewards.json`; other known epochs have none. */
export const REWARD_EPOCH = 89300;
/** An epoch the native node knows, whose block has no reward record (the node answers `{}`). */
export const EPOCH_WITHOUT_REWARDS = 89301;
const NATIVE_HEAD = 0x4ca5e22;

/**
 * Fixture texts, sent byte for byte: the real node writes wei amounts as bare JSON numbers
 * beyond 2^53, and a parse-and-serialise round trip here would already round them.
 */
function fixture(name: string): string {
  return readFileSync(new URL(`${name}.json`, FIXTURES), 'utf8').trim();
}

type Answer = { result: string } | { error: { code: number; message: string } };

/** The native node's answers: `nat_*` translations' targets from fixtures, -32601 for anything else. */
function nativeAnswers(flags: { blockError: boolean; masternodesError: boolean }): (method: string, params: unknown) => Answer {
  const texts = {
    block: fixture('v2-block'),
    blockError: fixture('v2-block-error'),
    candidates: fixture('candidates'),
    masternodes: fixture('masternodes'),
    masternodesError: fixture('masternodes-error'),
    rewards: fixture('rewards'),
  };
  const parsed = JSON.parse(fixture('epoch-info')) as Record<string, { hash: string }>;
  const epochs = new Map(Object.entries(parsed).map(([epoch, info]) => [Number(epoch), { text: JSON.stringify(info), hash: info.hash }]));
  const rewardHash = epochs.get(REWARD_EPOCH)?.hash;
  return (method, params) => {
    const args = Array.isArray(params) ? params : [];
    switch (method) {
      case 'XDPoS_getV2BlockByNumber':
        return { result: flags.blockError ? texts.blockError : texts.block };
      case 'eth_getCandidates':
        return { result: texts.candidates };
      case 'XDPoS_getMasternodesByNumber':
        return { result: flags.masternodesError ? texts.masternodesError : texts.masternodes };
      case 'XDPoS_getBlockInfoByEpochNum': {
        // The node decodes a uint64: a JSON number, not a string.
        const epoch = args[0];
        if (typeof epoch !== 'number') {
          return { error: { code: -32602, message: 'invalid argument 0: json: cannot unmarshal string into Go value of type uint64' } };
        }
        const info = epochs.get(epoch);
        return info ? { result: info.text } : { error: { code: -32000, message: `epoch ${epoch} is not reached yet` } };
      }
      case 'eth_getRewardByHash':
        return { result: args[0] === rewardHash ? texts.rewards : '{}' };
      default:
        return { error: { code: -32601, message: `the method ${method} does not exist/is not available` } };
    }
  };
}

/**
 * A fake JSON-RPC node on 127.0.0.1, port 0, for tests of the gateway in front of nodes: it counts
 * and logs what reaches it, and its answers, delays and failures can be scripted and switched at
 * run time. Ids are echoed as the exact bytes received, so a test sees what the gateway did to them.
 */
export async function startFakeNode(opts: FakeNodeOptions = {}): Promise<FakeNode> {
  let mode: FakeMode = opts.mode ?? 'ok';
  let head = opts.head ?? (opts.native ? NATIVE_HEAD : 100);
  let delayMs = opts.delayMs ?? 0;
  let last: FakeNode['last'];
  const raw = new Map<string, string>();
  const scripts = new Map<string, (params: unknown, before: number) => string | null>();
  const calls = new Map<string, number>();
  const log: RpcCall[] = [];
  const bodies: string[] = [];
  const requests: Array<{ body: string; headers: http.IncomingHttpHeaders }> = [];
  const refuse = new Set<string>();
  const sockets = new Set<Socket>();
  let sent = 0;
  const flags = { blockError: false, masternodesError: false };
  const native = opts.native ? nativeAnswers(flags) : undefined;

  const envelope = (item: Item, a: Answer): string =>
    'result' in a
      ? `{"jsonrpc":"2.0","id":${item.idText ?? 'null'},"result":${a.result}}`
      : `{"jsonrpc":"2.0","id":${item.idText ?? 'null'},"error":${JSON.stringify(a.error)}}`;

  /** One call's answer text, or undefined for a notification left unanswered. */
  const answer = async (item: Item): Promise<string | undefined> => {
    if (item.idText === undefined && opts.silentNotifications) return undefined;
    if (refuse.has(item.method)) return envelope(item, { error: { code: -32000, message: 'transaction refused by the test' } });
    const script = scripts.get(item.method);
    const scripted = script?.(item.params, (calls.get(item.method) ?? 1) - 1) ?? null;
    if (scripted !== null) return envelope(item, { result: scripted });
    const rawBody = raw.get(item.method);
    if (rawBody !== undefined) return rawBody;
    if (opts.forwardTo) {
      const res = await fetch(opts.forwardTo, { method: 'POST', headers: { 'content-type': 'application/json' }, body: item.raw });
      return (await res.text()).trim();
    }
    if (item.method === 'eth_blockNumber') return envelope(item, { result: `"0x${head.toString(16)}"` });
    if (native) return envelope(item, native(item.method, item.params));
    return envelope(item, { result: JSON.stringify({ method: item.method, params: item.params }) });
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      last = { path: req.url ?? '', headers: req.headers };
      const text = Buffer.concat(chunks).toString('utf8');
      let top: ReturnType<typeof topLevel> = { kind: 'other', parts: [] };
      try {
        top = topLevel(text);
      } catch {
        // not JSON: one (invalid) item
      }
      const items = top.kind === 'array' ? top.parts.map((p) => readItem(p.raw)) : [readItem(text.trim())];
      for (const it of items) {
        calls.set(it.method, (calls.get(it.method) ?? 0) + 1);
        log.push({ method: it.method, params: it.params });
      }
      const probe = items.length === 1 && items[0]?.method === 'eth_blockNumber' && top.kind === 'object';
      if (!probe) {
        bodies.push(text);
        requests.push({ body: text, headers: req.headers });
      }
      switch (mode) {
        case 'stall':
          return; // the socket is destroyed on close()
        case 'stallCalls':
          if (!probe) return;
          break;
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
      }
      let answers: string[];
      try {
        answers = (await Promise.all(items.map(answer))).filter((a): a is string => a !== undefined);
      } catch {
        res.writeHead(502).end(); // the node forwarded to did not answer
        return;
      }
      if (opts.batchOrder === 'reversed') answers.reverse();
      const send = () => {
        if (answers.length === 0) {
          res.writeHead(opts.silentNotifications ?? 200).end();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        if (!(items.length === 1 && items[0]?.method === 'eth_blockNumber')) res.once('close', () => sent++);
        res.end(top.kind === 'array' ? `[${answers.join(',')}]` : answers[0]);
      };
      if (delayMs > 0) setTimeout(send, delayMs);
      else send();
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
    log,
    bodies,
    requests,
    get last() {
      return last;
    },
    refuse,
    callCount: (method) => calls.get(method) ?? 0,
    answersSent: () => sent,
    totalCalls: () => [...calls].reduce((n, [m, c]) => (m === 'eth_blockNumber' ? n : n + c), 0),
    logWithoutProbes: () => log.filter((c) => c.method !== 'eth_blockNumber'),
    async setMode(next) {
      if (next === 'refuse') await stop();
      else if (!server.listening) {
        server.listen(port, '127.0.0.1');
        await once(server, 'listening');
      }
      // Leaving `stall`: let the held requests go (their sockets are reset).
      if (mode === 'stall' || mode === 'stallCalls') for (const s of sockets) s.destroy();
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
    setScript(method, script) {
      if (script === null) scripts.delete(method);
      else scripts.set(method, script);
    },
    setBlockError(on) {
      flags.blockError = on;
    },
    setMasternodesError(on) {
      flags.masternodesError = on;
    },
    close: stop,
  };
}

/** A node whose host takes no more connections: a TCP connect to it never completes. */
export interface DeafNode {
  readonly url: string;
  close(): Promise<void>;
}

/**
 * A node that never takes a connection, as an overloaded or half-dead host does (or an address
 * whose packets are dropped): a process listens with an accept queue of one and never accepts
 * (its event loop is held), and the queue is filled, so the kernel drops every later SYN and a
 * connect hangs until the client gives up.
 */
export async function startDeafNode(): Promise<DeafNode> {
  const script =
    "const s=require('node:net').createServer();s.listen({port:0,host:'127.0.0.1',backlog:1},()=>{require('node:fs').writeSync(1,s.address().port+'\\n');Atomics.wait(new Int32Array(new SharedArrayBuffer(4)),0,0)})";
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout, 'data')) as [Buffer];
  const port = Number(line.toString().trim());
  // Connections that fill the accept queue (connected in the kernel, never accepted).
  const fillers: Socket[] = [];
  for (let i = 0; i < 4; i++) {
    const s = connect({ port, host: '127.0.0.1' });
    s.on('error', () => {});
    fillers.push(s);
  }
  await new Promise((resolve) => setTimeout(resolve, 200));
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      for (const s of fillers) s.destroy();
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await once(child, 'exit');
      }
    },
  };
}
