// C39: webhook targets must not reach into the gateway's own network. A target that is, or
// resolves to, a loopback, private, link-local (cloud metadata), CGNAT, multicast, reserved or
// unspecified address, or any other range of IANA's IPv4 and IPv6 special-purpose registries, is refused, when the endpoint is made or changed and again at send time,
// where the connection goes to the very address that was checked (no second lookup to rebind).
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { ForbiddenTargetError } from '../errors/domain.ts';

const FORBIDDEN = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // CGNAT (also Alibaba's metadata 100.100.100.200)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (cloud metadata 169.254.169.254)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.31.196.0', 24], // AS112-v4
  ['192.52.193.0', 24], // AMT
  ['192.88.99.0', 24], // deprecated 6to4 relay anycast
  ['192.175.48.0', 24], // direct delegation AS112
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  FORBIDDEN.addSubnet(net, bits, 'ipv4');
}
for (const [net, bits] of [
  ['::', 96], // unspecified, loopback (::1), IPv4-compatible
  ['::ffff:0:0:0', 96], // IPv4-translated (SIIT): embeds an IPv4 address (IPv4-mapped ::ffff:a.b.c.d is checked as its IPv4)
  ['100:0:0:1::', 64], // dummy prefix
  ['2001::', 23], // IETF protocol assignments: Teredo (embeds an IPv4 address), benchmarking, ORCHID, AMT, AS112
  ['2620:4f:8000::', 48], // direct delegation AS112
  ['3fff::', 20], // documentation
  ['5f00::', 16], // SRv6 SIDs
  ['64:ff9b::', 96], // NAT64: could reach any IPv4 address, private ones too
  ['64:ff9b:1::', 48], // local-use NAT64
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4: embeds an IPv4 address
  ['fc00::', 7], // unique local (AWS metadata fd00:ec2::254)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const) {
  FORBIDDEN.addSubnet(net, bits, 'ipv6');
}

/** Whether `ip` (an IPv4 or IPv6 literal) may not be a webhook target. IPv4-mapped IPv6 is checked as its IPv4. */
export function isForbiddenAddress(ip: string): boolean {
  const family = isIP(ip);
  if (family === 4) return FORBIDDEN.check(ip, 'ipv4');
  if (family === 6) return FORBIDDEN.check(ip, 'ipv6');
  return true;
}

const stripBrackets = (host: string) => (host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host);

const lookupAll = (host: string): Promise<LookupAddress[]> =>
  new Promise((resolve, reject) => dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))));

/**
 * Checks a target host (a URL's `hostname`): an address literal directly, a name by resolving it.
 * Every address a name resolves to must be allowed. Throws ForbiddenTargetError with the reason.
 */
export async function checkTargetHost(hostname: string): Promise<void> {
  const host = stripBrackets(hostname).toLowerCase();
  if (isIP(host)) {
    if (isForbiddenAddress(host)) throw new ForbiddenTargetError(`${host} is a loopback, private, link-local or reserved address`);
    return;
  }
  if (host === 'localhost' || host.endsWith('.localhost')) throw new ForbiddenTargetError(`${host} is a loopback name`);
  let addresses: LookupAddress[];
  try {
    addresses = await lookupAll(host);
  } catch {
    throw new ForbiddenTargetError(`${host} does not resolve`);
  }
  const bad = addresses.find((a) => isForbiddenAddress(a.address));
  if (bad || addresses.length === 0) throw new ForbiddenTargetError(`${host} resolves to a loopback, private, link-local or reserved address`);
}

/**
 * A `connect.lookup` for the sender's HTTP agent: resolves the name, refuses it when any address
 * is forbidden, and hands the checked addresses to the socket, so the connection goes to an
 * address that was checked. (Address literals never reach a lookup: the sender checks them first.)
 */
export const guardedLookup: LookupFunction = (hostname, options, callback) => {
  const host = hostname.toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) {
    callback(new ForbiddenTargetError(`${host} is a loopback name`), '', 4);
    return;
  }
  dnsLookup(hostname, { ...options, all: true, verbatim: true }, (err, addresses) => {
    if (err) return callback(err, '', 4);
    const bad = addresses.find((a) => isForbiddenAddress(a.address));
    if (bad || addresses.length === 0) {
      return callback(new ForbiddenTargetError(`${hostname} resolves to a loopback, private, link-local or reserved address`), '', 4);
    }
    if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
    const first = addresses[0] as LookupAddress;
    callback(null, first.address, first.family);
  });
};
