// The upstream module sits below rpc/, and its errors belong to the one error tree (BaseError
// with a pinned code, no two classes alike). Files are cut by concern, not by a line count.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { BaseError } from '../../src/errors/base.ts';
import { NetworkDownError, NoUpstreamError, UpstreamRpcError, UpstreamWsNoAnswerError, UpstreamWsRpcError } from '../../src/errors/upstream.ts';

const DIR = path.join(import.meta.dirname, '../../src/upstreams');
// Every file of the module, its http/ and ws/ folders included.
const files = readdirSync(DIR, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));

test('src/upstreams imports nothing from src/rpc and declares no error class of its own', () => {
  for (const f of files) {
    const text = readFileSync(path.join(DIR, f), 'utf8');
    assert.doesNotMatch(text, /from '(\.\.\/)+rpc\//, `${f} imports from rpc/`);
    assert.doesNotMatch(text, /class \w+ extends \w*Error\b/, `${f} declares an error class (they live in src/errors/)`);
  }
});

test("the pools' and hubs' errors extend BaseError and pin an UPPER_SNAKE code each", () => {
  const classes = [NoUpstreamError, NetworkDownError, UpstreamRpcError, UpstreamWsRpcError, UpstreamWsNoAnswerError];
  for (const c of classes) {
    assert.ok(c.prototype instanceof BaseError, `${c.name} extends BaseError`);
    assert.match(String(c.code), /^[A-Z][A-Z0-9_]+$/, `${c.name}'s code`);
  }
  // No node answered, or one refused: both are the REST code UPSTREAM_ERROR (C7) where a route maps them.
  assert.equal(NoUpstreamError.code, 'UPSTREAM_ERROR');
  assert.equal(NetworkDownError.code, NoUpstreamError.code, 'a network down answers as "no upstream"');
  assert.ok(new NetworkDownError('n', []) instanceof NoUpstreamError, 'a network down is still "no upstream" (-32000)');
});
