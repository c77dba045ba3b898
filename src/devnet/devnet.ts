// C31: `--devnet` runs one local anvil chain per network, with that network's chainId, so that
// every feature works on one machine with no internet. Tests start the same devnet.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Address } from 'viem';
import { privateKeyToAddress } from 'viem/accounts';
import { ANVIL_DEV_KEYS } from '../config/weak-secrets.ts';
import { type AnvilOptions, AnvilProcess } from './anvil.ts';
import { deployPriceFeed, setFeedPrice } from './feeds.ts';
import { rpc } from '../json/rpc-client.ts';
import { type DevnetTraffic, startDevnetTraffic } from './traffic.ts';
import { startXdposResponder, type XdposResponder } from './xdpos.ts';
import { DevnetError } from '../errors/devnet.ts';

export { anvilBinary } from './anvil.ts';

/** A network to run locally. */
export interface DevnetNetwork {
  slug: string;
  chainId: number;
  /** Native networks mine on a timer (C31); the others mine one block per transaction. */
  native?: boolean;
}

/** Where devnet progress and failures are reported (a pino logger fits). */
export interface DevnetLogger {
  debug?(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface DevnetOptions {
  networks: readonly DevnetNetwork[];
  /** Native networks mine a block at least this often, in seconds (C31: at most 2). */
  nativeBlockTimeSeconds: number;
  /** Extra addresses funded on every chain, e.g. the faucet wallets. */
  fund?: readonly `0x${string}`[];
  /** Balance given to each `fund` address, in wei; default 1,000,000 ether. */
  fundAmountWei?: bigint;
  /** C45: USD per native coin in the price feed deployed on each native chain; default 0.05. */
  nativeUsdPrice?: number;
  /** C45: seconds between dev account 9's whale transfers on each native chain; 0 or undefined: none. */
  whaleEverySeconds?: number;
  /**
   * A folder where each chain keeps its state (`<slug>.json`, anvil --state): a restart finds the
   * chains as they were, in step with the database. Undefined: chains live in memory only.
   */
  stateDir?: string;
  /** Seconds between heartbeats that keep the feeds' prices fresh (C34's maxAgeSeconds); default 600, 0: none. */
  feedHeartbeatSeconds?: number;
  logger?: DevnetLogger;
}

export interface Devnet {
  /** Per slug: the chain's local HTTP address (native chains: the XDPoS responder in front of anvil, which passes everything else on) and anvil's WS address. */
  upstreams: Record<string, { http: string; ws: string }>;
  /**
   * anvil's 10 dev accounts (address + private key), 10,000,000 coins each on every chain (C45).
   * Indexes 0-8 are for users and tests; index 9 is the devnet's own: it owns the price feeds and
   * sends the whale transfers.
   */
  accounts: readonly { address: `0x${string}`; privateKey: `0x${string}` }[];
  /** Per native network: the address of its price feed (contracts/DevPriceFeed.sol, C45). */
  priceFeeds: Readonly<Record<string, Address>>;
  /** Sets a native network's feed to `usd` per coin, updated at `updatedAt` (unix seconds; default: now); resolves once mined. */
  setPrice(slug: string, usd: number, updatedAt?: number): Promise<void>;
  /** Per slug: the anvil process id (a restarted chain's new one), for diagnostics and for tests that check nothing is left running. */
  pids: Readonly<Record<string, number>>;
  /**
   * Announces a stop: from now on a chain that exits (a stop signal sent to the whole process
   * group reaches the chains too) is neither an error nor restarted. stop() implies it.
   */
  beginStop(): void;
  /** Stops every chain; resolves when all anvil processes have exited (SIGTERM, then SIGKILL after ~3 s). Idempotent. */
  stop(): Promise<void>;
}

/** How long one chain may take to answer eth_chainId before the start fails. */
const READY_TIMEOUT_MS = 30_000;
const POLL_INTERVAL_MS = 50;
const DEFAULT_FUND_WEI = 1_000_000n * 10n ** 18n;
/** C45: whole coins each dev account holds on every chain. */
const DEV_ACCOUNT_COINS = 10_000_000;
const DEFAULT_NATIVE_USD = 0.05;
const DEFAULT_FEED_HEARTBEAT_SECONDS = 600;
/** A chain that exits on its own is restarted after this, doubled after each failed try up to RESTART_MAX_MS. */
const RESTART_FIRST_MS = 1_000;
const RESTART_MAX_MS = 30_000;
/** A chain stopped by a signal from outside waits this long for the gateway's own stop before it is restarted. */
const SIGNALLED_GRACE_MS = 3_000;

// The keys anvil derives from its default mnemonic "test test ... junk", public knowledge and
// funded with 10,000,000 coins each on every chain. Never used elsewhere: C59 refuses them outside
// the devnet.
const DEV_KEYS = ANVIL_DEV_KEYS;

/**
 * `networks[].blockTimeMs` of a network on its devnet chain: anvil mines a block per transaction
 * and as many as asked at once (`anvil_mine`), so the chain has no pace of its own; a head may
 * move as fast as on the fastest shipped chain (C26: the head jump bound).
 */
export const DEVNET_BLOCK_TIME_MS = 250;

const DEV_ACCOUNTS = Object.freeze(
  DEV_KEYS.map((privateKey) => Object.freeze({ address: privateKeyToAddress(privateKey), privateKey })),
);
/** C45: the devnet's own account (index 9): owner of the price feeds, sender of the whale transfers. */
const DEVNET_ACCOUNT = DEV_ACCOUNTS[9]?.address as Address;

const consoleLogger: DevnetLogger = {
  info: () => {},
  warn: (obj, msg) => console.warn(msg ?? '', obj),
  error: (obj, msg) => console.error(msg ?? '', obj),
};

/**
 * Starts one anvil chain per network and resolves once every chain answers `eth_chainId` with
 * its network's chainId and the `fund` addresses hold their balance (C31).
 *
 * If a chain does not come up within ~30 s, every chain is stopped and the promise rejects with
 * an error naming the network. The chains die with this process: on Linux through the kernel
 * (setpriv --pdeathsig, even if this process is SIGKILLed), and elsewhere on a normal exit.
 * Call it from the main thread: the kernel ties pdeathsig to the spawning thread.
 */
export async function startDevnet(opts: DevnetOptions): Promise<Devnet> {
  const logger = opts.logger ?? consoleLogger;
  const startedAt = Date.now();
  const slugs = new Set<string>();
  for (const n of opts.networks) {
    if (slugs.has(n.slug)) throw new DevnetError(`devnet: network "${n.slug}" is listed twice`);
    slugs.add(n.slug);
  }

  if (opts.stateDir !== undefined) mkdirSync(opts.stateDir, { recursive: true, mode: 0o700 });
  const anvilOptions = (network: DevnetNetwork, port?: number): AnvilOptions => ({
    chainId: network.chainId,
    ...(network.native ? { blockTimeSeconds: opts.nativeBlockTimeSeconds } : {}),
    accountBalanceCoins: DEV_ACCOUNT_COINS,
    ...(opts.stateDir === undefined ? {} : { statePath: path.join(opts.stateDir, `${network.slug}.json`) }),
    ...(port === undefined ? {} : { port }),
  });
  const chains = opts.networks.map((network) => ({ network, anvil: new AnvilProcess(anvilOptions(network)) }));

  let traffic: DevnetTraffic | undefined = undefined; // started once every chain is up
  const responders: XdposResponder[] = [];
  let stopped: Promise<void> | undefined;
  let ending = false;
  const stop = (): Promise<void> => {
    ending = true;
    stopped ??= (async () => {
      await traffic?.stop();
      await Promise.all(responders.map((r) => r.close()));
      await Promise.all(chains.map((c) => c.anvil.stop()));
    })();
    return stopped;
  };

  const fund = opts.fund ?? [];
  const fundHex = `0x${(opts.fundAmountWei ?? DEFAULT_FUND_WEI).toString(16)}`;
  const results = await Promise.allSettled(
    chains.map(async ({ network, anvil }) => {
      const url = await whenReady(network, anvil);
      const [, , feed, responder] = await Promise.all([
        // Per-request lines on stdout would cost CPU under load, and nobody reads them.
        rpc(url, 'anvil_setLoggingEnabled', [false]),
        (async () => {
          for (const address of fund) await rpc(url, 'anvil_setBalance', [address, fundHex]);
        })(),
        // C45: every native chain gets a price feed, deployed as the chains come up (not one after another).
        network.native ? deployPriceFeed(url, DEVNET_ACCOUNT, `${network.slug} / USD`, opts.nativeUsdPrice ?? DEFAULT_NATIVE_USD) : undefined,
        // C25: anvil has no XDPoS methods; a responder in front of each native chain answers them.
        network.native ? startXdposResponder({ anvilUrl: url, accounts: DEV_ACCOUNTS.map((a) => a.address) }) : undefined,
      ]);
      if (responder) responders.push(responder);
      return { url, feed, responder };
    }),
  );

  const failures = results.flatMap((r, i) => (r.status === 'rejected' ? [{ r, chain: chains[i] }] : []));
  if (failures.length > 0) {
    await stop();
    const reasons = failures.map(({ r, chain }) => {
      const reason: unknown = r.status === 'rejected' ? r.reason : undefined;
      const cause = reason instanceof Error ? reason.message : String(reason);
      const stderr = chain?.anvil.stderrTail();
      return `network "${chain?.network.slug}" (chainId ${chain?.network.chainId}): ${cause}${stderr ? `; anvil stderr: ${stderr}` : ''}`;
    });
    throw new DevnetError(`devnet: ${failures.length} chain(s) did not come up: ${reasons.join(' | ')}`);
  }

  const upstreams: Devnet['upstreams'] = {};
  const pids: Record<string, number> = {};
  const priceFeeds: Record<string, Address> = {};
  const chainUrls: Record<string, string> = {};
  results.forEach((r, i) => {
    const chain = chains[i];
    if (r.status !== 'fulfilled' || !chain) return;
    const { slug } = chain.network;
    const { url, feed, responder } = r.value;
    // HTTP through the XDPoS responder on native chains; WebSocket straight to anvil (same port as its HTTP).
    upstreams[slug] = { http: responder?.url ?? url, ws: url.replace(/^http/, 'ws') };
    chainUrls[slug] = url;
    if (feed) priceFeeds[slug] = feed;
    pids[slug] = chain.anvil.pid;
    supervise(chain, new URL(url).port, feed !== undefined);
  });

  /**
   * A chain that exits while the devnet runs is restarted on its port, from its state file where
   * it has one (a node panic must not leave the network answering 502 until the next start);
   * meanwhile its upstream is down, as readiness and the pool's health show. An exit after
   * beginStop() or stop() is expected: nothing is logged at error level and nothing restarted.
   */
  function supervise(chain: { network: DevnetNetwork; anvil: AnvilProcess }, port: string, hasFeed: boolean, tries = 0): void {
    const slug = chain.network.slug;
    const started = Date.now();
    void chain.anvil.exited.then(async ({ code, signal }) => {
      // Never throw from here: a dead chain is the gateway's upstream failing, not a crash.
      if (ending || chain.anvil.stopping) return;
      const signalled = code === 0 || signal === 'SIGTERM' || signal === 'SIGINT' || signal === 'SIGHUP';
      if (signalled) {
        // A stop sent to the process group reaches anvil before the gateway's own stop has begun.
        logger.info({ network: slug, code, signal }, 'devnet chain stopped by a signal');
        await sleep(SIGNALLED_GRACE_MS);
        if (ending) return;
      } else {
        logger.error({ network: slug, code, signal, stderr: chain.anvil.stderrTail() }, 'devnet chain exited unexpectedly; restarting it');
      }
      // A chain that ran a minute before dying starts the back-off anew.
      const attempt = Date.now() - started > 60_000 ? 0 : tries;
      await sleep(Math.min(RESTART_MAX_MS, RESTART_FIRST_MS * 2 ** attempt));
      if (ending) return;
      chain.anvil = new AnvilProcess(anvilOptions(chain.network, Number(port)));
      pids[slug] = chain.anvil.pid;
      try {
        const url = await whenReady(chain.network, chain.anvil);
        await rpc(url, 'anvil_setLoggingEnabled', [false]);
        if (opts.stateDir === undefined) {
          // No state file: a new chain, set up as at the start (the feed lands at the same address: same deployer, nonce 0).
          for (const address of fund) await rpc(url, 'anvil_setBalance', [address, fundHex]);
          if (hasFeed) await deployPriceFeed(url, DEVNET_ACCOUNT, `${slug} / USD`, opts.nativeUsdPrice ?? DEFAULT_NATIVE_USD);
        }
        logger.warn({ network: slug, pid: chain.anvil.pid, fromState: opts.stateDir !== undefined }, 'devnet chain restarted');
        supervise(chain, port, hasFeed, 0);
      } catch (err) {
        if (ending) return;
        logger.error({ network: slug, err: err instanceof Error ? err.message : String(err), stderr: chain.anvil.stderrTail() }, 'devnet chain did not restart; trying again');
        await chain.anvil.stop();
        supervise(chain, port, hasFeed, attempt + 1);
      }
    });
  }

  traffic = startDevnetTraffic({
    chains: Object.entries(priceFeeds).map(([slug, feed]) => ({ slug, url: chainUrls[slug] ?? '', feed })),
    account: DEVNET_ACCOUNT,
    whaleEverySeconds: opts.whaleEverySeconds ?? 0,
    feedHeartbeatSeconds: opts.feedHeartbeatSeconds ?? DEFAULT_FEED_HEARTBEAT_SECONDS,
    logger,
  });

  const setPrice = async (slug: string, usd: number, updatedAt?: number): Promise<void> => {
    const feed = priceFeeds[slug];
    const url = chainUrls[slug];
    if (!feed || !url) throw new Error(`devnet: network "${slug}" has no price feed (only native networks do)`);
    const send = () => setFeedPrice(url, feed, DEVNET_ACCOUNT, usd, updatedAt);
    await (traffic ? traffic.sendInTurn(slug, send) : send());
  };

  // The start says it in its own lines (main.ts); the details at debug.
  logger.debug?.(
    { networks: chains.length, ms: Date.now() - startedAt, priceFeeds, whaleEverySeconds: opts.whaleEverySeconds ?? 0 },
    'devnet ready',
  );
  const beginStop = () => {
    ending = true;
  };
  return { upstreams, accounts: DEV_ACCOUNTS, pids, priceFeeds: Object.freeze(priceFeeds), setPrice, beginStop, stop };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/** Waits for anvil's port, then for eth_chainId to return the expected id; returns the HTTP URL. */
async function whenReady(network: DevnetNetwork, anvil: AnvilProcess): Promise<string> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DevnetError(`no "Listening on" line within ${READY_TIMEOUT_MS / 1000} s`)), READY_TIMEOUT_MS);
  });
  let port: number;
  try {
    port = await Promise.race([anvil.port, timeout]);
  } finally {
    clearTimeout(timer);
  }
  const url = `http://127.0.0.1:${port}`;
  let last = 'no answer';
  while (Date.now() < deadline) {
    if (!anvil.running) throw new DevnetError('anvil exited during start');
    try {
      const id = await rpc(url, 'eth_chainId', [], { timeoutMs: 1_000 });
      if (Number(id) === network.chainId) return url;
      last = `eth_chainId returned ${String(id)}`;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    await new Promise((r) => setTimeout(r, POLL_INTERVAL_MS));
  }
  throw new DevnetError(`did not answer eth_chainId with ${network.chainId} within ${READY_TIMEOUT_MS / 1000} s (${last})`);
}
