import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { redactUrl } from '../../src/ops/logging.ts';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';

const rpc = { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] };

/** Whether `text` holds any 12 consecutive characters of `secret` (a partial leak counts too). */
function holdsPartOf(text: string, secret: string): boolean {
  for (let i = 0; i + 12 <= secret.length; i++) if (text.includes(secret.slice(i, i + 12))) return true;
  return false;
}

describe('API keys in mistyped URLs reach neither the logs nor a 404 body (C19)', () => {
  let t: TestApp;
  before(async () => {
    // Every request line logged, RPC ones included, so that each URL below is written somewhere.
    t = await startTestApp({ env: { LOG_LEVEL: 'trace' }, overrides: { rpc: { accessLog: true } } });
  });
  after(() => t.close());

  test('a key in a slightly wrong address is logged as its prefix only, and no answer repeats its secret', async () => {
    const { key } = await createKey(t.app, { name: 'odd urls' });
    const prefix = key.slice(0, 'jk_live_'.length + 8);
    const secret = key.slice(prefix.length);
    const odd: Array<['GET' | 'POST', string]> = [
      ['POST', `//v1/native-mainnet/${key}`],
      ['POST', `/V1/native-mainnet/${key}`],
      ['POST', `/v1//native-mainnet/${key}`],
      ['POST', `/v1/native-mainnet//${key}`],
      ['POST', `/v1/native-mainnet/${key}/`],
      ['POST', `/v1/native-mainnet/${key}/extra`],
      ['GET', `/v1/native-mainnet/${key}`],
      ['POST', `/rpc/main/evm/50?key=${key}`],
      ['POST', `/rpc/main/evm/50?apiKey=${key}`],
      ['POST', `/rpc/main/evm/50?x=1&api_key=${key}`],
      ['POST', `/public/main?token=${key}`],
      ['POST', `/ws/native-mainnet/${key}`],
      ['GET', `/ws/native-mainnet/${key}`],
      ['POST', `/rpc/${key}`],
      ['POST', `/rpc/main/evm/50/${key}`],
      ['POST', `/api/v1/${key}`],
      ['GET', `/somewhere/else?q=${key}`],
      // Percent-encoding one character of the secret must not split it past the redaction.
      ['POST', `/ws/native-mainnet/${prefix}${secret.slice(0, 20)}%${secret.charCodeAt(20).toString(16)}${secret.slice(21)}`],
    ];
    for (const [method, url] of odd) {
      const before = t.logs.length;
      const res = await t.app.inject({ method, url, ...(method === 'POST' ? { payload: rpc } : {}) });
      assert.ok(!holdsPartOf(res.body, secret), `${method} ${url.replace(secret, '<secret>')}: the answer does not repeat the key (${res.statusCode})`);
      const lines = t.logs.slice(before).join('');
      assert.ok(lines.length > 0, `${method} ${url.replace(secret, '<secret>')} is logged`);
      assert.ok(!holdsPartOf(lines, secret), `${method} ${url.replace(secret, '<secret>')}: the log does not hold the secret`);
      if (res.statusCode === 404 && String(res.headers['content-type']).includes('json') && res.json().success === false) {
        assert.equal(res.json().error.code, 'NOT_FOUND', 'a 404 is in the C7 envelope');
      }
    }
    // The prefix is kept: a log still says which key it was (C19: the prefix is not secret).
    assert.ok(t.logs.join('').includes(`/ws/native-mainnet/${prefix}[redacted]`), 'the prefix stays in the log');
  });

  test('redaction keeps the prefix, hides secrets in any URL part and leaves ordinary ids alone', () => {
    const key = 'jk_live_0a1b2c3dQ2xBkZ9vW4eR7tY1uI3oP5aS8dF0gH2jK4lZ6xC8vB0n_-M';
    assert.equal(redactUrl(`/rpc/${key}`), '/rpc/jk_live_0a1b2c3d[redacted]');
    assert.equal(redactUrl(`/x?k=${key}&y=1`), '/x?k=jk_live_0a1b2c3d[redacted]&y=1');
    assert.equal(redactUrl(`/x/${key}junk`), '/x/jk_live_0a1b2c3d[redacted]');
    // Without a prefix shape, a long token is hidden whole.
    assert.equal(redactUrl('/x/Q2xBkZ9vW4eR7tY1uI3oP5aS8dF0gH2jK4lZ6xC8vB0n_-M'), '/x/[redacted]');
    // Key ids (UUIDs) and network slugs are not secrets.
    const id = '3f1c2b9e-8d7a-4c6b-9e5f-1a2b3c4d5e6f';
    assert.equal(redactUrl(`/api/v1/api-keys/${id}/rotate`), `/api/v1/api-keys/${id}/rotate`);
    assert.equal(redactUrl('/ws/ethereum-sepolia?x=1'), '/ws/ethereum-sepolia?x=1');
  });
});
