// C41: the solver's own transactions (fill, settle, refund): recorded signed before they are
// sent, broadcast, and brought in line with the node after a crash or a dropped transaction.
import type { Logger } from 'pino';
import type { Address, Hex } from 'viem';
import { toHex } from 'viem/utils';
import type { sql } from 'drizzle-orm';
import { NoUpstreamError, UpstreamRpcError } from '../errors/upstream.ts';
import { broadcast } from '../onchain/transactions.ts';
import { readWallet } from '../onchain/wallets.ts';
import type { Upstreams } from '../upstreams/upstreams.ts';
import type { IntentsSetup } from './setup.ts';
import type { IntentTxKind } from './schema.ts';
import type { IntentRow, IntentStore, IntentTxRow } from './store.ts';

const errText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** Sends and re-sends the solver wallets' transactions; one per kind and intent (the store's claim). */
export class SolverTransactions {
  readonly #setup: IntentsSetup;
  readonly #store: IntentStore;
  readonly #upstreams: Upstreams;
  readonly #log: Logger;
  readonly #stats: { sent: Record<IntentTxKind, number> };
  /** True once the solver is closing: nothing more is sent. */
  readonly #closed: () => boolean;

  constructor(deps: {
    setup: IntentsSetup;
    store: IntentStore;
    upstreams: Upstreams;
    logger: Logger;
    stats: { sent: Record<IntentTxKind, number> };
    closed: () => boolean;
  }) {
    this.#setup = deps.setup;
    this.#store = deps.store;
    this.#upstreams = deps.upstreams;
    this.#log = deps.logger;
    this.#stats = deps.stats;
    this.#closed = deps.closed;
  }

  /**
   * One solver transaction: checks the wallet can pay and the call would succeed now (a call at
   * the pending block), records it signed (the claim: one per kind and intent), then broadcasts.
   */
  async send(row: IntentRow, kind: IntentTxKind, network: string, to: Address, data: Hex, value: bigint, gas: bigint, guard: ReturnType<typeof sql> | undefined): Promise<void> {
    if (this.#closed()) return;
    const wallet = this.#setup.solvers.get(network);
    if (!wallet) return;
    const log = { intentId: row.id, kind, network };
    const pool = this.#upstreams.pool(network);
    try {
      const state = await readWallet(pool, wallet.address);
      if (state.balance < value + gas * state.maxPerGas) {
        this.#log.warn({ ...log, solver: wallet.address }, 'solver: the wallet cannot pay this transaction now');
        return;
      }
      try {
        await pool.request('eth_call', [{ from: wallet.address, to, data, value: toHex(value), gas: toHex(gas) }, 'pending']);
      } catch (err) {
        if (!(err instanceof UpstreamRpcError)) throw err;
        this.#log.info({ ...log, reason: err.message }, 'solver: the transaction would revert now; not sent');
        return;
      }
      const base = { chainId: wallet.chainId, to, value, data, gas };
      const rec = await this.#store.reserveTx({ intentId: row.id, kind, network, fromAddress: wallet.address.toLowerCase(), guard }, state.nonce, (nonce) =>
        state.fees.type === 'legacy'
          ? wallet.account.signTransaction({ ...base, nonce, type: 'legacy', gasPrice: state.fees.gasPrice })
          : wallet.account.signTransaction({ ...base, nonce, type: 'eip1559', maxFeePerGas: state.fees.maxFeePerGas, maxPriorityFeePerGas: state.fees.maxPriorityFeePerGas }),
      );
      if (!rec) return; // claimed elsewhere, or no longer due
      await this.#broadcast(rec, 'first');
      this.#stats.sent[kind] += 1;
    } catch (err) {
      const reason = err instanceof NoUpstreamError ? 'no node answered' : errText(err);
      this.#log.warn({ ...log, reason }, 'solver: could not send; retried next round');
    }
  }

  async #broadcast(rec: IntentTxRow, why: 'first' | 'again'): Promise<'stop' | 'next'> {
    const log = { intentId: rec.intentId, kind: rec.kind, network: rec.network, nonce: rec.nonce, txHash: rec.txHash };
    const sent = await broadcast(this.#upstreams.pool(rec.network), rec.rawTx as Hex, rec.txHash as Hex);
    switch (sent.kind) {
      case 'accepted':
        if (rec.status === 'pending') await this.#store.markTx(rec.id, ['pending'], 'sent');
        else await this.#store.touchTx(rec.id);
        this.#log.info(log, why === 'first' ? `solver: ${rec.kind} sent` : `solver: ${rec.kind} sent again`);
        return 'next';
      case 'refused':
        await this.#store.markTx(rec.id, ['pending', 'sent'], 'failed', sent.reason);
        this.#log.warn({ ...log, reason: sent.reason }, `solver: ${rec.kind} refused by the node; marked failed`);
        return 'next';
      case 'unreached':
        if (rec.status === 'pending' && why === 'first') {
          await this.#store.markTx(rec.id, ['pending'], 'failed', sent.reason);
          this.#log.warn({ ...log, reason: sent.reason }, `solver: no node took the ${rec.kind}; marked failed, tried again later`);
          return 'next';
        }
        return 'stop';
      case 'unknown':
        // It may have reached a node: it stays as it is and is checked again later.
        this.#log.warn({ ...log, reason: sent.reason }, `solver: ${rec.kind} may have been sent; checked again later`);
        return 'stop';
    }
  }

  /**
   * Solver transactions not known to be mined, per network and wallet lowest nonce first, as the
   * faucet does (C29): pending ones (a crash between recording and sending) are broadcast with
   * their stored bytes; sent ones are looked up: in a block they are mined (or reverted), still in
   * the node's pool they wait, unknown to the node they are sent again.
   */
  async reconcile(minAgeMs: number): Promise<void> {
    const groups = new Map<string, IntentTxRow[]>();
    for (const r of await this.#store.unsettledTxs(minAgeMs)) {
      const key = `${r.network}:${r.fromAddress}`;
      groups.set(key, [...(groups.get(key) ?? []), r]);
    }
    await Promise.all(
      [...groups.values()].map(async (rows) => {
        for (const rec of rows) {
          if (this.#closed()) return;
          try {
            if (rec.status === 'sent') {
              const seen = await this.#lookup(rec);
              if (seen === 'known') continue;
              if (seen === 'mined' || seen === 'reverted') {
                await this.#store.markTx(rec.id, ['sent'], seen, seen === 'reverted' ? 'reverted on chain' : undefined);
                if (seen === 'reverted') this.#log.warn({ intentId: rec.intentId, kind: rec.kind, txHash: rec.txHash }, `solver: ${rec.kind} reverted on chain`);
                continue;
              }
            }
            if ((await this.#broadcast(rec, 'again')) === 'stop') return;
          } catch (err) {
            this.#log.warn({ intentId: rec.intentId, kind: rec.kind, err: errText(err) }, 'solver: could not check a transaction; retried later');
            return;
          }
        }
      }),
    );
  }

  async #lookup(rec: IntentTxRow): Promise<'mined' | 'reverted' | 'known' | 'unknown'> {
    const pool = this.#upstreams.pool(rec.network);
    const receipt = await pool.request<{ blockNumber?: Hex | null; status?: Hex } | null>('eth_getTransactionReceipt', [rec.txHash]);
    if (receipt?.blockNumber) return receipt.status === '0x0' ? 'reverted' : 'mined';
    const tx = await pool.request<{ blockNumber?: Hex | null } | null>('eth_getTransactionByHash', [rec.txHash]);
    return tx ? 'known' : 'unknown';
  }
}
