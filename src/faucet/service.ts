// The testnet faucet (C28–C30): a grant checked, signed, recorded and sent once; the wallets'
// balances; re-broadcasting what a crash or a node left behind.
import type { Logger } from 'pino';
import type { Address, Hex } from 'viem';
import type { Networks } from '../chains/networks.ts';
import { CooldownError } from '../errors/domain.ts';
import { badRequest, HttpError } from '../errors/http.ts';
import type { Upstreams } from '../upstreams/upstreams.ts';
import { NoUpstreamError, UpstreamRpcError } from '../errors/upstream.ts';
import { PeriodicJob } from '../jobs/periodic.ts';
import { StorageOutageLog } from '../jobs/storage-outage.ts';
import type { Db } from '../storage/db.ts';
import { type Grant, GrantStore } from './grants.ts';
import { formatAmount } from '../onchain/amounts.ts';
import { broadcast, lookup } from '../onchain/transactions.ts';
import { readWallet } from '../onchain/wallets.ts';
import { signGrant, transferGas } from './sender.ts';
import { type GrantRequest, validateGrant } from './validate.ts';
import { type FaucetWallet, faucetWallets, type FaucetWalletSettings } from './wallets.ts';

/** What `POST /faucet/request` answers (spec: Faucet result). */
export interface FaucetResult {
  txHash: Hex;
  amount: string;
  network: string;
  recipient: Address;
}

/** One entry of `GET /faucet/balance` (spec: Faucet balance entry); `balance` null and `error` set when no node answered. */
export interface FaucetBalance {
  balance: string | null;
  symbol: string;
  faucetAddress: Address;
  error?: string;
}


/** Runs tasks one at a time per key, in call order. */
class KeyedLock {
  readonly #tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const prev = this.#tails.get(key) ?? Promise.resolve();
    const next = prev.catch(() => {}).then(task);
    this.#tails.set(key, next);
    const clear = () => {
      if (this.#tails.get(key) === next) this.#tails.delete(key);
    };
    next.then(clear, clear);
    return next;
  }
}

function hours(seconds: number): string {
  return seconds % 3600 === 0 ? `${seconds / 3600} hours` : `${seconds} seconds`;
}

/** A node failure before anything was recorded: C7 502. */
function upstreamFailure(network: string, err: unknown): unknown {
  if (err instanceof NoUpstreamError) return new HttpError(NoUpstreamError.code, `No node of ${network} answered; try again later`, { cause: err });
  if (err instanceof UpstreamRpcError) {
    return new HttpError(UpstreamRpcError.code, `The ${network} node refused the request: ${err.message}`, { cause: err });
  }
  return err;
}

/**
 * The testnet faucet (C28–C30). Grants on one network run one at a time in this process, and
 * across instances the nonce is allocated under a PostgreSQL advisory lock (GrantStore.reserve).
 * Each grant is recorded `pending` with its signed transaction before it is broadcast, so a
 * crash never leads to a second transaction: a restart re-broadcasts the same bytes, and so does
 * the periodic check for a sent transaction that a node dropped from its pool.
 */
export class FaucetService {
  readonly #wallets: ReadonlyMap<string, FaucetWallet>;
  readonly #grants: GrantStore;
  readonly #networks: Networks;
  readonly #upstreams: Upstreams;
  readonly #log: Logger;
  readonly #cooldownSeconds: number;
  /** How old (since recorded or sent) a grant not yet mined must be to be checked, in ms. */
  readonly #recheckAfterMs: number;
  readonly #lock = new KeyedLock();
  /** Settles grants not known to be mined, one sweep at a time (#reconcile). */
  readonly #sweeps: PeriodicJob;
  #closed = false;

