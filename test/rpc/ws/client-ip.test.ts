// The client address of a WebSocket upgrade follows Fastify's trustProxy rules
// (`server.trustedProxies`): X-Forwarded-For is believed only from a trusted peer.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { test } from 'node:test';
import { clientIpResolver } from '../../../src/rpc/client-ip.ts';

const req = (peer: string, forwarded?: string) =>
  ({ socket: { remoteAddress: peer }, headers: forwarded === undefined ? {} : { 'x-forwarded-for': forwarded } }) as unknown as IncomingMessage;

test('without trusted proxies the peer address is the client, whatever X-Forwarded-For says', () => {
  const ip = clientIpResolver([]);
  assert.equal(ip(req('10.0.0.5', '1.2.3.4')), '10.0.0.5');
  assert.equal(ip(req('::ffff:127.0.0.1')), '127.0.0.1');
});

test('behind trusted proxies the nearest untrusted address of X-Forwarded-For is the client', () => {
  const ip = clientIpResolver(['10.0.0.0/8', '192.168.1.1']);
  assert.equal(ip(req('10.1.2.3', '1.2.3.4')), '1.2.3.4');
  assert.equal(ip(req('10.1.2.3', '6.6.6.6, 1.2.3.4, 192.168.1.1')), '1.2.3.4', 'a spoofed leftmost entry is ignored');
  assert.equal(ip(req('10.1.2.3')), '10.1.2.3', 'no header: the proxy itself');
  assert.equal(ip(req('8.8.8.8', '1.2.3.4')), '8.8.8.8', 'an untrusted peer cannot forward');
  assert.equal(clientIpResolver(['loopback'])(req('::ffff:127.0.0.1', '5.6.7.8')), '5.6.7.8', "proxy-addr's named ranges work too");
});
