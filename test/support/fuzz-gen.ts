// Fuzzing inside params, shared by test/rpc/fuzz.test.ts and bench/scenarios/fuzz.ts: well-formed JSON-RPC
// calls to real methods whose params are mutated the ways a node reads differently or chokes on
// (member names repeated, in other case or escaped; quantities past 64, 160 and 256 bits, negative,
// padded with zeros or not hex; nesting near and past the gateway's limit; long strings; NUL
// bytes; wrong types), the judge of one answer (C22, C23), and a WebSocket driver that sends one
// frame at a time and collects its answer. Seeded: the same seed gives the same messages.
import WebSocket from 'ws';

/** mulberry32: a small seeded PRNG, so a failure can be replayed with its seed. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface FuzzOptions {
  /** The gateway's nesting limit (MAX_NESTING in src/rpc/pipeline.ts): messages go just under, at and past it. */
  maxNesting: number;
  /** Items per batch the gateway takes (config rpc.maxBatchSize). */
  maxBatch: number;
  /** The largest message to make; a few go past it on purpose when `overLimit` is set. */
  maxBytes: number;
  /** Also make messages over `maxBytes` (HTTP: answered 413; a WebSocket closes with 1009 on them). */
  overLimit: boolean;
  /** The network is a native one (nat_* methods are its own). */
  native: boolean;
}

/** JSON text, written by hand where JSON.stringify cannot say it (repeated or escaped member names). */
type Text = string;

const HEX = '0123456789abcdef';
const ADDRESS = '0x8ba1f109551bd432803012645ac136ddd64dba72';
const HASH = `0x${'ab'.repeat(32)}`;

