// C53, C54: the gateway is invisible. Recorded request/answer pairs are replayed through it in
// front of a scripted node that answers each recorded request with its recorded answer: every
// exchange comes back unchanged (result, or error code, message and data; the caller's id), over
// HTTP, as one batch per file and over WebSocket.
//
// Two sets of recordings: the exchanges of a real node (anvil) recorded when the test starts, for
// every standard method the catalogue passes; and, when EXECUTION_APIS_DIR names a checkout of
// ethereum/execution-apis, the `.io` fixtures of its `tests/` folder (`eth_`, `net_`, `web3_`).
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { withId } from '../../src/json/lossless.ts';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type BareAnvil, startAnvil } from '../support/anvil.ts';
import { withUpstreams } from '../support/ws.ts';

interface Exchange {
  /** Where it was recorded: a fixture file, or the live recording. */
  file: string;
  request: string;
  answer: string;
}

/** The answer of one call as compared: the id, and the result or the error's code, message and data. */
function essence(text: string): unknown {
  const a = JSON.parse(text) as { id?: unknown; result?: unknown; error?: { code?: unknown; message?: unknown; data?: unknown } };
  return 'error' in a && a.error ? { id: a.id, error: { code: a.error.code, message: a.error.message, data: a.error.data } } : { id: a.id, result: a.result };
}

const recordKey = (call: { method: string; params?: unknown }) => `${call.method} ${JSON.stringify(call.params ?? [])}`;

/** A node that answers each recorded request with its recorded answer, under the id it was asked with. */
async function startReplayNode(exchanges: Exchange[]): Promise<{ url: string; misses: string[]; close(): Promise<void> }> {
  const recorded = new Map<string, string>();
  for (const e of exchanges) recorded.set(recordKey(JSON.parse(e.request) as { method: string; params?: unknown }), e.answer);
  const misses: string[] = [];
  const answer = (callText: string, call: { id?: unknown; method: string; params?: unknown }): string => {
    const id = JSON.stringify(call.id ?? null);
    const found = recorded.get(recordKey(call));
    if (found !== undefined) return withId(found, id);
    if (call.method === 'eth_blockNumber') return `{"jsonrpc":"2.0","id":${id},"result":"0x10"}`; // the gateway's probes
    misses.push(callText);
    return `{"jsonrpc":"2.0","id":${id},"error":{"code":-32603,"message":"not recorded"}}`;
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const parsed = JSON.parse(text) as unknown;
      const body = Array.isArray(parsed)
        ? `[${(parsed as Array<{ id?: unknown; method: string; params?: unknown }>).map((c) => answer(JSON.stringify(c), c)).join(',')}]`
        : answer(text, parsed as { id?: unknown; method: string; params?: unknown });
      res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    misses,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** The exchanges of the `.io` files under `dir/tests/{eth,net,web3}_*`. */
function fixtures(dir: string): Exchange[] {
  const out: Exchange[] = [];
  const tests = path.join(dir, 'tests');
  for (const folder of readdirSync(tests).filter((f) => /^(eth|net|web3)_/.test(f)).sort()) {
    for (const name of readdirSync(path.join(tests, folder)).filter((f) => f.endsWith('.io')).sort()) {
      let request: string | undefined;
      for (const line of readFileSync(path.join(tests, folder, name), 'utf8').split('\n')) {
        if (line.startsWith('>> ')) request = line.slice(3).trim();
        else if (line.startsWith('<< ') && request !== undefined) {
          out.push({ file: `${folder}/${name}`, request, answer: line.slice(3).trim() });
          request = undefined;
        }
      }
    }
  }
  return out;
}

const ADDR = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8';
/** Calls of every standard method the catalogue passes, in the forms the standard allows. */
function liveCalls(blockHash: string): Array<[string, unknown[]]> {
  return [
    ['eth_chainId', []], ['net_version', []], ['eth_blockNumber', []], ['eth_syncing', []], ['eth_gasPrice', []],
    ['eth_maxPriorityFeePerGas', []], ['eth_blobBaseFee', []], ['eth_feeHistory', ['0x2', 'latest', [25, 75]]],
    ['eth_getBalance', [ADDR, 'latest']], ['eth_getBalance', [ADDR, '0x0']], ['eth_getBalance', [ADDR, blockHash]],
    ['eth_getBalance', [ADDR, { blockHash }]], ['eth_getBalance', [ADDR, { blockHash, requireCanonical: true }]], ['eth_getBalance', [ADDR, { blockNumber: '0x0' }]],
    ['eth_getTransactionCount', [ADDR, 'pending']], ['eth_getCode', [ADDR, 'latest']], ['eth_getStorageAt', [ADDR, '0x0', 'earliest']],
    ['eth_getProof', [ADDR, [], 'latest']], ['eth_call', [{ to: ADDR, data: '0x' }, 'latest']], ['eth_call', [{ to: ADDR }, blockHash]],
    ['eth_estimateGas', [{ from: ADDR, to: ADDR, value: '0x1' }]], ['eth_createAccessList', [{ from: ADDR, to: ADDR }, 'latest']],
    ['eth_getBlockByNumber', ['latest', false]], ['eth_getBlockByNumber', ['0x0', true]], ['eth_getBlockByHash', [blockHash, false]],
    ['eth_getBlockTransactionCountByNumber', ['0x0']], ['eth_getBlockTransactionCountByHash', [blockHash]], ['eth_getBlockReceipts', ['0x0']],
    ['eth_getBlockReceipts', [blockHash]], ['eth_getTransactionByHash', [`0x${'11'.repeat(32)}`]], ['eth_getTransactionReceipt', [`0x${'11'.repeat(32)}`]],
    ['eth_getTransactionByBlockNumberAndIndex', ['0x0', '0x0']], ['eth_getTransactionByBlockHashAndIndex', [blockHash, '0x0']],
    ['eth_getUncleCountByBlockNumber', ['0x0']], ['eth_getUncleByBlockNumberAndIndex', ['0x0', '0x0']],
    ['eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest' }]], ['eth_getLogs', [{ blockHash }]],
    ['eth_sendRawTransaction', ['0x00']], ['eth_config', []], ['eth_getStorageValues', [{ [ADDR]: ['0x0'] }, 'latest']],
    ['eth_simulateV1', [{ blockStateCalls: [{ calls: [{ from: ADDR, to: ADDR, value: '0x1' }] }] }, 'latest']],
    ['net_listening', []], ['web3_clientVersion', []], ['web3_sha3', ['0x68656c6c6f']], ['eth_protocolVersion', []], ['eth_mining', []],
  ];
}

