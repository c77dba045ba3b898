import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

const FIXTURES = new URL('../fixtures/native/', import.meta.url);

/**
 * Fixture texts, sent byte for byte: the real node writes wei amounts as bare JSON numbers
 * beyond 2^53, and a parse-and-serialise round trip here would already round them.
 */
function fixture(name: string): string {
  return readFileSync(new URL(`${name}.json`, FIXTURES), 'utf8').trim();
}

/** Epoch -> raw JSON of its `XDPoS_getBlockInfoByEpochNum` answer. */
function epochInfos(): Map<number, { text: string; hash: string }> {
  const parsed = JSON.parse(fixture('epoch-info')) as Record<string, { hash: string }>;
  return new Map(Object.entries(parsed).map(([epoch, info]) => [Number(epoch), { text: JSON.stringify(info), hash: info.hash }]));
}

/** The epoch whose block has a reward record in `rewards.json`; other known epochs have none. */
export const REWARD_EPOCH = 89300;
/** An epoch the node knows, whose block has no reward record (the node answers `{}`). */
export const EPOCH_WITHOUT_REWARDS = 89301;

export interface NativeCall {
  method: string;
  params: unknown;
}

export interface FakeNativeNode {
  /** `http://127.0.0.1:PORT` */
  readonly url: string;
  /** Every JSON-RPC call received, in order. */
  readonly calls: NativeCall[];
  /** Calls other than the `eth_blockNumber` health probes. */
  nativeCalls(): NativeCall[];
  /** On: `XDPoS_getV2BlockByNumber` answers a block whose `Error` is set, as for an unknown number. */
  setBlockError(on: boolean): void;
  /** On: `XDPoS_getMasternodesByNumber` answers with `Error: {}` (how Go marshals its error value). */
  setMasternodesError(on: boolean): void;
  close(): Promise<void>;
}

/**
 * A native (XDC-like) node on 127.0.0.1, port 0, answering the XDPoS methods the gateway
 * translates `nat_*` calls to with fixtures of the real shapes (test/fixtures/native).
 * Unknown methods get the node's -32601 error.
 */
export async function startFakeNativeNode(): Promise<FakeNativeNode> {
  const texts = {
    block: fixture('v2-block'),
    blockError: fixture('v2-block-error'),
    candidates: fixture('candidates'),
    masternodes: fixture('masternodes'),
    masternodesError: fixture('masternodes-error'),
    rewards: fixture('rewards'),
  };
  const epochs = epochInfos();
  const rewardHash = epochs.get(REWARD_EPOCH)?.hash;
  const calls: NativeCall[] = [];
  const sockets = new Set<Socket>();
  let blockError = false;
  let masternodesError = false;

  const answer = (method: string, params: unknown[]): { result: string } | { error: { code: number; message: string } } => {
    switch (method) {
      case 'eth_blockNumber':
        return { result: '"0x4ca5e22"' };
      case 'XDPoS_getV2BlockByNumber':
        return { result: blockError ? texts.blockError : texts.block };
      case 'eth_getCandidates':
        return { result: texts.candidates };
      case 'XDPoS_getMasternodesByNumber':
        return { result: masternodesError ? texts.masternodesError : texts.masternodes };
      case 'XDPoS_getBlockInfoByEpochNum': {
        // The node decodes a uint64: a JSON number, not a string.
        const epoch = params[0];
        if (typeof epoch !== 'number') {
          return { error: { code: -32602, message: 'invalid argument 0: json: cannot unmarshal string into Go value of type uint64' } };
        }
        const info = epochs.get(epoch);
        return info ? { result: info.text } : { error: { code: -32000, message: `epoch ${epoch} is not reached yet` } };
      }
      case 'eth_getRewardByHash':
        return { result: params[0] === rewardHash ? texts.rewards : '{}' };
      default:
        return { error: { code: -32601, message: `the method ${method} does not exist/is not available` } };
    }
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let parsed: { id?: unknown; method?: unknown; params?: unknown } | undefined;
      try {
        parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        parsed = undefined;
      }
      const method = typeof parsed?.method === 'string' ? parsed.method : '(invalid)';
      const params = Array.isArray(parsed?.params) ? parsed.params : [];
      calls.push({ method, params: parsed?.params });
      const out = answer(method, params);
      const id = JSON.stringify(parsed?.id ?? null);
      const body =
        'result' in out
          ? `{"jsonrpc":"2.0","id":${id},"result":${out.result}}`
          : JSON.stringify({ jsonrpc: '2.0', id: parsed?.id ?? null, error: out.error });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
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
    nativeCalls: () => calls.filter((c) => c.method !== 'eth_blockNumber'),
    setBlockError(on) {
      blockError = on;
    },
    setMasternodesError(on) {
      masternodesError = on;
    },
    async close() {
      if (!server.listening) return;
      const closed = once(server, 'close');
      server.close();
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}
