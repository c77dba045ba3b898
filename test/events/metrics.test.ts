// The block follower's figures on /metrics (C33): cursor, lag, blocks handed on and the lease, per
// network, read from the follower at each scrape.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.ts';
import { waitFor } from '../support/wait.ts';

let t: TestApp;

before(async () => {
  t = await startTestApp({ devnet: true, devnetNetworks: ['native-mainnet'], overrides: { whaleAlerts: { networks: ['native-mainnet'] } } });
});

after(async () => {
  await t?.close();
});

const value = (text: string, name: string): number | undefined => {
  const m = new RegExp(`^${name}\\{network="native-mainnet"\\} (\\d+)$`, 'm').exec(text);
  return m?.[1] === undefined ? undefined : Number(m[1]);
};

test('/metrics shows the follower of a followed network', async () => {
  await waitFor(() => t.app.parts.follower.stats().some((f) => f.network === 'native-mainnet' && f.blocksHandled >= 2), { timeoutMs: 20_000, what: 'two blocks followed' });
  const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
  const stats = t.app.parts.follower.stats().find((f) => f.network === 'native-mainnet');
  assert.ok(stats);
  const cursor = value(text, 'junction_follower_cursor');
  assert.ok(cursor !== undefined && cursor >= 1 && cursor <= (stats.cursor ?? 0), `cursor ${cursor}`);
  assert.ok((value(text, 'junction_follower_blocks_total') ?? 0) >= 2);
  assert.equal(value(text, 'junction_follower_lease_held'), 1);
  assert.ok(value(text, 'junction_follower_lag_blocks') !== undefined);
  assert.doesNotMatch(text, /junction_follower_cursor\{network="ethereum"\}/, 'only followed networks');
});
