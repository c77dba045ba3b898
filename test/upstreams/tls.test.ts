// HTTPS upstreams: every pool's connections share one TLS context (src/upstreams/http/state.ts), which
// must still verify each node's certificate and name. A node with a self-signed certificate for
// the name localhost (not its address), made here with openssl: untrusted, it is refused; trusted (NODE_EXTRA_CA_CERTS, read
// once when a process starts, hence a child process), it answers through two pools, and the
// same certificate reached under another name is refused.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { NoUpstreamError } from '../../src/errors/upstream.ts';
import { pool } from './helpers.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

describe('HTTPS upstreams (one shared TLS context)', () => {
  let dir: string;
  let server: Server;
  let port: number;
  let calls = 0;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'junction-tls-'));
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
      '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost',
      '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'),
    ], { stdio: 'ignore' });
    server = createServer({ key: readFileSync(path.join(dir, 'key.pem')), cert: readFileSync(path.join(dir, 'cert.pem')) }, (req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        calls++;
        const { id } = JSON.parse(body) as { id: number };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id, result: '0x2a' }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  after(async () => {
    await new Promise((resolve) => server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  test('a node whose certificate no CA vouches for is refused; nothing reaches it', async () => {
    const before = calls;
    const p = pool([`https://localhost:${port}`]);
    const err = await p.request('eth_blockNumber', []).then(
      () => assert.fail('an untrusted certificate was accepted'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof NoUpstreamError, String(err));
    assert.match(JSON.stringify(err.attempts), /SELF_SIGNED|CERT/);
    assert.equal(calls, before, 'no request was written to the node');
  });

  test('trusted, it answers through two pools sharing the context; under a name the certificate lacks it is refused', async () => {
    const script = `
      import { UpstreamPool } from ${JSON.stringify(path.join(ROOT, 'src/upstreams/http/pool.ts'))};
      const make = (http) => new UpstreamPool({ network: 'tls', upstreams: [{ http }], requestTimeoutMs: 3000, totalTimeoutMs: 4000 });
      const out = {};
      const a = make('https://localhost:${port}');
      const b = make('https://localhost:${port}/second');
      out.a = await a.request('eth_blockNumber', []);
      out.b = await b.request('eth_chainId', []);
      // The same node by its address, which the certificate does not name.
      const c = make('https://127.0.0.1:${port}');
      out.c = await c.request('eth_blockNumber', []).then(() => 'accepted', (e) => JSON.stringify(e.attempts));
      await Promise.all([a.close(), b.close(), c.close()]);
      console.log(JSON.stringify(out));
    `;
    const file = path.join(dir, 'probe.mts');
    writeFileSync(file, script);
    // Not spawnSync: the node above answers from this very process.
    const child = spawn(process.execPath, ['--import', 'tsx', file], {
      cwd: ROOT,
      env: { ...process.env, NODE_EXTRA_CA_CERTS: path.join(dir, 'cert.pem') },
      timeout: 30_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(status, 0, stderr);
    const r = { stdout };
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1) as string) as { a: string; b: string; c: string };
    assert.equal(out.a, '0x2a');
    assert.equal(out.b, '0x2a');
    assert.notEqual(out.c, 'accepted');
    assert.match(out.c, /ALTNAME|CERT/);
  });
});
