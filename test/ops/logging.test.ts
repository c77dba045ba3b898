// C19: how a URL is written into the log (redactUrl, src/ops/logging.ts): an API key keeps its prefix
// only, a long token without one is hidden whole, ids and slugs stay. Keys in mistyped URLs on the
// running gateway, in its logs and 404 bodies: test/ops/ops.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { redactUrl } from '../../src/ops/logging.ts';

describe('API keys in URLs written to the log (C19)', () => {
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