async function recordLive(anvil: BareAnvil): Promise<Exchange[]> {
  const ask = async (body: string) => (await fetch(anvil.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).text();
  const genesis = JSON.parse(await ask('{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x0",false]}')) as { result: { hash: string } };
  const out: Exchange[] = [];
  let id = 1;
  for (const [method, params] of liveCalls(genesis.result.hash)) {
    const request = JSON.stringify({ jsonrpc: '2.0', id: id++, method, params });
    out.push({ file: `live/${method}`, request, answer: await ask(request) });
  }
  return out;
}

const SPEC_DIR = process.env.EXECUTION_APIS_DIR;

describe('transparency: recorded exchanges come back unchanged through the gateway (C53, C54)', () => {
  let anvil: BareAnvil;
  /** Each set of recordings behind a network of its own (two recordings of one request may differ). */
  const sets: Array<{ network: string; exchanges: Exchange[]; node: Awaited<ReturnType<typeof startReplayNode>> }> = [];
  let t: TestApp;
  let key: string;

  before(async () => {
    anvil = await startAnvil();
    sets.push({ network: 'ethereum', exchanges: [], node: undefined as never });
    (sets[0] as (typeof sets)[0]).exchanges = await recordLive(anvil);
    if (SPEC_DIR && existsSync(path.join(SPEC_DIR, 'tests'))) sets.push({ network: 'base', exchanges: fixtures(SPEC_DIR), node: undefined as never });
    for (const set of sets) set.node = await startReplayNode(set.exchanges);
    const many = { requestsPerMinute: null, dailyLimit: null, monthlyComputeUnits: null };
    t = await startTestApp({
      listen: true,
      overrides: {
        networks: withUpstreams(Object.fromEntries(sets.map((set) => [set.network, [{ http: set.node.url }]]))),
        plans: { free: many },
        cache: { enabled: false },
        rpc: { hedge: { enabled: false }, maxLogsRange: null },
      },
    });
    key = (await createKey(t.app, { networks: sets.map((set) => set.network) })).key;
    console.log(`[transparency] ${sets.map((set) => `${set.exchanges.length} exchanges on ${set.network}`).join(', ')}${SPEC_DIR ? '' : ' (set EXECUTION_APIS_DIR to replay the execution-apis fixtures too)'}`);
  });
  after(async () => {
    await t?.close();
    for (const set of sets) await set.node?.close();
    await anvil?.stop();
  });

  /** The exchanges whose answer through the gateway differs from the recorded one. */
  const differences = (got: Array<{ e: Exchange; text: string }>): string[] =>
    got.filter(({ e, text }) => JSON.stringify(essence(text)) !== JSON.stringify(essence(e.answer))).map(({ e, text }) => `${e.file}: sent ${e.request.slice(0, 160)} got ${text.slice(0, 200)} recorded ${e.answer.slice(0, 200)}`);

  test('over HTTP, call by call', async () => {
    const got: Array<{ e: Exchange; text: string }> = [];
    for (const { network, exchanges } of sets) {
      for (const e of exchanges) {
        const res = await fetch(`${t.url}/v1/${network}/${key}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: e.request });
        got.push({ e, text: await res.text() });
      }
    }
    assert.deepEqual(differences(got), []);
    for (const set of sets) assert.deepEqual(set.node.misses, [], `${set.network}: the node was asked only what was recorded`);
  });

  test('as one batch per file', async () => {
    const got: Array<{ e: Exchange; text: string }> = [];
    for (const { network, exchanges } of sets) {
      const byFile = new Map<string, Exchange[]>();
      for (const e of exchanges) byFile.set(e.file, [...(byFile.get(e.file) ?? []), e]);
      for (const list of byFile.values()) {
        const res = await fetch(`${t.url}/v1/${network}/${key}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `[${list.map((e) => e.request).join(',')}]` });
        const answers = JSON.parse(await res.text()) as unknown[];
        assert.equal(answers.length, list.length);
        list.forEach((e, i) => got.push({ e, text: JSON.stringify(answers[i]) }));
      }
    }
    assert.deepEqual(differences(got), []);
  });

  test('over WebSocket', async () => {
    const got: Array<{ e: Exchange; text: string }> = [];
    for (const { network, exchanges } of sets) {
      const ws = new WebSocket(`${t.url.replace(/^http/, 'ws')}/ws/${network}?apiKey=${key}`);
      await new Promise((resolve, reject) => {
        ws.once('open', resolve);
        ws.once('error', reject);
      });
      try {
        for (const e of exchanges) {
          const text = await new Promise<string>((resolve) => {
            ws.once('message', (data: Buffer) => resolve(data.toString('utf8')));
            ws.send(e.request);
          });
          got.push({ e, text });
        }
      } finally {
        ws.close();
      }
    }
    assert.deepEqual(differences(got), []);
  });
});
