// C45: the devnet's accounts hold 10,000,000 coins on every chain; dev account 9 sends whale-sized
// transfers on the native chains (never elsewhere), tops itself up, and keeps the feeds fresh.
// slow: anvil chains and the devnet traffic loop
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { AnvilProcess } from '../../src/devnet/anvil.ts';
import { type Devnet, startDevnet } from '../../src/devnet/devnet.ts';
import { readFeed } from '../../src/devnet/feeds.ts';
import { rpc } from '../../src/json/rpc-client.ts';
import { startDevnetTraffic, WHALE_MAX_COINS, WHALE_MIN_COINS } from '../../src/devnet/traffic.ts';
import { waitFor } from '../support/wait.ts';

const COIN = 10n ** 18n;

interface Tx {
  hash: string;
  from: string;
  to: string | null;
  value: string;
  blockNumber: string;
}

describe('devnet life (C45)', () => {
  let devnet: Devnet;
  const logs: { level: string; obj: object; msg: string | undefined }[] = [];
  const logger = {
    debug: (obj: object, msg?: string) => logs.push({ level: 'debug', obj, msg }),
    info: (obj: object, msg?: string) => logs.push({ level: 'info', obj, msg }),
    warn: (obj: object, msg?: string) => logs.push({ level: 'warn', obj, msg }),
    error: (obj: object, msg?: string) => logs.push({ level: 'error', obj, msg }),
  };
  const url = (slug: string) => devnet.upstreams[slug]?.http ?? '';
  const whale = () => (devnet.accounts[9]?.address ?? '').toLowerCase();

  /** Transfers sent by dev account 9 in blocks from..latest of a chain. */
  async function whaleTransfers(slug: string, from = 0): Promise<Tx[]> {
    const head = Number(await rpc<string>(url(slug), 'eth_blockNumber', []));
    const out: Tx[] = [];
    for (let n = from; n <= head; n++) {
      const block = await rpc<{ transactions: Tx[] }>(url(slug), 'eth_getBlockByNumber', [`0x${n.toString(16)}`, true]);
      out.push(...block.transactions.filter((tx) => tx.from.toLowerCase() === whale() && tx.to !== null && BigInt(tx.value) > 0n));
    }
    return out;
  }

  before(async () => {
    devnet = await startDevnet({
      networks: [
        { slug: 'native-mainnet', chainId: 50, native: true },
        { slug: 'native-testnet', chainId: 51, native: true },
        { slug: 'ethereum', chainId: 1 },
      ],
      nativeBlockTimeSeconds: 1,
      whaleEverySeconds: 1,
      feedHeartbeatSeconds: 1,
      logger,
    });
  });
  after(() => devnet?.stop());

  test('the 10 dev accounts hold 10,000,000 coins on a chain where nothing was sent', async () => {
    for (const account of devnet.accounts) {
      assert.equal(BigInt(await rpc<string>(url('ethereum'), 'eth_getBalance', [account.address, 'latest'])), 10_000_000n * COIN);
    }
    // Dev account 0 is left to users and tests on the native chains too.
    assert.equal(BigInt(await rpc<string>(url('native-mainnet'), 'eth_getBalance', [devnet.accounts[0]?.address, 'latest'])), 10_000_000n * COIN);
  });

  test('dev account 9 sends a whale-sized transfer on each native chain', async () => {
    for (const slug of ['native-mainnet', 'native-testnet']) {
      const [tx] = await waitFor(async () => {
        const found = await whaleTransfers(slug);
        return found.length > 0 ? found : undefined;
      }, { timeoutMs: 20_000, intervalMs: 200, what: `a whale transfer on ${slug}` });
      assert.ok(tx);
      const value = BigInt(tx.value);
      assert.ok(value >= BigInt(WHALE_MIN_COINS) * COIN && value <= BigInt(WHALE_MAX_COINS) * COIN, `${value} within the whale range`);
      assert.equal(value % COIN, 0n, 'a whole number of coins');
      assert.notEqual(tx.to?.toLowerCase(), whale());
      const receipt = await rpc<{ status: string }>(url(slug), 'eth_getTransactionReceipt', [tx.hash]);
      assert.equal(receipt.status, '0x1');
    }
    assert.ok(logs.some((l) => l.level === 'debug' && l.msg === 'devnet whale transfer sent'), 'logged at debug');
  });

  test('nothing is sent on a chain that is not native', async () => {
    await waitFor(async () => (await whaleTransfers('native-mainnet')).length >= 2, { timeoutMs: 20_000, intervalMs: 200, what: 'two whale transfers' });
    assert.equal(Number(await rpc<string>(url('ethereum'), 'eth_blockNumber', [])), 0, 'no block was mined there');
  });

  test('running low, dev account 9 tops itself up and goes on sending', async () => {
    const slug = 'native-mainnet';
    await rpc(url(slug), 'anvil_setBalance', [whale(), `0x${(1_000n * COIN).toString(16)}`]); // less than one whale transfer
    const from = Number(await rpc<string>(url(slug), 'eth_blockNumber', [])) + 1;
    const [tx] = await waitFor(async () => {
      const found = await whaleTransfers(slug, from);
      return found.length > 0 ? found : undefined;
    }, { timeoutMs: 20_000, intervalMs: 200, what: 'a whale transfer after the balance ran low' });
    assert.ok(tx);
    assert.equal((await rpc<{ status: string }>(url(slug), 'eth_getTransactionReceipt', [tx.hash])).status, '0x1');
    assert.ok(BigInt(await rpc<string>(url(slug), 'eth_getBalance', [whale(), 'latest'])) > 1_000_000n * COIN);
  });

  test('the heartbeat re-posts the feed answer as updated now', async () => {
    const slug = 'native-testnet';
    const feed = devnet.priceFeeds[slug];
    assert.ok(feed);
    const old = Math.floor(Date.now() / 1000) - 86_400;
    await devnet.setPrice(slug, 2.25, old);
    assert.equal((await readFeed(url(slug), feed)).updatedAt, old);
    const after = await waitFor(async () => {
      const r = await readFeed(url(slug), feed);
      return r.updatedAt > old + 3_600 ? r : undefined;
    }, { timeoutMs: 20_000, intervalMs: 200, what: 'a heartbeat' });
    assert.equal(after.usd, 2.25, 'the answer is kept');
    assert.ok(Math.abs(after.updatedAt - Date.now() / 1000) < 120);
  });

  test('stops cleanly: nothing more is sent or logged, and no error', async () => {
    await devnet.stop();
    const count = logs.length;
    await new Promise((r) => setTimeout(r, 1_500)); // over one interval: a loop still running would log
    assert.equal(logs.length, count, 'no round after stop');
    assert.deepEqual(logs.filter((l) => l.level === 'error' || l.level === 'warn' || /failed/.test(l.msg ?? '')), []);
  });
});