/** One generator of fuzzed messages. `message()` gives the next message as text. */
export function paramFuzzer(rand: () => number, opts: FuzzOptions) {
  const int = (n: number) => Math.floor(rand() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)] as T;
  const chance = (p: number) => rand() < p;
  const hex = (n: number) => Array.from({ length: n }, () => HEX[int(16)]).join('');
  const str = (s: string): Text => JSON.stringify(s);

  /** A string as JSON text, sometimes with what a node's decoder meets rarely. */
  const oddString = (): Text =>
    pick<() => Text>([
      () => str(`0x${hex(int(40))}\u0000`),
      () => str('\u0000'.repeat(1 + int(8))),
      () => '"\\u0000\\u0000"',
      () => '"\\ud800"', // a lone surrogate, legal in JSON text
      () => str('é😀\u2028\u2029'),
      () => str('a'.repeat(1 + int(2000))),
      () => str(`0x${hex(2 * int(4000))}`),
      () => str(''),
      () => '"\\"\\\\\\/\\b\\f\\n\\r\\t"',
    ])();

  /** A quantity as JSON text: normal, huge (2^64, 2^160, 2^256), negative, zero-padded, not hex, wrong type. */
  const quantity = (): Text =>
    pick<() => Text>([
      () => str(`0x${int(1000).toString(16)}`),
      () => str('0x0'),
      () => str(`0x${'0'.repeat(1 + int(70))}1`), // leading zeros
      () => str(`0x${'f'.repeat(16)}`), // 2^64-1
      () => str(`0x1${'0'.repeat(16)}`), // 2^64
      () => str(`0x1${'0'.repeat(40)}`), // 2^160
      () => str(`0x${'f'.repeat(40)}`), // 2^160-1
      () => str(`0x1${'0'.repeat(64)}`), // 2^256
      () => str(`0x${'f'.repeat(64)}`), // 2^256-1
      () => str(`0x${'f'.repeat(65 + int(200))}`), // past 256 bits
      () => str(`-0x${int(100).toString(16)}`),
      () => str('0x-1'),
      () => str('0xzz'),
      () => str('0x'),
      () => str(''),
      () => str('0X1F'),
      () => str(' 0x1'),
      () => str(String(int(1e6))),
      () => str('18446744073709551616'),
      () => String(int(1e6)),
      () => '-1',
      () => '18446744073709551616',
      () => '1e400',
      () => '1.5',
      () => '-0',
      () => oddString(),
      () => 'null',
      () => 'true',
      () => '[]',
      () => '{}',
    ])();

  /** A block number, tag or EIP-1898 object. */
  const block = (depth: number): Text =>
    pick<() => Text>([
      () => quantity(),
      () => str(pick(['latest', 'earliest', 'pending', 'safe', 'finalized'])),
      () => str(pick(['Latest', 'LATEST', 'latest\u0000', 'lates', 'finalised'])),
      () => object([['blockNumber', quantity()]], depth + 1),
      () => object([['blockHash', hashLike()], ['requireCanonical', pick(['true', 'false', '"true"', '1'])]], depth + 1),
      () => object([['blockNumber', quantity()], ['blockHash', hashLike()]], depth + 1),
    ])();

  const address = (): Text =>
    pick<() => Text>([
      () => str(ADDRESS),
      () => str(`0x${hex(40)}`),
      () => str(ADDRESS.toUpperCase().replace('0X', '0x')),
      () => str('0x8Ba1f109551bD432803012645Ac136ddd64DBA72'), // a bad checksum
      () => str(`xdc${hex(40)}`),
      () => str(`0x${hex(int(60))}`),
      () => str(hex(40)),
      () => str(`0x${hex(39)}\u0000`),
      () => quantity(),
    ])();

  const hashLike = (): Text =>
    pick<() => Text>([() => str(HASH), () => str(`0x${hex(64)}`), () => str(`0x${hex(int(100))}`), () => quantity(), () => oddString()])();

  const data = (): Text =>
    pick<() => Text>([() => str('0x'), () => str(`0x${hex(2 * int(200))}`), () => str(`0x${hex(1 + 2 * int(50))}`), () => str(`0x${hex(2 * (1000 + int(60_000)))}`), () => oddString()])();

  /** A member name, often mutated: other case, escaped letters, look-alikes. */
  const mutatedName = (name: string): string => {
    if (name.length === 0) return name;
    switch (int(9)) {
      case 0:
        return name.toUpperCase();
      case 1:
        return name.charAt(0).toUpperCase() + name.slice(1);
      case 2: {
        const i = int(name.length);
        return `${name.slice(0, i)}\\u${name.charCodeAt(i).toString(16).padStart(4, '0')}${name.slice(i + 1)}`;
      }
      case 3: {
        const i = int(name.length);
        return `${name.slice(0, i)}\\u${name.charCodeAt(i).toString(16).toUpperCase().padStart(4, '0')}${name.slice(i + 1)}`;
      }
      case 4:
        return `${name}\\u0000`;
      case 5:
        return pick(['__proto__', 'constructor', 'prototype', '', ' ', name + ' ']);
      default:
        return name;
    }
  };

  /** An object as text; members are sometimes repeated (as written, in another case or escaped) or renamed. */
  const object = (members: Array<[string, Text]>, depth: number): Text => {
    const out: string[] = [];
    for (const [name, value] of members) {
      if (chance(0.1)) continue; // a member left out
      out.push(`"${chance(0.15) ? mutatedName(name) : name}":${value}`);
      if (chance(0.12)) out.push(`"${chance(0.7) ? mutatedName(name) : name}":${chance(0.5) ? value : anyValue(depth + 1)}`);
    }
    if (chance(0.1)) out.push(`${str(pick(['extra', 'chainId', 'accessList', 'blobVersionedHashes', 'authorizationList', '\u0000']))}:${anyValue(depth + 1)}`);
    for (let k = out.length - 1; k > 0; k--) {
      if (chance(0.2)) {
        const j = int(k + 1);
        [out[k], out[j]] = [out[j] as string, out[k] as string];
      }
    }
    return `{${out.join(',')}}`;
  };

  const tx = (depth: number): Text =>
    object(
      [
        ['from', address()],
        ['to', chance(0.9) ? address() : 'null'],
        ['gas', quantity()],
        ['gasPrice', quantity()],
        ['maxFeePerGas', quantity()],
        ['maxPriorityFeePerGas', quantity()],
        ['value', quantity()],
        ['nonce', quantity()],
        [chance(0.5) ? 'data' : 'input', data()],
        ...(chance(0.2) ? ([['accessList', `[${object([['address', address()], ['storageKeys', `[${hashLike()}]`]], depth + 2)}]`]] as Array<[string, Text]>) : []),
      ],
      depth,
    );

  const filter = (depth: number): Text =>
    object(
      [
        ['fromBlock', block(depth)],
        ['toBlock', block(depth)],
        ['address', chance(0.7) ? address() : `[${Array.from({ length: int(chance(0.1) ? 2000 : 5) }, address).join(',')}]`],
        ['topics', `[${Array.from({ length: int(6) }, () => (chance(0.3) ? `[${hashLike()},${hashLike()}]` : chance(0.2) ? 'null' : hashLike())).join(',')}]`],
        ...(chance(0.2) ? ([['blockHash', hashLike()]] as Array<[string, Text]>) : []),
      ],
      depth,
    );

  /** Any JSON value, to put where it does not belong. */
  const anyValue = (depth: number): Text => {
    if (depth > 6) return pick(['null', '0', '""', 'true']);
    return pick<() => Text>([
      () => 'null',
      () => pick(['true', 'false']),
      () => quantity(),
      () => oddString(),
      () => address(),
      () => `[${Array.from({ length: int(4) }, () => anyValue(depth + 1)).join(',')}]`,
      () => object([['a', anyValue(depth + 1)], ['b', anyValue(depth + 1)]], depth + 1),
    ])();
  };

  /**
   * A value nested so that the whole message is `levels` deep: arrays and objects alternate, the
   * innermost is a scalar. `outer` levels are around it already (batch array, call object, params array).
   */
  const nested = (outer: number): Text => {
    const limit = opts.maxNesting;
    const levels = pick([limit - 2, limit - 1, limit, limit + 1, limit + 2, limit + 50, 10 * limit]) - outer;
    const useObjects = chance(0.5);
    let open = '';
    let close = '';
    for (let i = 0; i < levels; i++) {
      if (useObjects && i % 2 === 1) {
        open += `{"${pick(['a', 'to', 'T\\u006f'])}":`;
        close = `}${close}`;
      } else {
        open += '[';
        close = `]${close}`;
      }
    }
    return `${open}${pick(['1', '"x"', 'null', '{}', '[]'])}${close}`;
  };

  /** A state override's address, as a member name (written as JSON.stringify would). */
  const overrideAddress = (): string => {
    const a = JSON.parse(address()) as unknown;
    return typeof a === 'string' ? JSON.stringify(a).slice(1, -1) : ADDRESS;
  };

  type Params = (depth: number) => Text[];
  const METHODS: Array<[string, Params]> = [
    ['eth_getBalance', (d) => [address(), block(d)]],
    ['eth_getCode', (d) => [address(), block(d)]],
    ['eth_getTransactionCount', (d) => [address(), block(d)]],
    ['eth_getStorageAt', (d) => [address(), quantity(), block(d)]],
    ['eth_call', (d) => [tx(d + 1), block(d), ...(chance(0.1) ? [object([[overrideAddress(), object([['balance', quantity()], ['nonce', quantity()], ['code', data()]], d + 2)]], d + 1)] : [])]],
    ['eth_estimateGas', (d) => [tx(d + 1), ...(chance(0.5) ? [block(d)] : [])]],
    ['eth_createAccessList', (d) => [tx(d + 1), block(d)]],
    ['eth_getBlockByNumber', (d) => [block(d), pick(['true', 'false', '"true"', '1', 'null'])]],
    ['eth_getBlockByHash', () => [hashLike(), pick(['true', 'false'])]],
    ['eth_getBlockReceipts', (d) => [block(d)]],
    ['eth_getBlockTransactionCountByNumber', (d) => [block(d)]],
    ['eth_getTransactionByBlockNumberAndIndex', (d) => [block(d), quantity()]],
    ['eth_getUncleByBlockNumberAndIndex', (d) => [block(d), quantity()]],
    ['eth_getTransactionByHash', () => [hashLike()]],
    ['eth_getTransactionReceipt', () => [hashLike()]],
    ['eth_getLogs', (d) => [filter(d + 1)]],
    ['eth_newFilter', (d) => [filter(d + 1)]],
    ['eth_getFilterChanges', () => [quantity()]],
    ['eth_getFilterLogs', () => [quantity()]],
    ['eth_uninstallFilter', () => [quantity()]],
    ['eth_feeHistory', (d) => [quantity(), block(d), `[${Array.from({ length: int(chance(0.1) ? 500 : 6) }, () => pick(['10', '50', '99.9', '-1', '101', '1e300', '"50"'])).join(',')}]`]],
    ['eth_getProof', (d) => [address(), `[${Array.from({ length: int(chance(0.1) ? 200 : 4) }, hashLike).join(',')}]`, block(d)]],
    ['eth_sendRawTransaction', () => [data()]],
    ['web3_sha3', () => [data()]],
    ['eth_chainId', () => []],
    ['eth_blockNumber', () => []],
    ['eth_gasPrice', () => []],
    ['net_version', () => []],
    ['eth_subscribe', (d) => [str(pick(['newHeads', 'logs', 'newPendingTransactions', 'syncing', 'NewHeads', 'bogus'])), ...(chance(0.5) ? [filter(d + 1)] : [])]],
    ['eth_unsubscribe', () => [chance(0.5) ? str(`0x${hex(32)}`) : quantity()]],
    ...(opts.native
      ? ([
          ['nat_getBlockByNumber', (d: number) => [block(d)]],
          ['nat_getMasternodes', (d: number) => [block(d)]],
          ['nat_getCandidates', (d: number) => [block(d)]],
          ['nat_getVoterReward', () => [hashLike()]],
        ] as Array<[string, Params]>)
      : []),
  ];

  let nextId = 1;
  /** One call as text; `depth` levels are around it (1 inside a batch). */
  const call = (depth: number, notification: boolean): Text => {
    const [method, params] = pick(METHODS);
    const inner = depth + 2; // the call object and the params array
    let paramsText: Text;
    const shape = int(20);
    if (shape === 0) paramsText = nested(inner - 1); // params itself the deep value
    else if (shape === 1) paramsText = anyValue(inner); // not an array: object, scalar, string
    else if (shape === 2) paramsText = `[${params(inner).map((p) => (chance(0.5) ? anyValue(inner) : p)).join(',')}]`; // wrong types in slots
    else if (shape === 3) paramsText = `[${[...params(inner), anyValue(inner), anyValue(inner)].join(',')}]`; // too many
    else if (shape === 4) paramsText = `[${params(inner).slice(0, -1).join(',')}]`; // too few
    else if (shape === 5) paramsText = `[${params(inner).map((p, i) => (i === 0 ? nested(inner) : p)).join(',')}]`; // a deep slot
    else paramsText = `[${params(inner).join(',')}]`;
    const id = notification ? '' : `,"id":${pick([String(nextId++), `"s-${nextId++}"`, 'null'])}`;
    return `{"jsonrpc":"2.0","method":${str(method)},"params":${paramsText}${id}}`;
  };

  /** The next message: a single call or a batch (sometimes past the batch limit), now and then a long one. */
  const message = (): Text => {
    let text: Text;
    if (chance(0.65)) text = call(0, chance(0.03));
    else {
      const n = chance(0.05) ? opts.maxBatch + 1 + int(5) : chance(0.03) ? 0 : 1 + int(8);
      text = `[${Array.from({ length: n }, () => call(1, chance(0.05))).join(',')}]`;
    }
    if (opts.overLimit && chance(0.005)) {
      // Past the size limit: one call whose data fills it.
      text = `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"${ADDRESS}","data":"0x${'00'.repeat(Math.ceil(opts.maxBytes / 2) + 10)}"},"latest"]}`;
    }
    if (Buffer.byteLength(text) > opts.maxBytes && !opts.overLimit) return message();
    return text;
  };

  return { message };
}

