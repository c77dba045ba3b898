// The native devnet chains answer the XDPoS methods behind `nat_*` (C25, C31): anvil has none, so
// a small responder sits in front of each native chain's anvil. It answers the consensus methods
// from the chain itself and passes every other request to anvil byte for byte.
//
// What it derives, and how (a devnet, not a consensus engine):
// - epochs of `epochBlocks` blocks (epoch e spans blocks e*N+1 .. (e+1)*N; block 0 is epoch 0);
// - the round of a block is its number (no timeouts on a devnet);
// - masternodes are the first `masternodes` dev accounts, standby nodes the next `standby` ones;
//   the masternode of round r signs (mines) block r: masternodes[r % count];
// - a candidate's capacity is its balance on the chain at the epoch's first block;
// - the reward record kept at an epoch's first block pays the epoch before it: `rewardPerEpoch`
//   shared by the blocks each masternode signed; 90% to the masternode owner, 10% to the
//   foundation address, as XDC nodes record it.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { toRlp, type Hex } from 'viem';
import { DevnetError } from '../errors/devnet.ts';
import { InvalidParamsError } from '../errors/rpc.ts';

export interface XdposResponderOptions {
  /** anvil's HTTP address. */
  anvilUrl: string;
  /** Dev account addresses, in order; the first ones are the masternodes. */
  accounts: readonly string[];
  /** Blocks per epoch; 30 by default so that epochs turn within a minute of a devnet's life. */
  epochBlocks?: number;
  /** How many accounts are masternodes (3 by default) and standby nodes (2). */
  masternodes?: number;
  standby?: number;
  /** Wei shared among an epoch's signers; 250 coins by default. */
  rewardPerEpochWei?: bigint;
}

export interface XdposResponder {
  url: string;
  close(): Promise<void>;
}

/** The foundation's share of each reward, as on XDC (address 0x…68). */
export const FOUNDATION_ADDRESS = '0x0000000000000000000000000000000000000068';
/** Blocks a v2 block needs on top of it before it is committed (the three-chain rule). */
const COMMIT_DEPTH = 3;

const HANDLED = new Set([
  'XDPoS_getV2BlockByNumber',
  'XDPoS_getMasternodesByNumber',
  'XDPoS_getBlockInfoByEpochNum',
  'eth_getCandidates',
  'eth_getRewardByHash',
]);

interface RpcItem {
  jsonrpc?: unknown;
  id?: unknown;
  method?: unknown;
  params?: unknown;
}

interface Block {
  number: Hex;
  hash: Hex;
  parentHash: Hex;
  sha3Uncles: Hex;
  miner: Hex;
  stateRoot: Hex;
  transactionsRoot: Hex;
  receiptsRoot: Hex;
  logsBloom: Hex;
  difficulty: Hex;
  gasLimit: Hex;
  gasUsed: Hex;
  timestamp: Hex;
  extraData: Hex;
  mixHash: Hex;
  nonce: Hex;
}

/** Bigint values are written as bare JSON numbers, as the node writes wei amounts. */
function stringify(value: unknown): string {
  const marks: string[] = [];
  const text = JSON.stringify(value, (_k, v: unknown) => {
    if (typeof v !== 'bigint') return v;
    marks.push(v.toString());
    return `\u0000big${marks.length - 1}\u0000`;
  });
  return text.replace(/"\\u0000big(\d+)\\u0000"/g, (_m, i: string) => marks[Number(i)] ?? '0');
}

const xdc = (address: string): string => `xdc${address.slice(2).toLowerCase()}`;
const ZERO_HASH = `0x${'0'.repeat(64)}`;