describe('devnet life off (C45)', () => {
  test('without whaleEverySeconds no transfer is sent over several blocks (tests stay deterministic)', async () => {
    const devnet = await startDevnet({ networks: [{ slug: 'native-mainnet', chainId: 50, native: true }], nativeBlockTimeSeconds: 1, logger: { info() {}, warn() {}, error() {} } });
    try {
      const u = devnet.upstreams['native-mainnet']?.http ?? '';
      const start = Number(await rpc<string>(u, 'eth_blockNumber', []));
      await waitFor(async () => Number(await rpc<string>(u, 'eth_blockNumber', [])) >= start + 3, { timeoutMs: 20_000, intervalMs: 200, what: 'three blocks' });
      const head = Number(await rpc<string>(u, 'eth_blockNumber', []));
      let sent = 0;
      for (let n = 0; n <= head; n++) {
        const block = await rpc<{ transactions: Tx[] }>(u, 'eth_getBlockByNumber', [`0x${n.toString(16)}`, true]);
        sent += block.transactions.filter((tx) => tx.to !== null).length;
      }
      assert.equal(sent, 0, 'only the feed deployment, no transfer');
    } finally {
      await devnet.stop();
    }
  });
});

describe('devnet life when the balance changes under it (C45)', () => {
  test('a balance spent between the read and the send: dev account 9 tops up and sends in the same round', async () => {
    const anvil = new AnvilProcess({ chainId: 50, accountBalanceCoins: 10_000_000 }); // no top-up before the send
    const node = `http://127.0.0.1:${await anvil.port}`;
    const [from] = await rpc<`0x${string}`[]>(node, 'eth_accounts', []);
    assert.ok(from);
    // In front of the chain: once a round has read the balance, the balance drops to 1,000 coins
    // before the answer arrives (as a test or a user setting it at that moment would).
    let drained = 0;
    const relay = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => {
        body += c;
      });
      req.on('end', () => {
        void (async () => {
          const answer = await (await fetch(node, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).text();
          if ((JSON.parse(body) as { method: string }).method === 'eth_getBalance' && drained === 0) {
            drained++;
            await rpc(node, 'anvil_setBalance', [from, `0x${(1_000n * COIN).toString(16)}`]);
          }
          res.writeHead(200, { 'content-type': 'application/json' }).end(answer);
        })();
      });
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    const logs: { obj: object; msg?: string }[] = [];
    const traffic = startDevnetTraffic({
      chains: [{ slug: 'native-mainnet', url: `http://127.0.0.1:${(relay.address() as AddressInfo).port}` }],
      account: from,
      whaleEverySeconds: 1,
      feedHeartbeatSeconds: 0,
      logger: { debug: (obj, msg) => logs.push({ obj, msg }) },
    });
    try {
      await waitFor(() => logs.length > 0, { timeoutMs: 20_000, intervalMs: 100, what: 'a whale round' });
      await traffic.stop();
      assert.equal(drained, 1, 'the balance was drained after the read');
      assert.equal(logs[0]?.msg, 'devnet whale transfer sent', JSON.stringify(logs[0]));
      const hash = (logs[0]?.obj as { hash?: string }).hash;
      assert.equal((await rpc<{ status: string }>(node, 'eth_getTransactionReceipt', [hash])).status, '0x1');
    } finally {
      await traffic.stop();
      relay.closeAllConnections();
      await new Promise((r) => relay.close(r));
      await anvil.stop();
    }
  });
});