/** The error codes the gateway itself answers with (C22); a node's own codes are passed on as they are. */
export const GATEWAY_CODES: ReadonlySet<number> = new Set([-32700, -32600, -32601, -32602, -32000, -32001, -32002, -32003, -32004, -32005, -32006]);

export interface Verdict {
  /** What is wrong with the answer; empty when it is sane. */
  problems: string[];
  /** The JSON-RPC error codes in the answer, one per error item. */
  codes: number[];
  /** Items answered with a result. */
  results: number;
  /** The error messages, one per error item (for tallies of who refused what). */
  messages: string[];
}

const validId = (v: unknown) => v === null || typeof v === 'string' || typeof v === 'number';

/** What a call object expects back: its id, or nothing for a notification. */
function expectedOf(item: unknown): { id: unknown } | null {
  if (item !== null && typeof item === 'object' && !Array.isArray(item)) {
    const params = (item as { params?: unknown }).params;
    // A notification is not answered, unless it is not a valid call (params neither an array, an object nor absent): then one error, id null.
    if (!Object.hasOwn(item, 'id')) return params === undefined || (typeof params === 'object') ? null : { id: null };
    const id = (item as { id: unknown }).id;
    return { id: validId(id) ? id : null };
  }
  return { id: null };
}

/**
 * Judges one answer to `request` (C22, C23): `status` is the HTTP status (undefined over a
 * WebSocket), `answer` the text or null when nothing came back. Sane is: no 5xx but 502 (and a 502
 * only with -32000), JSON, one answer per call that has an id, with that id and in order, or one
 * error for the whole message with id null (not JSON, nested too deep, too large, an empty or too
 * long batch, or a refusal of the whole batch). A single call's answer carries its id unless the
 * message is one the gateway cannot read the id of (`limits`: nested too deep, too large).
 */
