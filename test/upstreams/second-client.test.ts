// The gateway in front of two node implementations, anvil and Hardhat's node (EDR): the same
// standard calls give answers of the same shape from either, each client's errors reach the caller
// as the node wrote them (C22), the provider-error table (C26) classifies both clients' errors the
// same way, and a network of the two fails over both ways (C26). Each node is started once for the
// file; the gateway and the signing (viem) are the real ones.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { encodeFunctionData, type Hex, keccak256, parseGwei, toFunctionSelector, type TransactionSerializableEIP1559 } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { classifyTxAnswer } from '../../src/upstreams/http/broadcast.ts';
import { ProviderErrors } from '../../src/upstreams/http/provider-errors.ts';
import { type BareAnvil, startAnvil } from '../support/anvil.ts';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type BareHardhat, startHardhat } from '../support/hardhat.ts';
import { TINY_ABI, TINY_BYTECODE, TINY_REVERTING_CALLDATA } from '../support/tiny-contract.ts';
import { freePort, waitFor } from '../support/wait.ts';
import { call, pool } from './helpers.ts';

// The first dev account of both nodes (the same mnemonic), and the one after it.
const DEV = privateKeyToAccount('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80');
const OTHER = privateKeyToAccount('0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d');
const CHAIN_ID = 31337; // both nodes' chain id; the gateway answers eth_chainId with its network's own
const ADMIN = 'admin-token-for-second-client-tests';
const UNKNOWN_HASH: Hex = `0x${'ab'.repeat(32)}`;
const VALUE = encodeFunctionData({ abi: TINY_ABI, functionName: 'value' });
const STORE_7 = encodeFunctionData({ abi: TINY_ABI, functionName: 'store', args: [7n] });
// Nonce 0 of DEV deploys the tiny contract at the same address on both chains.
const CONTRACT: Hex = '0x5fbdb2315678afecb367f032d93f642f64180aa3';
const NOPE = toFunctionSelector('Nope()').slice(2); // the custom error's selector, in a revert's data

const CLIENTS = ['anvil', 'hardhat'] as const;
type Client = (typeof CLIENTS)[number];
// One network per client alone, one with both (anvil listed first).
const NETWORK: Record<Client | 'both', string> = { anvil: 'ethereum', hardhat: 'polygon', both: 'base' };

interface RpcError {
  code: number;
  message: string;
  data?: unknown;
}
interface Answer {
  id?: unknown;
  result?: unknown;
  error?: RpcError;
}

/** A signed EIP-1559 transaction of `from` on both chains (the same bytes for each). */
function sign(from: typeof DEV, tx: Omit<TransactionSerializableEIP1559, 'chainId' | 'type' | 'maxFeePerGas' | 'maxPriorityFeePerGas'>): Promise<Hex> {
  return from.signTransaction({ ...tx, type: 'eip1559', chainId: CHAIN_ID, maxFeePerGas: parseGwei('20'), maxPriorityFeePerGas: parseGwei('1') });
}

/**
 * The JSON shape of a value: its JSON type, the members of an object (sorted), the distinct
 * shapes of an array's items. Values may differ between clients; shapes should not.
 */
type Shape = string | Shape[] | { [member: string]: Shape };
function shape(v: unknown): Shape {
  if (v === null) return 'null';
  if (Array.isArray(v)) {
    const seen = new Map<string, Shape>();
    for (const item of v) {
      const s = shape(item);
      seen.set(JSON.stringify(s), s);
    }
    return [...seen.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, s]) => s);
  }
  if (typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return Object.fromEntries(Object.keys(o).sort().map((k) => [k, shape(o[k])]));
  }
  return typeof v;
}

/** Where two shapes differ, as `path: what`, sorted. */
function differences(a: Shape, b: Shape, path = 'result'): string[] {
  const kind = (s: Shape) => (typeof s === 'string' ? s : Array.isArray(s) ? 'array' : 'object');
  if (kind(a) !== kind(b)) return [`${path}: ${kind(a)} on anvil, ${kind(b)} on hardhat`];
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length === 1 && b.length === 1) return differences(a[0] as Shape, b[0] as Shape, `${path}[]`);
    return JSON.stringify(a) === JSON.stringify(b) ? [] : [`${path}[]: items of other shapes`];
  }
  if (typeof a === 'object' && typeof b === 'object' && !Array.isArray(a) && !Array.isArray(b)) {
    const out: string[] = [];
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
      if (!(k in b)) out.push(`${path}.${k}: anvil only`);
      else if (!(k in a)) out.push(`${path}.${k}: hardhat only`);
      else out.push(...differences(a[k] as Shape, b[k] as Shape, `${path}.${k}`));
    }
    return out.sort();
  }
  return [];
}

