// The client address of a request, under the same trusted-proxy rules as Fastify's.
import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';

// The names proxy-addr (Fastify's trustProxy) accepts for address ranges.
const NAMED: Record<string, string[]> = {
  loopback: ['127.0.0.1/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
};

/** `::ffff:1.2.3.4` (IPv4 on an IPv6 socket) as `1.2.3.4`. */
function plain(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

/**
 * The client address of a request (HTTP or WebSocket upgrade) under the same trust rules as Fastify's
 * `trustProxy` (`server.trustedProxies`): the peer address, or, when the peer is a trusted proxy,
 * the nearest address in `X-Forwarded-For` that is not one.
 */
export function clientIpResolver(trustedProxies: readonly string[]): (req: IncomingMessage) => string {
  const trusted = new BlockList();
  for (const entry of trustedProxies.flatMap((e) => NAMED[e] ?? [e])) {
    const [address = '', prefix] = entry.split('/');
    const family = isIP(address);
    if (family === 0) continue; // Fastify refused the start already for a bad entry
    const type = family === 6 ? 'ipv6' : 'ipv4';
    if (prefix === undefined) trusted.addAddress(address, type);
    else trusted.addSubnet(address, Number(prefix), type);
  }
  const isTrusted = (address: string) => {
    const family = isIP(address);
    return family !== 0 && trusted.check(address, family === 6 ? 'ipv6' : 'ipv4');
  };
  return (req) => {
    const peer = plain(req.socket.remoteAddress ?? '');
    if (trustedProxies.length === 0 || !isTrusted(peer)) return peer;
    const header = req.headers['x-forwarded-for'];
    const forwarded = (Array.isArray(header) ? header.join(',') : (header ?? '')).split(',').map((s) => plain(s.trim())).filter(Boolean);
    let client = peer;
    for (let i = forwarded.length - 1; i >= 0; i--) {
      client = forwarded[i] as string;
      if (!isTrusted(client)) break;
    }
    return client;
  };
}