export function judge(request: string, status: number | undefined, answer: string | null, limits: { maxNesting: number; maxBytes: number }): Verdict {
  const problems: string[] = [];
  const codes: number[] = [];
  const messages: string[] = [];
  let results = 0;
  const done = () => ({ problems, codes, results, messages });
  if (status !== undefined && status >= 500 && status !== 502) problems.push(`HTTP ${status}`);
  let req: unknown;
  let parsedRequest = true;
  try {
    req = JSON.parse(request);
  } catch {
    parsedRequest = false;
  }
  const calls = parsedRequest ? (Array.isArray(req) ? req : [req]) : [];
  const expected = calls.map(expectedOf).filter((e) => e !== null);
  if (answer === null || answer === '') {
    if (status !== undefined && status !== 204 && status !== 200) problems.push(`HTTP ${status} without a body`);
    if (!parsedRequest || expected.length > 0 || (Array.isArray(req) && req.length === 0)) problems.push('no answer');
    return done();
  }
  let got: unknown;
  try {
    got = JSON.parse(answer);
  } catch {
    problems.push(`answer is not JSON: ${answer.slice(0, 120)}`);
    return done();
  }
  const items = (Array.isArray(got) ? got : [got]) as Array<{ id?: unknown; error?: { code?: unknown }; result?: unknown }>;
  for (const i of items) {
    if (i === null || typeof i !== 'object') {
      problems.push('an answer item is not an object');
      continue;
    }
    if (i.error !== undefined) {
      if (typeof i.error?.code !== 'number' || !Number.isInteger(i.error.code)) problems.push(`error without an integer code: ${JSON.stringify(i.error).slice(0, 120)}`);
      else codes.push(i.error.code);
      messages.push(String((i.error as { message?: unknown }).message));
    } else if ('result' in i) results++;
    else problems.push(`item with neither result nor error: ${JSON.stringify(i).slice(0, 120)}`);
  }
  if (status === 502 && !items.every((i) => i.error === undefined || i.error.code === -32000)) problems.push('502 without -32000');
  // One error for the whole message, id null.
  const whole = !Array.isArray(got) && items[0]?.error !== undefined && items[0]?.id === null;
  if (!parsedRequest) {
    if (!whole) problems.push('a request that is not JSON is not answered with one error, id null');
    return done();
  }
  if (Array.isArray(req)) {
    if (whole) return done();
    if (!Array.isArray(got)) {
      problems.push('a batch answered with one item that is not an error with id null');
      return done();
    }
    const ids = items.map((i) => i.id);
    const want = expected.map((e) => e.id);
    if (JSON.stringify(ids) !== JSON.stringify(want)) problems.push(`batch ids ${JSON.stringify(ids).slice(0, 200)} where ${JSON.stringify(want).slice(0, 200)} were sent`);
    return done();
  }
  if (Array.isArray(got)) {
    problems.push('a single call answered with an array');
    return done();
  }
  const want = expected[0];
  const item = items[0];
  if (want === undefined) {
    if (!whole) problems.push('a notification answered with something else than an error with id null');
  } else if (JSON.stringify(item?.id) !== JSON.stringify(want.id) && !(whole && item?.error?.code === -32600 && unreadable(request, status, limits))) {
    problems.push(`id ${JSON.stringify(item?.id)} where ${JSON.stringify(want.id)} was sent`);
  }
  return done();
}

