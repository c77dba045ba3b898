// C56: the Node.js runtime settings a gateway process runs with, the same wherever it is started.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { startFlags } from '../../bench/lib/targets/gateway.ts';
import { V8_POOL_FLAG, workerExecArgv } from '../../src/ops/runtime.ts';
import { ROOT } from '../support/process.ts';

test('a worker gets V8\'s pool of one helper thread from its primary, unless the operator gave a pool size of their own', () => {
  assert.deepEqual(workerExecArgv([]), [V8_POOL_FLAG]);
  assert.deepEqual(workerExecArgv(['--enable-source-maps']), ['--enable-source-maps', V8_POOL_FLAG]);
  assert.deepEqual(workerExecArgv(['--v8-pool-size=4']), ['--v8-pool-size=4'], 'the operator\'s own size is kept');
  assert.deepEqual(workerExecArgv([V8_POOL_FLAG]), [V8_POOL_FLAG], 'not given twice');
});

test('npm start, the image\'s entrypoint and the bench start the gateway with the same runtime settings', () => {
  const start = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
  assert.ok(start.split(/\s+/).includes(V8_POOL_FLAG), `package.json start: ${start}`);
  const entrypoint = /^ENTRYPOINT (\[.*\])$/m.exec(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'))?.[1];
  assert.ok(entrypoint, 'the Dockerfile has an ENTRYPOINT');
  const words = JSON.parse(entrypoint) as string[];
  assert.deepEqual(words, ['node', V8_POOL_FLAG, 'dist/main.js']);
  // The bench runs dist/main.js with the options of the checkout's npm start.
  assert.deepEqual(startFlags(ROOT), [V8_POOL_FLAG]);
});
