// Shared by the SSRF tests (C39): a name of this machine that resolves to a loopback address.
import { lookup } from 'node:dns/promises';
import { hostname } from 'node:os';
import { isForbiddenAddress } from '../../src/webhooks/ssrf.ts';

/** A name of this machine that resolves to a loopback address (not spelled "localhost"), if any. */
export async function loopbackName(): Promise<string | undefined> {
  const name = hostname();
  try {
    const all = await lookup(name, { all: true });
    return all.length > 0 && all.every((a) => isForbiddenAddress(a.address)) && name !== 'localhost' ? name : undefined;
  } catch {
    return undefined;
  }
}
