// C60 for the answers Fastify sends (boundFastifyAnswers, src/http/outbound.ts), on a plain Fastify
// server: a client that never reads a Buffer, text or streamed answer is cut by the write timeout
// and counted as the RPC's cuts are (Outbound.cuts); a REST connection holding unsent bytes counts
// against the instance's room and is cut for a large answer that would pass it; small and injected
// answers leave nothing watched. The real gateway process: test/main/slow-consumers.test.ts.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { Readable } from 'node:stream';
import { describe, test } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { boundFastifyAnswers, Outbound } from '../../src/http/outbound.ts';
import { waitFor } from '../support/wait.ts';

const MiB = 1024 * 1024;
/** Answers of 1 MiB that are more than the kernel's buffers on both ends of a loopback connection hold (about 4 MiB). */
const PAST_KERNEL = 12;

async function serve(opts: { writeTimeoutMs: number; maxPendingBytes: number }): Promise<{ app: FastifyInstance; outbound: Outbound; port: number }> {
  const outbound = new Outbound({ ...opts, logger: pino({ level: 'silent' }) });
  const app = Fastify();
  boundFastifyAnswers(app, outbound);
  const big = Buffer.alloc(MiB, 0x61);
  app.get('/buffer', async (_req, reply) => reply.type('application/octet-stream').send(big));
  app.get('/text', async (_req, reply) => reply.type('text/plain').send(big.toString('latin1')));
  // 1 MiB in 16 pieces, piped by Fastify.
  const pieces = () => Readable.from(Array.from({ length: 16 }, () => big.subarray(0, 64 * 1024)));
  app.get('/stream', async (_req, reply) => reply.type('application/octet-stream').send(pieces()));
  app.get('/small', async () => ({ ok: true }));
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, outbound, port: (app.server.address() as net.AddressInfo).port };
}

/** A client that asks for `url` `times` times down one connection (pipelined) and never reads. */
async function neverReads(port: number, url: string, times: number): Promise<net.Socket> {
  const s = net.connect({ host: '127.0.0.1', port });
  s.on('error', () => {});
  s.pause();
  await once(s, 'connect');
  s.write(`GET ${url} HTTP/1.1\r\nHost: x\r\n\r\n`.repeat(times));
  return s;
}

describe('boundFastifyAnswers', () => {
  test('a client that never reads a Buffer, text or streamed answer is cut within server.writeTimeoutMs and counted as a write-timeout cut; a reading client gets it whole (C60)', async () => {
    const { app, outbound, port } = await serve({ writeTimeoutMs: 500, maxPendingBytes: 256 * MiB });
    const clients: net.Socket[] = [];
    try {
      for (const url of ['/buffer', '/text', '/stream']) {
        const before = outbound.cuts.writeTimeout;
        clients.push(await neverReads(port, url, PAST_KERNEL));
        await waitFor(() => outbound.cuts.writeTimeout === before + 1, { what: `the client of ${url} cut` });
        assert.equal(outbound.cuts.instanceCap, 0);
        const res = await fetch(`http://127.0.0.1:${port}${url}`);
        assert.equal((await res.arrayBuffer()).byteLength, MiB, `${url} whole to a reading client`);
      }
      await waitFor(() => outbound.watched === 0, { what: 'no socket left watched' });
    } finally {
      for (const s of clients) s.destroy();
      await app.close();
    }
  });

  test('a connection holding a REST answer unsent counts against server.maxPendingBytes: a large answer that would pass it cuts it, long before the write timeout (C60)', async () => {
    const { app, outbound, port } = await serve({ writeTimeoutMs: 60_000, maxPendingBytes: 1.5 * MiB });
    const holder = await neverReads(port, '/buffer', PAST_KERNEL);
    try {
      await waitFor(() => outbound.pendingBytes() > MiB / 2, { what: 'an answer held unsent' });
      const res = await fetch(`http://127.0.0.1:${port}/buffer`);
      assert.equal((await res.arrayBuffer()).byteLength, MiB);
      assert.equal(outbound.cuts.instanceCap, 1);
      assert.equal(outbound.cuts.writeTimeout, 0);
      await waitFor(() => outbound.watched === 0, { what: 'the holder forgotten' });
    } finally {
      holder.destroy();
      await app.close();
    }
  });

  test('answers flushed at once, and injected requests, leave nothing watched', async () => {
    const { app, outbound, port } = await serve({ writeTimeoutMs: 500, maxPendingBytes: 256 * MiB });
    try {
      assert.deepEqual(await (await fetch(`http://127.0.0.1:${port}/small`)).json(), { ok: true });
      assert.equal(outbound.watched, 0);
      for (const url of ['/buffer', '/text', '/stream']) {
        const res = await app.inject(url);
        assert.equal(res.rawPayload.length, MiB, url);
      }
      assert.equal(outbound.watched, 0);
      assert.deepEqual(outbound.cuts, { writeTimeout: 0, instanceCap: 0 });
    } finally {
      await app.close();
    }
  });
});
