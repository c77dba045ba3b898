// C34: the `http` and `fixed` price sources, the cache, staleness and the testnet rule, against a
// real local HTTP server (the `chainlink` kind runs against the devnet feed: chainlink.test.ts).
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { loadConfig, validateConfig } from '../../src/config/load.ts';
import type { Config, PriceSourceConfig } from '../../src/config/schema.ts';
import { Prices } from '../../src/prices/prices.ts';
import { Upstreams } from '../../src/upstreams/upstreams.ts';
import { type ManualClock, manualClock } from '../support/clock.ts';

/** What each path answers; tests change `state` to make the source fail or move. */
const state = { usd: 3012.5, fail: false, hits: new Map<string, number>() };
const SLOW_MS = 1_500;
const SECRET = 'cg-secret-key-123';

let server: Server;
let base = '';

before(async () => {
  server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    state.hits.set(path, (state.hits.get(path) ?? 0) + 1);
    const json = (status: number, body: string) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(body);
    };
    switch (path) {
      case '/good':
        return json(200, JSON.stringify({ ethereum: { usd: 3012.5 } }));
      case '/string':
        return json(200, JSON.stringify({ data: [{ price: '1.25' }] }));
      case '/missing':
        return json(200, JSON.stringify({ ethereum: {} }));
      case '/garbage':
        return json(200, '<html>not json{');
      case '/negative':
        return json(200, JSON.stringify({ ethereum: { usd: -1 } }));
      case '/text':
        return json(200, JSON.stringify({ ethereum: { usd: 'lots' } }));
      case '/error':
        return json(500, JSON.stringify({ ethereum: { usd: 1 } }));
      case '/slow':
        setTimeout(() => json(200, JSON.stringify({ ethereum: { usd: 1 } })), SLOW_MS);
        return;
      case '/slow-once':
        // The first ask waits a little (so concurrent asks overlap it); the answer counts the hits.
        setTimeout(() => json(200, JSON.stringify({ ethereum: { usd: state.hits.get(path) ?? 0 } })), 100);
        return;
      case '/moving':
        if (state.fail) return json(503, '{}');
        return json(200, JSON.stringify({ ethereum: { usd: state.usd } }));
      default:
        return json(404, '{}');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

interface Built {
  prices: Prices;
  logs: string[];
  clock: ManualClock;
  close(): Promise<void>;
}

/** A Prices over the default networks with `price` set on some of them and the given cache settings. */
function build(prices: Partial<Config['prices']>, sources: Record<string, PriceSourceConfig | undefined>): Built {
  const loaded = loadConfig({ env: {}, overrides: { prices: { timeoutMs: 500, ...prices } } });
  const draft = structuredClone<Config>(loaded);
  for (const n of draft.networks) {
    const source = sources[n.slug];
    if (source) n.price = source;
  }
  const config = validateConfig(draft);
  const logs: string[] = [];
  const logger = pino({ level: 'debug' }, new Writable({ write: (chunk, _e, cb) => (logs.push(String(chunk)), cb()) }));
  const upstreams = new Upstreams(config, logger);
  const clock = manualClock();
  const p = new Prices({ settings: config, upstreams, logger, now: clock.now });
  return {
    prices: p,
    logs,
    clock,
    close: async () => {
      p.close();
      await upstreams.close();
    },
  };
}

const http = (path: string, jsonPath = 'ethereum.usd'): PriceSourceConfig => ({ type: 'http', url: `${base}${path}`, path: jsonPath });

describe('prices: fixed and defaults', () => {
  test('a fixed source is its number; a mainnet without a source is null; a testnet without one is 0', async () => {
    const b = build({}, { ethereum: { type: 'fixed', usd: 3000 }, polygon: { type: 'fixed', usd: 0 } });
    try {
      assert.equal(await b.prices.nativeUsd('ethereum'), 3000);
      assert.equal(await b.prices.nativeUsd('polygon'), 0);
      assert.equal(await b.prices.nativeUsd('bsc'), null, 'a mainnet without a price source has no price');
      assert.equal(await b.prices.nativeUsd('native-mainnet'), null);
      assert.equal(await b.prices.nativeUsd('ethereum-sepolia'), 0, 'C34: testnet coins are worth 0 USD unless configured');
      assert.equal(await b.prices.nativeUsd('native-testnet'), 0);
      assert.equal(await b.prices.nativeUsd('atlantis'), null, 'an unknown network has no price');
    } finally {
      await b.close();
    }
  });

  test('a configured testnet price is used instead of 0', async () => {
    const b = build({}, { 'ethereum-sepolia': { type: 'fixed', usd: 0.01 } });
    try {
      assert.equal(await b.prices.nativeUsd('ethereum-sepolia'), 0.01);
    } finally {
      await b.close();
    }
  });

  test('tokenUsd uses the token price from config, matched by address in any case', async () => {
    const loaded = loadConfig({ env: {} });
    const draft = structuredClone<Config>(loaded);
    const usdc = '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48';
    const weth = '0xC02aaA39b223FE8D0A0e5C4F27eAD9083C756Cc2';
    const eth = draft.networks.find((n) => n.slug === 'ethereum');
    const sepolia = draft.networks.find((n) => n.slug === 'ethereum-sepolia');
    assert.ok(eth && sepolia);
    eth.tokens = [
      { symbol: 'USDC', address: usdc, decimals: 6, price: { type: 'fixed', usd: 1 } },
      { symbol: 'WETH', address: weth, decimals: 18 },
    ];
    sepolia.tokens = [{ symbol: 'USDC', address: usdc, decimals: 6 }];
    const config = validateConfig(draft);
    const logger = pino({ level: 'silent' });
    const upstreams = new Upstreams(config, logger);
    const p = new Prices({ settings: config, upstreams, logger });
    try {
      assert.equal(await p.tokenUsd('ethereum', usdc.toLowerCase()), 1);
      assert.equal(await p.tokenUsd('ethereum', weth), null, 'a mainnet token without a price has none');
      assert.equal(await p.tokenUsd('ethereum-sepolia', usdc), 0, 'a testnet token without a price is worth 0');
      assert.equal(await p.tokenUsd('ethereum', '0x0000000000000000000000000000000000000001'), null, 'an unknown token has no price');
    } finally {
      p.close();
      await upstreams.close();
    }
  });
});

describe('prices: the http source', () => {
  test('a good answer gives the number at the dotted path', async () => {
    const b = build({}, { ethereum: http('/good'), polygon: http('/string', 'data.0.price') });
    try {
      assert.equal(await b.prices.nativeUsd('ethereum'), 3012.5);
      assert.equal(await b.prices.nativeUsd('polygon'), 1.25, 'a decimal string is a number; arrays are indexed');
    } finally {
      await b.close();
    }
  });

  test('a missing path, garbage, a negative or non-numeric value and an HTTP error give null', async () => {
    const b = build({}, {
      ethereum: http('/missing'),
      polygon: http('/garbage'),
      bsc: http('/negative'),
      arbitrum: http('/text'),
      optimism: http('/error'),
      base: http('/good', 'ethereum.usd.more'),
      avalanche: http('/good', '__proto__.constructor'),
    });
    try {
      for (const slug of ['ethereum', 'polygon', 'bsc', 'arbitrum', 'optimism', 'base', 'avalanche']) {
        assert.equal(await b.prices.nativeUsd(slug), null, slug);
      }
      assert.ok(b.logs.some((l) => l.includes('price source failed') && l.includes('no value at')), 'the failure is logged with its reason');
    } finally {
      await b.close();
    }
  });

  test('an answer slower than prices.timeoutMs gives null, without waiting for it', async () => {
    const b = build({ timeoutMs: 200 }, { ethereum: http('/slow') });
    try {
      const started = performance.now();
      assert.equal(await b.prices.nativeUsd('ethereum'), null);
      assert.ok(performance.now() - started < SLOW_MS, 'gave up before the answer came');
      assert.ok(b.logs.some((l) => l.includes('no answer within 200 ms')));
    } finally {
      await b.close();
    }
  });

  test('the logs never show the query string of a source URL (it may hold an API key)', async () => {
    const b = build({}, { ethereum: { type: 'http', url: `${base}/missing?x_cg_pro_api_key=${SECRET}`, path: 'ethereum.usd' } });
    try {
      assert.equal(await b.prices.nativeUsd('ethereum'), null);
      assert.ok(b.logs.some((l) => l.includes('/missing')), 'the failure is logged');
      assert.ok(!b.logs.join('').includes(SECRET));
    } finally {
      await b.close();
    }
  });
});

describe('prices: cache and staleness', () => {
  test('a price is read once per cacheSeconds and read again after', async () => {
    state.hits.delete('/good');
    const b = build({ cacheSeconds: 60 }, { ethereum: http('/good') });
    try {
      assert.equal(await b.prices.nativeUsd('ethereum'), 3012.5);
      assert.equal(await b.prices.nativeUsd('ethereum'), 3012.5);
      assert.equal(state.hits.get('/good'), 1, 'the second ask is served from the cache');
      b.clock.advance(60_000);
      assert.equal(await b.prices.nativeUsd('ethereum'), 3012.5);
      assert.equal(state.hits.get('/good'), 2, 'read again once cacheSeconds have passed');
    } finally {
      await b.close();
    }
  });

  test('concurrent asks share one read, even with no cache', async () => {
    state.hits.delete('/slow-once');
    const b = build({ cacheSeconds: 0 }, { ethereum: http('/slow-once') });
    try {
      const answers = await Promise.all(Array.from({ length: 10 }, () => b.prices.nativeUsd('ethereum')));
      assert.equal(state.hits.get('/slow-once'), 1, 'one request for ten asks');
      assert.deepEqual(answers, Array.from({ length: 10 }, () => 1));
    } finally {
      await b.close();
    }
  });

  test('a failed read keeps the last good price while it is younger than maxAgeSeconds, then null', async () => {
    state.fail = false;
    state.usd = 2500;
    const b = build({ cacheSeconds: 0, maxAgeSeconds: 600 }, { ethereum: http('/moving') });
    try {
      assert.equal(await b.prices.nativeUsd('ethereum'), 2500);
      state.fail = true;
      b.clock.advance(300_000);
      assert.equal(await b.prices.nativeUsd('ethereum'), 2500, 'a 5-minute-old real price is still a price');
      b.clock.advance(300_001);
      assert.equal(await b.prices.nativeUsd('ethereum'), null, 'past maxAgeSeconds: null, never the stale value');
      state.fail = false;
      state.usd = 2600;
      b.clock.advance(60_000); // past the retry delay of a failed read
      assert.equal(await b.prices.nativeUsd('ethereum'), 2600, 'the source answering again gives its new price');
    } finally {
      state.fail = false;
      await b.close();
    }
  });

  test('a cached price turns null once it is older than maxAgeSeconds, even inside cacheSeconds', async () => {
    state.fail = false;
    state.usd = 10;
    // cacheSeconds above maxAgeSeconds: the cache must not hand out a stale price.
    const b = build({ cacheSeconds: 7200, maxAgeSeconds: 60 }, { ethereum: http('/moving') });
    try {
      assert.equal(await b.prices.nativeUsd('ethereum'), 10);
      state.fail = true; // a re-read, if any, fails: only the cached reading could answer
      b.clock.advance(61_000);
      assert.equal(await b.prices.nativeUsd('ethereum'), null);
    } finally {
      state.fail = false;
      await b.close();
    }
  });

  test('after close() a read source gives null', async () => {
    const b = build({ cacheSeconds: 0 }, { ethereum: http('/good'), polygon: { type: 'fixed', usd: 1 } });
    await b.close();
    assert.equal(await b.prices.nativeUsd('ethereum'), null);
    assert.equal(await b.prices.nativeUsd('polygon'), 1);
  });
});