export async function startXdposResponder(opts: XdposResponderOptions): Promise<XdposResponder> {
  const epochBlocks = opts.epochBlocks ?? 30;
  const masternodes = opts.accounts.slice(0, opts.masternodes ?? 3).map((a) => a.toLowerCase());
  const standby = opts.accounts.slice(masternodes.length, masternodes.length + (opts.standby ?? 2)).map((a) => a.toLowerCase());
  const rewardPerEpoch = opts.rewardPerEpochWei ?? 250n * 10n ** 18n;
  let nextId = 1;

  async function anvil(body: string): Promise<{ status: number; text: string }> {
    const res = await fetch(opts.anvilUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(10_000) });
    return { status: res.status, text: await res.text() };
  }

  async function call<T>(method: string, params: unknown[]): Promise<T> {
    const { text } = await anvil(JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }));
    const answer = JSON.parse(text) as { result?: T; error?: { message?: string } };
    if (answer.error) throw new DevnetError(answer.error.message ?? `${method} failed`);
    return answer.result as T;
  }

  const head = async (): Promise<number> => Number(await call<string>('eth_blockNumber', []));
  const blockAt = (tag: string | number): Promise<Block | null> =>
    call<Block | null>('eth_getBlockByNumber', [typeof tag === 'number' ? `0x${tag.toString(16)}` : tag, false]);
  const epochOf = (n: number): number => (n === 0 ? 0 : Math.floor((n - 1) / epochBlocks));
  const firstBlockOf = (epoch: number): number => (epoch === 0 ? 0 : epoch * epochBlocks + 1);
  const signerOf = (round: number): string => masternodes[round % masternodes.length] ?? masternodes[0] ?? FOUNDATION_ADDRESS;

  function blockTag(value: unknown): string | number {
    if (value === undefined || value === 'latest' || value === 'pending' || value === 'finalized') return 'latest';
    if (value === 'earliest') return 0;
    if (typeof value === 'string' && /^0x[0-9a-fA-F]+$/.test(value)) return Number(BigInt(value));
    if (typeof value === 'number') return value;
    throw new InvalidParamsError('invalid block number');
  }

  async function v2Block(params: unknown[]): Promise<unknown> {
    const tag = blockTag(params[0]);
    const block = await blockAt(tag);
    if (!block) {
      return {
        Hash: ZERO_HASH, Round: 0, Number: typeof tag === 'number' ? tag : 0, ParentHash: ZERO_HASH, Committed: false,
        Miner: ZERO_HASH, Timestamp: 0, EncodedRLP: '', Error: 'can not find block from this number',
      };
    }
    const number = Number(block.number);
    const latest = await head();
    const signer = signerOf(number);
    const header: Hex[] = [
      block.parentHash, block.sha3Uncles, signer as Hex, block.stateRoot, block.transactionsRoot, block.receiptsRoot,
      block.logsBloom, block.difficulty, block.number, block.gasLimit, block.gasUsed, block.timestamp, block.extraData,
      block.mixHash, block.nonce,
    ].map((h) => (/^0x0*$/.test(h) ? '0x' : h));
    return {
      Hash: block.hash,
      Round: number,
      Number: number,
      ParentHash: block.parentHash,
      Committed: number + COMMIT_DEPTH <= latest,
      Miner: `0x${'0'.repeat(24)}${signer.slice(2)}`,
      Timestamp: Number(block.timestamp),
      EncodedRLP: Buffer.from(toRlp(header).slice(2), 'hex').toString('base64'),
      Error: '',
    };
  }

  async function masternodesAt(params: unknown[]): Promise<unknown> {
    const block = await blockAt(blockTag(params[0]));
    if (!block) {
      return { Epoch: 0, Number: 0, Round: 0, MasternodesLen: 0, Masternodes: null, PenaltyLen: 0, Penalty: null, StandbynodesLen: 0, Standbynodes: null, Error: {} };
    }
    const number = Number(block.number);
    return {
      Epoch: epochOf(number),
      Number: number,
      Round: number,
      MasternodesLen: masternodes.length,
      Masternodes: masternodes.map(xdc),
      PenaltyLen: 0,
      Penalty: [],
      StandbynodesLen: standby.length,
      Standbynodes: standby.map(xdc),
      Error: null,
    };
  }

  async function candidates(params: unknown[]): Promise<unknown> {
    const latest = await head();
    const current = epochOf(latest);
    const asked = params[0] === undefined || params[0] === 'latest' ? current : Number(params[0]);
    if (!Number.isSafeInteger(asked) || asked < 0 || asked > current) return { candidates: {}, epoch: asked, success: false };
    const at = `0x${firstBlockOf(asked).toString(16)}`;
    const out: Record<string, { capacity: bigint; status: string }> = {};
    await Promise.all(
      [...masternodes.map((a) => [a, 'MASTERNODE'] as const), ...standby.map((a) => [a, 'PROPOSED'] as const)].map(async ([address, status]) => {
        out[xdc(address)] = { capacity: BigInt(await call<string>('eth_getBalance', [address, at])), status };
      }),
    );
    return { candidates: out, epoch: asked, success: true };
  }

  async function epochInfo(params: unknown[]): Promise<unknown> {
    const epoch = Number(params[0]);
    if (!Number.isSafeInteger(epoch) || epoch < 0) throw new InvalidParamsError('invalid epoch number');
    const first = firstBlockOf(epoch);
    const block = await blockAt(first);
    if (!block) throw new DevnetError(`epoch ${epoch} has not started`);
    return { hash: block.hash, round: first, firstBlock: first, lastBlock: epoch === 0 ? 0 : first + epochBlocks - 1 };
  }

  async function rewards(params: unknown[]): Promise<unknown> {
    const hash = params[0];
    if (typeof hash !== 'string') throw new InvalidParamsError('invalid block hash');
    const block = await call<Block | null>('eth_getBlockByHash', [hash, false]);
    if (!block) return {};
    const number = Number(block.number);
    const epoch = epochOf(number);
    // Records are kept at the first block of an epoch, for the epoch before it.
    if (epoch < 1 || number !== firstBlockOf(epoch)) return {};
    const from = firstBlockOf(epoch - 1);
    const to = number - 1;
    const signs = new Map<string, number>();
    for (let n = Math.max(from, 1); n <= to; n++) signs.set(signerOf(n), (signs.get(signerOf(n)) ?? 0) + 1);
    const total = [...signs.values()].reduce((a, b) => a + b, 0);
    const signers: Record<string, { sign: number; reward: bigint }> = {};
    const paid: Record<string, Record<string, bigint>> = {};
    for (const [address, sign] of signs) {
      const reward = total === 0 ? 0n : (rewardPerEpoch * BigInt(sign)) / BigInt(total);
      signers[xdc(address)] = { sign, reward };
      const foundation = reward / 10n;
      paid[xdc(address)] = { [xdc(address)]: reward - foundation, [xdc(FOUNDATION_ADDRESS)]: foundation };
    }
    return { signers, rewards: paid };
  }

  const handlers: Record<string, (params: unknown[]) => Promise<unknown>> = {
    XDPoS_getV2BlockByNumber: v2Block,
    XDPoS_getMasternodesByNumber: masternodesAt,
    XDPoS_getBlockInfoByEpochNum: epochInfo,
    eth_getCandidates: candidates,
    eth_getRewardByHash: rewards,
  };

  async function answer(item: RpcItem): Promise<string> {
    const id = stringify(item.id ?? null);
    const handler = typeof item.method === 'string' ? handlers[item.method] : undefined;
    if (!handler) {
      const { text } = await anvil(JSON.stringify(item));
      return text.trim();
    }
    try {
      const result = await handler(Array.isArray(item.params) ? item.params : []);
      return `{"jsonrpc":"2.0","id":${id},"result":${stringify(result)}}`;
    } catch (err) {
      const code = (err as { code?: number }).code ?? -32000;
      return `{"jsonrpc":"2.0","id":${id},"error":${JSON.stringify({ code, message: (err as Error).message })}}`;
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      parsed = undefined;
    }
    const items = Array.isArray(parsed) ? (parsed as RpcItem[]) : [parsed as RpcItem];
    // Nothing for the responder: anvil answers as it is (the block follower's batches stay one request).
    if (parsed === undefined || !items.some((i) => typeof i?.method === 'string' && HANDLED.has(i.method))) {
      const { status, text } = await anvil(body);
      res.writeHead(status, { 'content-type': 'application/json' }).end(text);
      return;
    }
    const answers = await Promise.all(items.map(answer));
    res.writeHead(200, { 'content-type': 'application/json' }).end(Array.isArray(parsed) ? `[${answers.join(',')}]` : answers[0]);
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: `devnet responder: ${(err as Error).message}` } }));
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