/**
 * The members one client gives and the other does not, for the calls where the two differ
 * (docs/rpc.md lists them). Every other call, and every member both give, has the same JSON type
 * on both.
 */
const KNOWN_DIFFERENCES: Record<string, string[]> = {
  // anvil adds `blockTimestamp` to logs, receipts and a block's transactions, and `blobGasPrice`
  // to every receipt (the specification: blob transactions only); Hardhat leaves out the optional
  // blob members of eth_feeHistory, and a full block's typed transactions have its deprecated `v`
  // without the `yParity` the specification requires.
  eth_getBlockByNumber: ['result.transactions[].blockTimestamp: anvil only', 'result.transactions[].yParity: anvil only'],
  eth_getTransactionReceipt: ['result.blobGasPrice: anvil only', 'result.blockTimestamp: anvil only', 'result.logs[].blockTimestamp: anvil only'],
  eth_getLogs: ['result[].blockTimestamp: anvil only'],
  eth_feeHistory: ['result.baseFeePerBlobGas: anvil only', 'result.blobGasUsedRatio: anvil only'],
};

describe('a second node implementation: anvil and Hardhat behind the gateway (C26)', () => {
  let anvil: BareAnvil;
  let hardhat: BareHardhat;
  let t: TestApp;
  let key: string;
  let deployHash: Hex;
  let storeHash: Hex;
  const direct: Record<Client, string> = { anvil: '', hardhat: '' };

  before(async () => {
    // The nodes start while the gateway does, on ports chosen first (a network's upstreams are
    // not asked before its first call).
    const [anvilPort, hardhatPort] = [await freePort(), await freePort()];
    direct.anvil = `http://127.0.0.1:${anvilPort}`;
    direct.hardhat = `http://127.0.0.1:${hardhatPort}`;
    // All three settle before going on: whatever started is stopped by after() if another failed.
    const started = await Promise.allSettled([
      startAnvil({ port: anvilPort }).then((n) => (anvil = n)),
      startHardhat({ port: hardhatPort }).then((n) => (hardhat = n)),
      startTestApp({
        listen: true,
        // Probes twice a second: a node that answers again is seen soon (the failover test).
        overrides: { rpc: { healthIntervalMs: 500 } },
        env: {
          ADMIN_TOKEN: ADMIN,
          UPSTREAM_ETHEREUM: direct.anvil,
          UPSTREAM_POLYGON: direct.hardhat,
          UPSTREAM_BASE: `${direct.anvil},${direct.hardhat}`,
        },
      }).then((app) => (t = app)),
    ]);
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    const k = await createKey(t.app);
    // Enterprise: no rate limit, every network; the calls here are what is tested, not the plan.
    const res = await t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${k.user.id}`, headers: { 'x-admin-token': ADMIN }, payload: { tier: 'enterprise' } });
    assert.equal(res.statusCode, 200, res.body);
    key = k.key;

    // The same two signed transactions through the gateway to each client: a deployment, then a
    // store(7) that writes a log. Both nodes mine each at once.
    const deploy = await sign(DEV, { nonce: 0, gas: 200_000n, data: TINY_BYTECODE });
    const store = await sign(DEV, { nonce: 1, gas: 100_000n, to: CONTRACT, data: STORE_7 });
    deployHash = keccak256(deploy);
    storeHash = keccak256(store);
    for (const client of CLIENTS) {
      for (const raw of [deploy, store]) {
        const sent = await rpc(NETWORK[client], 'eth_sendRawTransaction', [raw]);
        assert.equal(sent.result, keccak256(raw), `${client}: ${JSON.stringify(sent)}`);
      }
      const receipt = await waitFor(async () => (await rpc(NETWORK[client], 'eth_getTransactionReceipt', [storeHash])).result, { what: `${client} to mine` });
      assert.equal((receipt as { status: string }).status, '0x1');
    }
  });
  after(async () => {
    await t?.close();
    await Promise.all([anvil?.stop(), hardhat?.stop()]);
  });

  async function rpc(network: string, method: string, params: unknown[]): Promise<Answer> {
    const res = await fetch(`${t.url}/v1/${network}/${key}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return (await res.json()) as Answer;
  }
  async function node(client: Client, method: string, params: unknown[]): Promise<Answer> {
    const res = await fetch(direct[client], {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return (await res.json()) as Answer;
  }

  test('the standard calls answer with results of the same shape from either client', async () => {
    const calls: Array<[string, unknown[]]> = [
      ['eth_chainId', []],
      ['eth_blockNumber', []],
      ['eth_getBalance', [DEV.address, 'latest']],
      ['eth_getBlockByNumber', ['latest', false]],
      ['eth_getBlockByNumber', ['latest', true]],
      ['eth_call', [{ to: CONTRACT, data: VALUE }, 'latest']],
      ['eth_estimateGas', [{ from: DEV.address, to: CONTRACT, data: STORE_7 }]],
      ['eth_getTransactionReceipt', [storeHash]],
      ['eth_getTransactionReceipt', [deployHash]],
      ['eth_getLogs', [{ address: CONTRACT, fromBlock: '0x0', toBlock: 'latest' }]],
      ['eth_feeHistory', ['0x2', 'latest', [25, 75]]],
      ['eth_getCode', [CONTRACT, 'latest']],
      ['eth_getStorageAt', [CONTRACT, '0x0', 'latest']],
      ['eth_getTransactionCount', [DEV.address, 'latest']],
      ['eth_gasPrice', []],
    ];
    const found: Record<string, string[]> = {};
    for (const [method, params] of calls) {
      const [a, h] = await Promise.all(CLIENTS.map((c) => rpc(NETWORK[c], method, params)));
      for (const [client, answer] of [['anvil', a], ['hardhat', h]] as const) {
        assert.ok(answer?.result !== undefined && answer.result !== null, `${method} on ${client}: ${JSON.stringify(answer)}`);
      }
      const diff = differences(shape(a?.result), shape(h?.result));
      if (diff.length > 0) found[method] = [...new Set([...(found[method] ?? []), ...diff])].sort();
    }
    // The same values where the chains must agree: the contract, its storage, the sender's nonce.
    for (const [method, params] of [['eth_getCode', [CONTRACT, 'latest']], ['eth_getStorageAt', [CONTRACT, '0x0', 'latest']], ['eth_getTransactionCount', [DEV.address, 'latest']]] as const) {
      const [a, h] = await Promise.all(CLIENTS.map((c) => rpc(NETWORK[c], method, [...params])));
      assert.equal(a?.result, h?.result, method);
    }
    assert.deepEqual(found, KNOWN_DIFFERENCES);
  });

  // What each client answers, and the class the shipped table (`rpc.providerErrors`, C26) gives it:
  // `missing` moves a read to the next node; null passes the node's error on as the answer.
  // docs/rpc.md has the table of the answers.
  const ERRORS: Array<{ what: string; method: string; params: () => Promise<unknown[]> | unknown[]; kind: 'missing' | null; tx?: 'nonceTooLow' | 'refused' }> = [
    { what: 'a revert with data (a custom error)', method: 'eth_call', params: () => [{ to: CONTRACT, data: TINY_REVERTING_CALLDATA }, 'latest'], kind: null },
    { what: 'a revert in eth_estimateGas', method: 'eth_estimateGas', params: () => [{ from: DEV.address, to: CONTRACT, data: TINY_REVERTING_CALLDATA }], kind: null },
    {
      what: 'nonce too low',
      method: 'eth_sendRawTransaction',
      params: async () => [await sign(DEV, { nonce: 0, gas: 21_000n, to: OTHER.address, value: 1n })],
      kind: null,
      tx: 'nonceTooLow',
    },
    { what: 'a state read at a block above the head', method: 'eth_getBalance', params: () => [DEV.address, '0xffff'], kind: 'missing' },
    { what: 'eth_call at a block above the head', method: 'eth_call', params: () => [{ to: CONTRACT, data: VALUE }, '0xffff'], kind: 'missing' },
    { what: 'a state read at an unknown block hash (EIP-1898)', method: 'eth_getCode', params: () => [CONTRACT, { blockHash: UNKNOWN_HASH }], kind: 'missing' },
    { what: 'eth_getLogs of an unknown block hash', method: 'eth_getLogs', params: () => [{ blockHash: UNKNOWN_HASH }], kind: 'missing' },
    {
      what: 'a transaction above the block gas limit',
      method: 'eth_sendRawTransaction',
      params: async () => [await sign(OTHER, { nonce: 0, gas: 100_000_000n, to: DEV.address, value: 1n })],
      kind: null,
      tx: 'refused',
    },
  ];

  for (const e of ERRORS) {
    test(`${e.what}: each client's error reaches the caller as the node wrote it, and the table classes both as ${e.kind ?? 'the answer'}`, async () => {
      const table = new ProviderErrors(t.config.rpc.providerErrors);
      const params = await e.params();
      for (const client of CLIENTS) {
        const own = await node(client, e.method, params);
        const through = await rpc(NETWORK[client], e.method, params);
        assert.ok(own.error, `${client} answers ${e.method} with an error: ${JSON.stringify(own)}`);
        assert.deepEqual(through, own, `${client}: the gateway passes the node's error on`);
        assert.equal(table.classify(own.error.code, own.error.message), e.kind, `${client}: ${JSON.stringify(own.error)}`);
        if (e.tx) assert.equal(classifyTxAnswer(Buffer.from(JSON.stringify(own))).kind, e.tx, `${client}: the broadcast's reading`);
        // A revert's data (the Nope() selector) is in either client's error, in its own place.
        if (e.method !== 'eth_sendRawTransaction' && e.kind === null) assert.ok(JSON.stringify(own.error.data).includes(NOPE), `${client}: ${JSON.stringify(own.error)}`);
      }
    });
  }

  test('a read at a block one client has not reached yet moves on to the other client, either way round', async () => {
    const head = async (c: Client) => Number((await node(c, 'eth_blockNumber', [])).result);
    for (const [behind, ahead] of [['anvil', 'hardhat'], ['hardhat', 'anvil']] as const) {
      // The one ahead mines until it is two blocks past the other (within rpc.maxLagBlocks: both in line).
      const target = (await head(behind)) + 2;
      while ((await head(ahead)) < target) await node(ahead, 'evm_mine', []);
      const p = pool([direct[behind], direct[ahead]]); // the shipped table; no probes: config order
      const res = await p.forward(call('eth_getBalance', [DEV.address, `0x${(target - 1).toString(16)}`]), ['eth_getBalance']);
      const answer = JSON.parse(res.body.toString()) as Answer;
      assert.match(String(answer.result), /^0x[0-9a-f]+$/, `${behind} behind: ${JSON.stringify(answer)}`);
      assert.equal(res.upstream, 1, `answered by ${ahead}`);
      assert.equal(p.callStats()[0]?.errors.get('node_missing'), 1, `${behind} was asked first and counted as missing the block`);
    }
  });

  test('a method one client lacks (eth_getBlockReceipts on Hardhat) is answered by the other, and passed on from the one alone', async () => {
    const params = ['latest'];
    const own = await node('hardhat', 'eth_getBlockReceipts', params);
    assert.equal(own.error?.code, -32004, JSON.stringify(own));
    assert.deepEqual(await rpc(NETWORK.hardhat, 'eth_getBlockReceipts', params), own, 'Hardhat alone: its error as it wrote it');
    const p = pool([direct.hardhat, direct.anvil]); // the shipped table; no probes: config order
    const res = await p.forward(call('eth_getBlockReceipts', params), ['eth_getBlockReceipts']);
    const answer = JSON.parse(res.body.toString()) as Answer;
    assert.ok(Array.isArray(answer.result), JSON.stringify(answer));
    assert.equal(res.upstream, 1, 'answered by anvil');
    assert.equal(p.callStats()[0]?.errors.get('node_missing'), 1, 'Hardhat was asked first');
  });

  test('a network of both clients answers with either one stopped, both ways round', async () => {
    const clientOf = async () => String((await rpc(NETWORK.both, 'web3_clientVersion', [])).result);
    const upstreamUp = async (index: number) => {
      const res = await t.app.inject({ method: 'GET', url: '/health/ready' });
      return res.json<{ networks: Record<string, { upstreams: Array<{ state: string }> }> }>().networks[NETWORK.both]?.upstreams[index]?.state === 'up';
    };
    const answers = async (who: RegExp) => {
      assert.match(await clientOf(), who);
      for (const [method, params] of [['eth_blockNumber', []], ['eth_getBalance', [DEV.address, 'latest']], ['eth_getTransactionCount', [OTHER.address, 'latest']]] as const) {
        const a = await rpc(NETWORK.both, method, [...params]);
        assert.match(String(a.result), /^0x[0-9a-f]+$/, `${method}: ${JSON.stringify(a)}`);
      }
    };
    assert.match(await clientOf(), /anvil|hardhat/i);

    const port = Number(new URL(anvil.url).port);
    await anvil.stop();
    await answers(/hardhat/i);

    // anvil back at its address (a new chain: the point is which node answers, not its state).
    anvil = await startAnvil({ port });
    await waitFor(() => upstreamUp(0), { timeoutMs: 20_000, what: 'the gateway to see anvil answer again' });
    await hardhat.stop();
    await answers(/anvil/i);
  });
});