/** Levels of arrays and objects in JSON text (strings jumped over). */
export function nesting(t: string): number {
  let depth = 0;
  let max = 0;
  for (let j = 0; j < t.length; j++) {
    const c = t.charCodeAt(j);
    if (c === 0x22) {
      for (j++; j < t.length && t.charCodeAt(j) !== 0x22; j++) if (t.charCodeAt(j) === 0x5c) j++;
    } else if (c === 0x7b || c === 0x5b) max = Math.max(max, ++depth);
    else if (c === 0x7d || c === 0x5d) depth--;
  }
  return max;
}

/** A message the gateway refuses before reading its id (C23): nested too deep, or over the size limit. */
function unreadable(request: string, status: number | undefined, limits: { maxNesting: number; maxBytes: number }): boolean {
  return status === 413 || Buffer.byteLength(request) > limits.maxBytes || nesting(request) > limits.maxNesting;
}

/** What a message expects back over a WebSocket: one answer, or none when every call is a notification. */
export function expectsAnswer(request: string): boolean {
  let req: unknown;
  try {
    req = JSON.parse(request);
  } catch {
    return true;
  }
  if (Array.isArray(req)) return req.length === 0 || req.some((c) => expectedOf(c) !== null);
  return expectedOf(req) !== null;
}

const rawText = (data: WebSocket.RawData): string => (Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data)).toString();

