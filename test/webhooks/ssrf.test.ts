// C39: targets that are, or resolve to, loopback, private, link-local or metadata addresses are
// refused: the address rules of src/webhooks/ssrf.ts. Refused on create and again at send time
// (after DNS resolution, on the address connected to): test/webhooks/ssrf-send.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { checkTargetHost, isForbiddenAddress } from '../../src/webhooks/ssrf.ts';
import { loopbackName } from './loopback-name.ts';

describe('SSRF guard: the address rules', () => {
  test('forbidden: loopback, private, link-local, CGNAT, multicast, unspecified, reserved, mapped and metadata addresses', () => {
    for (const ip of [
      '127.0.0.1',
      '127.255.255.254',
      '10.0.0.1',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.0.1',
      '169.254.169.254',
      '100.64.0.1',
      '100.100.100.200',
      '0.0.0.0',
      '224.0.0.251',
      '255.255.255.255',
      '::',
      '::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
      '::ffff:a9fe:a9fe',
      'fd00:ec2::254',
      'fe80::1',
      'ff02::1',
      '64:ff9b::a00:1',
      // IPv4-translated, and the rest of IANA's special-purpose registries
      '::ffff:0:7f00:1',
      '::ffff:0:a00:1',
      '192.31.196.1',
      '192.52.193.1',
      '192.88.99.1',
      '192.175.48.1',
      '2001::1',
      '2001:2::1',
      '2001:20::1',
      '100:0:0:1::1',
      '2620:4f:8000::1',
      '3fff::1',
      '5f00::1',
    ]) {
      assert.equal(isForbiddenAddress(ip), true, ip);
    }
  });

  test('allowed: public addresses', () => {
    for (const ip of ['93.184.215.14', '8.8.8.8', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '2001:4860:4860::8888', '::ffff:8.8.8.8']) {
      assert.equal(isForbiddenAddress(ip), false, ip);
    }
  });

  test('a name resolving to a loopback address is refused', async () => {
    await assert.rejects(checkTargetHost('localhost'), /loopback/);
    const name = await loopbackName();
    if (name) await assert.rejects(checkTargetHost(name), /resolves to a loopback/);
    await assert.rejects(checkTargetHost('no-such-host.invalid'), /does not resolve/);
  });
});
