// C45: life on the devnet's native chains. The last dev account (index 9) sends a whale-sized
// native transfer every `whaleEverySeconds` on each native chain, so whale alerts and webhooks
// have something to show, and the price feed of each chain gets a heartbeat so its price never
// turns stale. Both run in the gateway's process, are logged at debug, and never throw: a failed
// round is skipped, the next one comes on time.
import { randomBytes, randomInt } from 'node:crypto';
import type { Address, Hex } from 'viem';
import { refreshFeed } from './feeds.ts';
import { rpc } from '../json/rpc-client.ts';

/** Whole coins of one whale transfer: at least the whale-alert list's default minValue (C36). */
export const WHALE_MIN_COINS = 100_000;
export const WHALE_MAX_COINS = 500_000;
const WEI_PER_COIN = 10n ** 18n;
/** Below this balance the sender is topped up to TOP_UP_COINS (anvil_setBalance). */
const LOW_BALANCE_COINS = 1_000_000n;
const TOP_UP_COINS = 10_000_000n;

export interface TrafficLogger {
  debug?(obj: object, msg?: string): void;
}

export interface DevnetTrafficOptions {
  /** The native chains: slug, anvil's HTTP address, and the chain's price feed if it has one. */
  chains: readonly { slug: string; url: string; feed?: Address }[];
  /** The sending account (unlocked on anvil); it also owns the feeds. */
  account: Address;
  /** Seconds between whale transfers on each chain; 0: none. */
  whaleEverySeconds: number;
  /** Seconds between feed heartbeats; 0: none. */
  feedHeartbeatSeconds: number;
  logger?: TrafficLogger;
}

export interface DevnetTraffic {
  /** Runs `fn` once the chain's earlier sends (whale transfers, heartbeats) have ended. */
  sendInTurn<T>(slug: string, fn: () => Promise<T>): Promise<T>;
  /** Stops every loop; resolves once the rounds in progress have ended. Idempotent. */
  stop(): Promise<void>;
}

/** Starts the loops; the first round of each comes one interval after the start. */
export function startDevnetTraffic(opts: DevnetTrafficOptions): DevnetTraffic {
  const timers = new Set<NodeJS.Timeout>();
  const running = new Set<Promise<void>>();
  let stopped = false;
  const debug = (obj: object, msg: string) => opts.logger?.debug?.(obj, msg);
  // The whale transfers, the feed heartbeat and setPrice of a chain are all sent by one account:
  // two eth_sendTransaction calls in flight at once may be given the same nonce by the node
  // ("replacement transaction underpriced"), so a chain's sends take turns.
  const turns = new Map<string, Promise<unknown>>();
  const sendInTurn = <T>(slug: string, fn: () => Promise<T>): Promise<T> => {
    const p = (turns.get(slug) ?? Promise.resolve()).then(fn, fn);
    turns.set(slug, p.catch(() => undefined));
    return p;
  };

  /** Runs `round` every `seconds`, one at a time, until stopped. */
  const every = (seconds: number, round: () => Promise<void>) => {
    if (seconds <= 0) return;
    const schedule = () => {
      if (stopped) return;
      const timer = setTimeout(() => {
        timers.delete(timer);
        const p = round().finally(() => {
          running.delete(p);
          schedule();
        });
        running.add(p);
      }, seconds * 1000);
      timer.unref(); // never what keeps a process (or a test run) alive
      timers.add(timer);
    };
    schedule();
  };

  for (const chain of opts.chains) {
    const inTurn = <T>(fn: () => Promise<T>) => sendInTurn(chain.slug, fn);
    every(opts.whaleEverySeconds, async () => {
      try {
        const hash = await inTurn(() => sendWhale(chain.url, opts.account));
        debug({ network: chain.slug, ...hash }, 'devnet whale transfer sent');
      } catch (err) {
        if (!stopped) debug({ network: chain.slug, error: (err as Error).message }, 'devnet whale transfer failed');
      }
    });
    const feed = chain.feed;
    if (feed) {
      every(opts.feedHeartbeatSeconds, async () => {
        try {
          await inTurn(() => refreshFeed(chain.url, feed, opts.account));
          debug({ network: chain.slug, feed }, 'devnet price feed refreshed');
        } catch (err) {
          if (!stopped) debug({ network: chain.slug, error: (err as Error).message }, 'devnet price feed refresh failed');
        }
      });
    }
  }

  return {
    sendInTurn,
    async stop() {
      stopped = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      await Promise.allSettled([...running]);
    },
  };
}

/** Tops `from` up when it runs low, then sends a random whole amount of coins to a fresh address. */
async function sendWhale(url: string, from: Address): Promise<{ hash: Hex; to: Address; coins: number }> {
  // 'pending': transfers sent but not mined yet (a busy machine mines late) count against it.
  const topUp = () => rpc(url, 'anvil_setBalance', [from, `0x${(TOP_UP_COINS * WEI_PER_COIN).toString(16)}`]);
  const balance = BigInt(await rpc<Hex>(url, 'eth_getBalance', [from, 'pending']));
  if (balance < LOW_BALANCE_COINS * WEI_PER_COIN) await topUp();
  const coins = randomInt(WHALE_MIN_COINS, WHALE_MAX_COINS + 1);
  const to: Address = `0x${randomBytes(20).toString('hex')}`;
  const value = `0x${(BigInt(coins) * WEI_PER_COIN).toString(16)}`;
  const send = () => rpc<Hex>(url, 'eth_sendTransaction', [{ from, to, value }]);
  let hash: Hex;
  try {
    hash = await send();
  } catch (err) {
    // The balance changed between the read and the send (a test or a user spent it, or set it
    // with anvil_setBalance): top up and send once more, rather than skip the round.
    if (!/insufficient funds/i.test((err as Error).message)) throw err;
    await topUp();
    hash = await send();
  }
  return { hash, to, coins };
}