/**
 * A WebSocket that sends fuzzed frames one at a time: each is followed by a sentinel call, and the
 * frame's answer is the one message that is neither the sentinel's answer nor a subscription
 * notification (messages are answered concurrently, so it may come after the sentinel's).
 */
export class WsFuzzChannel {
  readonly #ws: WebSocket;
  #inbox: string[] = [];
  #wake: (() => void) | undefined;
  #sentinel = 0;
  closed: { code: number; reason: string } | undefined;

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.on('message', (data) => {
      const text = rawText(data);
      if (text.includes('"eth_subscription"') && /^\{"jsonrpc":"2.0","method":"eth_subscription"/.test(text)) return;
      this.#inbox.push(text);
      this.#wake?.();
    });
    ws.on('close', (code, reason) => {
      this.closed = { code, reason: String(reason) };
      this.#wake?.();
    });
    ws.on('error', () => {});
  }

  static open(url: string, headers: Record<string, string> = {}): Promise<WsFuzzChannel> {
    const ws = new WebSocket(url, { headers, maxPayload: 256 * 1024 * 1024 });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new WsFuzzChannel(ws)));
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => reject(new Error(`upgrade refused: ${res.statusCode} ${body}`)));
      });
      ws.once('error', reject);
    });
  }

  async #until(done: () => boolean, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      if (this.closed || Date.now() > deadline) return false;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    return true;
  }

  /**
   * Sends `frame`, then a sentinel, and gives the frame's answer (null when it has none), or
   * `closed`/`timeout` when the connection ended or the answers did not come (a hang guard, not a
   * timing check).
   */
  async send(frame: string, timeoutMs = 60_000): Promise<{ answer: string | null } | { failed: 'closed' | 'timeout' }> {
    const sentinelId = `fuzz-sentinel-${++this.#sentinel}`;
    const wantAnswer = expectsAnswer(frame);
    this.#ws.send(frame);
    this.#ws.send(`{"jsonrpc":"2.0","id":"${sentinelId}","method":"eth_chainId","params":[]}`);
    const isSentinel = (t: string) => t.includes(`"${sentinelId}"`) && t.startsWith('{') && (JSON.parse(t) as { id?: unknown }).id === sentinelId;
    const ok = await this.#until(() => this.#inbox.some(isSentinel) && (!wantAnswer || this.#inbox.some((t) => !isSentinel(t))), timeoutMs);
    if (!ok) return { failed: this.closed ? 'closed' : 'timeout' };
    const others = this.#inbox.filter((t) => !isSentinel(t));
    this.#inbox = [];
    // An unexpected second answer (or one to a frame of notifications) is reported with the frame.
    if (others.length > 1) return { answer: `[${others.join(',')}]-more-than-one-answer` };
    return { answer: others[0] ?? null };
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      this.#ws.once('close', () => resolve());
      this.#ws.close();
    });
  }
}
