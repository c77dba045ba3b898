import { once } from 'node:events';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface WaitOptions {
  /** Give up after this many milliseconds (default 10 s: generous, for a loaded machine). */
  timeoutMs?: number;
  /** Milliseconds between two checks (default 20). */
  intervalMs?: number;
  /** What is awaited, for the timeout message. */
  what?: string;
}

/**
 * Polls `predicate` until it gives something other than `undefined`, `null` or `false`, and
 * returns that. Throws after `timeoutMs`, naming `what`. Use it instead of a fixed sleep whenever
 * a test waits for something to happen: it returns as soon as it has, and waits longer on a busy
 * machine instead of failing.
 */
export async function waitFor<T>(
  predicate: () => T | Promise<T>,
  { timeoutMs = 10_000, intervalMs = 20, what = 'condition' }: WaitOptions = {},
): Promise<Exclude<T, undefined | null | false>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await predicate();
    if (value !== undefined && value !== null && value !== false) return value as Exclude<T, undefined | null | false>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** A free TCP port on 127.0.0.1 (free when asked; taken by whoever listens first after). */
export async function freePort(): Promise<number> {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address() as net.AddressInfo;
  srv.close();
  await once(srv, 'close');
  return port;
}

/**
 * Within `marginMs` of a UTC midnight, waits until just past it: a test that makes calls (or writes
 * rows for "today") and then reads "today" must not have them land on one day and its reads on the
 * next (C11: days are UTC). The runner runs it before every test (test/support/day-guard.ts).
 */
export async function clearOfMidnight(marginMs = 30_000): Promise<void> {
  const left = 86_400_000 - (Date.now() % 86_400_000);
  if (left < marginMs) await sleep(left + 100);
}