  /** @throws ConfigError naming a bad faucet setting. */
  constructor(deps: { db: Db; settings: FaucetWalletSettings; networks: Networks; upstreams: Upstreams; logger: Logger }) {
    this.#wallets = new Map(faucetWallets(deps.settings).map((w) => [w.slug, w]));
    this.#cooldownSeconds = deps.settings.faucet.cooldownSeconds;
    this.#recheckAfterMs = deps.settings.faucet.recheckAfterSeconds * 1000;
    this.#sweeps = new PeriodicJob({
      // Not younger than recheckAfter after the first: another instance's grant in flight is left to finish first.
      run: (first) => this.#reconcile(first ? 0 : this.#recheckAfterMs),
      everyMs: deps.settings.faucet.recheckIntervalSeconds * 1000,
      onError: (err) => this.#log.error({ err }, 'faucet: checking unsettled grants failed'),
      outage: new StorageOutageLog(deps.logger.child({ component: 'faucet' }), 'faucet: checking unsettled grants'),
    });
    this.#grants = new GrantStore(deps.db, this.#cooldownSeconds);
    this.#networks = deps.networks;
    this.#upstreams = deps.upstreams;
    this.#log = deps.logger.child({ component: 'faucet' });
  }

  /** Slugs of the networks with a faucet wallet, in config order. */
  get networks(): string[] {
    return [...this.#wallets.keys()];
  }

  /**
   * Settles grants left unsettled before a restart (in the background: a node that is down does
   * not hold up the start), then checks every `faucet.recheckIntervalSeconds` the grants not yet
   * mined: pending ones are re-broadcast, sent ones the node dropped are sent again (#reconcile).
   */
  async start(): Promise<void> {
    if (this.#closed) return;
    this.#sweeps.start();
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#sweeps.stop();
  }

  /**
   * One grant (C28, C29): validates, checks the cooldowns and the wallet's balance, records the
   * grant with its nonce, broadcasts it, and answers once a node accepted it.
   *
   * @throws HttpError VALIDATION_ERROR 400, FAUCET_COOLDOWN 429 (with Retry-After),
   *   FAUCET_EMPTY 503, UPSTREAM_ERROR 502.
   */
  async grant(userId: string, body: GrantRequest): Promise<FaucetResult> {
    const { wallet, recipient, amountWei } = validateGrant(body, this.#wallets, this.#networks);
    const network = wallet.slug;
    const who = { network, recipient: recipient.toLowerCase(), userId };
    // An early answer that neither waits for other grants nor asks the node; checked again under the lock.
    this.#throwIfCooling(await this.#grants.cooldown(who));
    return this.#lock.run(network, async () => {
      const pool = this.#upstreams.pool(network);
      const state = await readWallet(pool, wallet.address).catch((err: unknown) => {
        throw upstreamFailure(network, err);
      });
      if (state.balance < amountWei + wallet.gasLimit * state.maxPerGas) throw this.#empty(wallet);
      // C28: a grant is a plain transfer of wallet.gasLimit gas. A recipient whose code reverts it,
      // or needs more gas to take it, would get nothing and the grant would still be spent: refused.
      const gas = await transferGas(pool, wallet.address, recipient, amountWei).catch((err: unknown) => {
        throw upstreamFailure(network, err);
      });
      if (typeof gas !== 'bigint' || gas > wallet.gasLimit) {
        const message =
          typeof gas !== 'bigint'
            ? `cannot receive this transfer: the node says ${gas.refused}`
            : `needs ${gas} gas to receive a transfer; the faucet sends ${wallet.gasLimit} (faucet.gasLimit)`;
        throw badRequest(`Invalid request: body.address ${message}`, [{ field: 'body.address', message }]);
      }

      let grant: Grant;
      try {
        grant = await this.#grants.reserve(
          { ...who, faucetAddress: wallet.address.toLowerCase(), amountWei },
          state.nonce,
          (nonce) => signGrant(wallet, recipient, amountWei, nonce, state.fees),
        );
      } catch (err) {
        if (err instanceof CooldownError) this.#throwIfCooling(err.wait);
        throw err;
      }

      const log = { network, grantId: grant.id, userId, recipient, nonce: grant.nonce, txHash: grant.txHash };
      const sent = await broadcast(pool, grant.rawTx, grant.txHash);
      switch (sent.kind) {
        case 'accepted':
          await this.#grants.markSent(grant.id);
          this.#log.info({ ...log, amountWei: amountWei.toString() }, 'faucet grant sent');
          return { txHash: grant.txHash, amount: formatAmount(amountWei, wallet.decimals), network, recipient };
        case 'refused':
        case 'unreached':
          await this.#grants.markFailed(grant.id, sent.reason);
          this.#log.warn({ ...log, reason: sent.reason }, 'faucet grant failed');
          if (sent.kind === 'refused' && sent.insufficientFunds) throw this.#empty(wallet);
          throw new HttpError(
            'UPSTREAM_ERROR',
            sent.kind === 'refused' ? `The ${network} node refused the transaction: ${sent.reason}` : `No node of ${network} answered; try again later`,
          );
        case 'unknown':
          // It may have reached a node: it stays pending (and counts), and is re-broadcast later.
          this.#log.warn({ ...log, reason: sent.reason }, 'faucet grant may have been sent; left pending');
          throw new HttpError('UPSTREAM_ERROR', `The ${network} node did not confirm the transaction; it is recorded and will be sent again`, {
            details: { txHash: grant.txHash, status: 'pending' },
          });
      }
    });
  }

  /** C30: every faucet wallet's balance, read live; a network whose node does not answer has `balance: null` and `error`. */
  async balances(): Promise<Record<string, FaucetBalance>> {
    const entries = await Promise.all(
      [...this.#wallets.values()].map(async (w): Promise<[string, FaucetBalance]> => {
        const base = { symbol: w.symbol, faucetAddress: w.address };
        try {
          const wei = await this.#upstreams.pool(w.slug).request<Hex>('eth_getBalance', [w.address, 'latest']);
          return [w.slug, { balance: formatAmount(BigInt(wei), w.decimals), ...base }];
        } catch (err) {
          const error = err instanceof NoUpstreamError ? 'no node of this network answered' : 'the node refused the balance query';
          return [w.slug, { balance: null, ...base, error }];
        }
      }),
    );
    return Object.fromEntries(entries);
  }

  #throwIfCooling(wait: { address: number; account: number }): void {
    const retryAfter = Math.max(wait.address, wait.account);
    if (retryAfter <= 0) return;
    const what = wait.address > 0 ? 'This address' : 'This account';
    throw new HttpError(CooldownError.code, `${what} already had a grant on this network within ${hours(this.#cooldownSeconds)}`, {
      headers: { 'retry-after': String(retryAfter) },
      details: { retryAfter, addressRetryAfter: wait.address, accountRetryAfter: wait.account },
    });
  }

  #empty(w: FaucetWallet): HttpError {
    return new HttpError('FAUCET_EMPTY', `The ${w.slug} faucet cannot pay this grant right now; try a smaller amount or later`);
  }

  /**
   * Brings the record in line with the node, lowest nonce first (a later grant waits behind an
   * earlier one):
   * - `pending` (recorded, not confirmed sent: a crash or a timeout): broadcast the stored bytes;
   * - `sent`: in a block, it becomes `mined`; still in the node's pool, it is left alone; unknown
   *   to the node (dropped from its pool), the stored bytes are sent again, which keeps the
   *   wallet's nonces without a gap, so the grants after it can be mined.
   * A node that refuses the bytes now (another transaction took the nonce, fees, funds) makes the
   * grant `failed`: its cooldown is given back and its nonce goes to the next grant. A node that
   * does not answer ends the network's round; the next one tries again.
   */
  async #reconcile(minAgeMs: number): Promise<void> {
    const byNetwork = new Map<string, Grant[]>();
    for (const g of await this.#grants.unsettled(minAgeMs)) {
      if (!this.#networks.has(g.network)) continue;
      byNetwork.set(g.network, [...(byNetwork.get(g.network) ?? []), g]);
    }
    await Promise.all(
      [...byNetwork].map(([network, grants]) =>
        this.#lock.run(network, async () => {
          const pool = this.#upstreams.pool(network);
          for (const g of grants) {
            if (this.#closed) return;
            const log = { network, grantId: g.id, nonce: g.nonce, txHash: g.txHash, status: g.status };
            if (g.status === 'sent') {
              let seen: Awaited<ReturnType<typeof lookup>>;
              try {
                seen = await lookup(pool, g.txHash);
              } catch (err) {
                this.#log.warn({ ...log, reason: err instanceof Error ? err.message : String(err) }, 'faucet: could not look up a sent grant; retrying later');
                return;
              }
              if (seen === 'mined') {
                await this.#grants.markMined(g.id);
                continue;
              }
              if (seen === 'reverted') {
                // The recipient's code refused the coins after the request was checked: nothing was granted.
                await this.#grants.markFailed(g.id, 'reverted on chain: the recipient did not take the transfer', 'sent');
                this.#log.warn(log, 'faucet: a grant reverted on chain; marked failed, its cooldown given back');
                continue;
              }
              if (seen === 'known') continue;
              this.#log.warn(log, 'faucet: the node no longer knows a sent grant; sending it again');
            }
            const sent = await broadcast(pool, g.rawTx, g.txHash);
            if (sent.kind === 'accepted') {
              if (g.status === 'pending') await this.#grants.markSent(g.id);
              else await this.#grants.markResent(g.id);
              this.#log.info(log, 'faucet: grant re-broadcast and accepted');
            } else if (sent.kind === 'refused') {
              await this.#grants.markFailed(g.id, sent.reason, g.status === 'sent' ? 'sent' : 'pending');
              this.#log.warn({ ...log, reason: sent.reason }, 'faucet: grant refused on re-broadcast; marked failed, its cooldown given back');
            } else {
              // The node is not answering: later nonces would only queue behind this one.
              this.#log.warn({ ...log, reason: sent.reason }, 'faucet: grant re-broadcast not confirmed; retrying later');
              return;
            }
          }
        }),
      ),
    );
  }
}
