// C3: what /health/ready waits for (health.readyWhen), the rule of src/ops/health.ts on the
// networks' states alone. Through the route, with nodes that fail: test/ops/readiness.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { networksDown } from '../../src/ops/health.ts';
import type { NetworkHealth } from '../../src/upstreams/upstreams.ts';

describe('what readiness waits for: health.readyWhen (C3)', () => {
  const net = (status: NetworkHealth['status']) => ({ status }) as NetworkHealth;
  test('any-network (the default): unready only when every network is known down; idle and unknown ones may still answer', () => {
    assert.match(networksDown({ a: net('down'), b: net('down') }, 'any-network') ?? '', /no node answers on any network \(2 down\): offline\? try --devnet/);
    assert.equal(networksDown({ a: net('down'), b: net('up') }, 'any-network'), null);
    assert.equal(networksDown({ a: net('down'), b: net('degraded') }, 'any-network'), null);
    assert.equal(networksDown({ a: net('down'), b: net('idle') }, 'any-network'), null);
    assert.equal(networksDown({ a: net('unknown') }, 'any-network'), null);
  });
  test('every-network: one known down names it; storage: networks never count', () => {
    assert.match(networksDown({ a: net('down'), b: net('up') }, 'every-network') ?? '', /1 of 2 networks have no upstream answering: a/);
    assert.equal(networksDown({ a: net('up'), b: net('idle') }, 'every-network'), null);
    assert.equal(networksDown({ a: net('down') }, 'storage'), null);
  });
});
