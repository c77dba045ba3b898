// C26: after its upstream WebSocket reconnects, a subscription hub fetches what a newHeads topic
// missed (src/upstreams/ws/gap-fill.ts): at most gapFillMaxBlocks blocks (the latest), each cut to
// the members of a live header, then live ones, none twice. A hub of its own in front of a
// scripted node's WebSocket side. Subscribers of the gateway on a devnet chain whose connection
// is cut: test/rpc/ws/gap-fill.test.ts.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import pino from 'pino';
import WebSocket, { WebSocketServer } from 'ws';
import { loadConfig } from '../../src/config/load.ts';
import { SubscriptionHub, type Notification } from '../../src/upstreams/ws/subscription-hub.ts';
import { parseTopic, type Topic } from '../../src/upstreams/ws/topic.ts';
import { waitFor } from '../support/wait.ts';

const wsConfig = loadConfig({ env: {} }).ws;

describe('gap fill on a scripted node', () => {
  test('fills at most gapFillMaxBlocks blocks (the latest), then live ones; a block seen twice is sent once', async () => {
    // A node's WebSocket side that answers what the hub asks and emits heads when told.
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await once(server, 'listening');
    let head = 0;
    const block = (n: number) => ({ number: `0x${n.toString(16)}`, hash: `0x${n.toString(16).padStart(64, '0')}`, parentHash: `0x${(n - 1).toString(16).padStart(64, '0')}` });
    const subs = new Set<{ ws: WebSocket; id: string }>();
    server.on('connection', (ws) => {
      ws.on('error', () => {});
      ws.on('message', (data: Buffer) => {
        const m = JSON.parse(data.toString('utf8')) as { id: number; method: string; params: unknown[] };
        const answer = (result: unknown) => ws.send(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
        if (m.method === 'eth_subscribe') {
          const id = `0x${subs.size + 1}`;
          subs.add({ ws, id });
          answer(id);
        } else if (m.method === 'eth_blockNumber') answer(`0x${head.toString(16)}`);
        else if (m.method === 'eth_getBlockByNumber') {
          const n = Number.parseInt(m.params[0] as string, 16);
          answer(n <= head ? { ...block(n), transactions: [] } : null);
        } else answer(true);
      });
    });
    const emit = (n: number) => {
      for (const s of subs) if (s.ws.readyState === WebSocket.OPEN) s.ws.send(JSON.stringify({ jsonrpc: '2.0', method: 'eth_subscription', params: { subscription: s.id, result: block(n) } }));
    };
    // The gateway's hub settings, reconnecting fast and filling at most 3 blocks.
    const hub = new SubscriptionHub({
      network: 'ethereum',
      urls: [`ws://127.0.0.1:${(server.address() as AddressInfo).port}`],
      logger: pino({ level: 'silent' }),
      timeoutMs: 5_000,
      reconnectMinMs: 50,
      reconnectMaxMs: 200,
      pingIntervalMs: wsConfig.pingIntervalMs,
      idleTimeoutMs: wsConfig.idleTimeoutMs,
      gapFillMaxBlocks: 3,
    });
    const received: Array<Record<string, unknown>> = [];
    const subscriber = { deliver: (note: Notification) => void received.push(JSON.parse(note.resultText) as Record<string, unknown>) };
    const numbers = () => received.map((r) => Number(r.number));
    try {
      await hub.subscribe(parseTopic(['newHeads']) as Topic, subscriber);
      for (head = 1; head <= 2; head++) emit(head);
      head = 2;
      await waitFor(() => numbers().length === 2, { what: 'two live blocks' });
      // The connection drops; the node moves on by 18 blocks meanwhile.
      head = 20;
      for (const s of subs) s.ws.terminate();
      subs.clear();
      await waitFor(() => subs.size === 1, { what: 'the hub subscribed again' });
      await waitFor(() => numbers().length === 5, { what: 'three filled blocks' });
      emit(20); // live, already filled: not sent again
      head = 21;
      emit(21);
      await waitFor(() => numbers().at(-1) === 21, { what: 'a live block after the fill' });
      assert.deepEqual(numbers(), [1, 2, 18, 19, 20, 21]);
      assert.deepEqual(Object.keys(received[2] ?? {}).sort(), ['hash', 'number', 'parentHash'], 'cut to the members of a live header');
      assert.equal(hub.stats().duplicatesDropped, 1);
    } finally {
      await hub.close();
      for (const ws of server.clients) ws.terminate();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
