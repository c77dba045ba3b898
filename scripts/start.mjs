#!/usr/bin/env node
// `npm start`: runs the compiled gateway (dist/main.js), building dist/ first when it is missing
// or older than src/ (scripts/build.mjs; `npm install` has normally built it already).
// The gateway runs in this very process, not in a child: a stop signal sent to `npm start` (which
// npm relays) or to its process group reaches the gateway itself, and nothing in between exits first.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build, DIST, staleness } from './build.mjs';

const stale = staleness();
if (stale) {
  const started = Date.now();
  process.stderr.write(`[start] dist/ is ${stale}: building\n`);
  try {
    const { built, removed } = await build();
    process.stderr.write(`[start] built ${built} file(s)${removed ? `, removed ${removed}` : ''} in ${Date.now() - started} ms\n`);
  } catch (err) {
    process.stderr.write(`[start] ${err.message}\n`);
    process.exit(1);
  }
}
// Source maps are in dist/ but off by default: with them on, Node reads the maps of every module
// it loads, node_modules included, which slows the start. NODE_OPTIONS=--enable-source-maps turns
// them on (stack traces then name the TypeScript files and lines).
await import(pathToFileURL(path.join(DIST, 'main.js')).href);
