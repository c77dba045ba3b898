// C41: creating intents (route, amount, addresses, quote, liquidity) and reading them back.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { type Address, type Hex, maxUint256, toFunctionSelector, toHex } from 'viem';
import { AwaitingOpenError, LiquidityError, ReserveCapError } from '../errors/domain.ts';
import { badRequest, HttpError, notFound } from '../errors/http.ts';
import { NoUpstreamError, UpstreamRpcError } from '../errors/upstream.ts';
import { parseRecipient } from '../onchain/addresses.ts';
import { formatAmount as formatWei, parseAmount } from '../onchain/amounts.ts';
import { readFees } from '../onchain/transactions.ts';
import type { Db } from '../storage/db.ts';
import type { Upstreams } from '../upstreams/upstreams.ts';
import { type IntentsSettings, type IntentsSetup, readIntentsConfig, type Route, routeGap, routeKey } from './setup.ts';
import { encodeFill, encodeOracleCall, encodeOriginData, orderIdOf } from './contracts.ts';
import { quote } from './quote.ts';
import { IntentStore, type IntentRow } from './store.ts';
import { type Intent, toIntent } from './view.ts';

/** `POST /chain-abstraction/intent` body as the route schema lets it through (C41). */
export interface IntentRequest {
  fromNetwork: string;
  toNetwork: string;
  amount: string;
  sender: string;
  recipient?: string | undefined;
  openDeadlineSeconds?: number | undefined;
  fillDeadlineSeconds?: number | undefined;
}

export interface IntentServiceOptions {
  db: Db;
  settings: IntentsSettings;
  upstreams: Upstreams;
  logger: Logger;
  /** Called once an intent was created: its networks are to be followed now (C33), before its open. */
  onCreated?: () => void;
}

/** C41, C51: 10 minutes. An intent never opened holds its liquidity this long unless it asks for less. */
const DEFAULT_OPEN_SECONDS = 600;
const DEFAULT_FILL_SECONDS = 600;
/** DestinationSettler's `PaymentFailed()` revert: the recipient did not take the fill's coins. */
const PAYMENT_FAILED = toFunctionSelector('PaymentFailed()');

/** A node failure before anything was recorded: C7 502. */
function upstreamFailure(network: string, err: unknown): unknown {
  if (err instanceof NoUpstreamError) return new HttpError(NoUpstreamError.code, `No node of ${network} answered; try again later`, { cause: err });
  if (err instanceof UpstreamRpcError) return new HttpError(UpstreamRpcError.code, `The ${network} node refused a query: ${err.message}`, { cause: err });
  return err;
}

/**
 * The wallet's balance at the head block, with that block's number: the liquidity check counts the
 * fills mined after it as still reserved (IntentStore.create). The balance is read at the number,
 * not at 'latest', so the two cannot disagree.
 */
async function balanceAtHead(pool: ReturnType<Upstreams['pool']>, address: Address): Promise<{ balance: bigint; block: number }> {
  const head = await pool.request<Hex>('eth_blockNumber', []);
  const balance = await pool.request<Hex>('eth_getBalance', [address, head]);
  return { balance: BigInt(balance), block: Number(BigInt(head)) };
}

export class IntentService {
  readonly setup: IntentsSetup;
  readonly store: IntentStore;
  readonly #upstreams: Upstreams;
  readonly #log: Logger;
  readonly #onCreated: (() => void) | undefined;
  /** Origin networks whose settler's oracle was checked to be the solver. */
  readonly #oracleChecked = new Set<string>();

  constructor(opts: IntentServiceOptions) {
    this.setup = readIntentsConfig(opts.settings);
    this.store = new IntentStore(opts.db);
    this.#upstreams = opts.upstreams;
    this.#log = opts.logger.child({ component: 'intents' });
    this.#onCreated = opts.onCreated;
  }

  /** The native coin's decimals on `slug` (18 when unknown). */
  decimals(slug: string): number {
    return this.setup.networks.get(slug)?.currency.decimals ?? 18;
  }

  /** The routes that take intents now (settlers on both ends, solver wallets). */
  openRoutes(): Route[] {
    return [...this.setup.routes.values()].filter((r) => routeGap(this.setup, r) === null);
  }

  /**
   * C41: validates, quotes (fee bps + the destination gas of a fill), reserves the solver's
   * destination liquidity and records the intent; answers it with the `open` transaction to sign.
   *
   * @throws HttpError VALIDATION_ERROR 400 (every problem at once), INSUFFICIENT_LIQUIDITY 409 (the
   *   wallet short, or a C51 share of its liquidity exceeded: `details.setting` names which),
   *   UPSTREAM_ERROR 502, SERVICE_UNAVAILABLE 503 (a settler whose oracle is not the solver).
   */
  async create(userId: string, body: IntentRequest): Promise<Intent> {
    const problems: Array<{ field: string; message: string }> = [];
    const from = this.setup.networks.get(body.fromNetwork);
    const to = this.setup.networks.get(body.toNetwork);
    if (!from) problems.push({ field: 'body.fromNetwork', message: `unknown network "${body.fromNetwork}"` });
    if (!to) problems.push({ field: 'body.toNetwork', message: `unknown network "${body.toNetwork}"` });
    let route: Route | undefined;
    if (from && to) {
      route = this.setup.routes.get(routeKey(from.slug, to.slug));
      if (from.slug === to.slug) problems.push({ field: 'body.toNetwork', message: 'must differ from fromNetwork' });
      else if (from.type !== to.type) problems.push({ field: 'body.toNetwork', message: `${from.slug} is a ${from.type} and ${to.slug} a ${to.type}: never mainnet to testnet` });
      else if (!route) problems.push({ field: 'body.toNetwork', message: `no route from ${from.slug} to ${to.slug} (the native coins differ, or the route is not configured)` });
      else {
        const gap = routeGap(this.setup, route);
        if (gap) problems.push({ field: 'body.toNetwork', message: `the route from ${from.slug} to ${to.slug} is not served: ${gap}` });
      }
    }
    const decimals = from?.currency.decimals ?? 18;
    const parsed = parseAmount(body.amount, decimals);
    let inputWei = 0n;
    if (typeof parsed === 'string') problems.push({ field: 'body.amount', message: parsed });
    else if (parsed <= 0n) problems.push({ field: 'body.amount', message: 'must be more than 0' });
    // C51: the order carries it as a uint256 (and `open.value` is wei).
    else if (parsed > maxUint256) problems.push({ field: 'body.amount', message: `must be at most ${formatWei(maxUint256, decimals)} (2^256 - 1 in the smallest unit)` });
    else inputWei = parsed;
    const sender = parseRecipient(body.sender, from?.native === true);
    if (!sender.startsWith('0x')) problems.push({ field: 'body.sender', message: sender });
    const recipient = body.recipient === undefined ? sender : parseRecipient(body.recipient, to?.native === true);
    if (body.recipient !== undefined && !recipient.startsWith('0x')) problems.push({ field: 'body.recipient', message: recipient });
    if (problems.length || !route || !from || !to) throw badRequest(`Invalid request: ${problems.map((p) => `${p.field} ${p.message}`).join('; ')}`, problems);

    const solver = this.setup.solvers.get(to.slug);
    const oracle = this.setup.solvers.get(from.slug);
    const settlersFrom = this.setup.settlers.get(from.slug);
    const settlersTo = this.setup.settlers.get(to.slug);
    if (!solver || !oracle || !settlersFrom || !settlersTo) throw new Error('route checked above');
    // The settlers refuse coins sent to them and the solver cannot fill to itself: such an intent
    // could only wait for its refund, holding liquidity until its fill deadline.
    const unpayable = [settlersTo.destination, settlersTo.origin, settlersFrom.origin, settlersFrom.destination, solver.address].map((a) => a.toLowerCase());
    if (unpayable.includes(recipient.toLowerCase())) {
      throw badRequest('Invalid request: body.recipient is a settler contract or the solver, which cannot be paid a fill', [
        { field: 'body.recipient', message: 'is a settler contract or the solver wallet: it cannot be paid a fill' },
      ]);
    }

    await this.#checkOracle(from.slug, settlersFrom.origin, oracle.address);
    const pool = this.#upstreams.pool(to.slug);
    // The fees of the fill, and the solver's balance at a known block (C41): its nonce is not needed here.
    const [fees, funds] = await Promise.all([readFees(pool), balanceAtHead(pool, solver.address)]).catch((err: unknown) => {
      throw upstreamFailure(to.slug, err);
    });
    const q = quote({ inputWei, feeBps: this.setup.feeBps, fillGasLimit: this.setup.fillGasLimit, gasPrice: fees.gasPrice, maxPerGas: fees.maxPerGas });
    if (q.outputWei <= 0n) {
      throw badRequest(`Invalid request: body.amount must be more than the fee (${formatWei(q.feeWei, decimals)} ${from.currency.symbol} now)`, [
        { field: 'body.amount', message: `must be more than the fee of ${formatWei(q.feeWei, decimals)}` },
      ]);
    }

    const nonce: Hex = `0x${randomBytes(32).toString('hex')}`;
    const now = Math.floor(Date.now() / 1000);
    const openDeadline = now + (body.openDeadlineSeconds ?? DEFAULT_OPEN_SECONDS);
    const fillWindow = body.fillDeadlineSeconds ?? DEFAULT_FILL_SECONDS;
    const user = sender as Address;
    const orderId = orderIdOf(from.chainId, settlersFrom.origin, user, nonce);
    // C41: the fill this intent will need, tried now on the destination as the solver will send it.
    if (await this.#recipientRefuses(pool, solver.address, settlersTo.destination, orderId, recipient as Address, q.outputWei, openDeadline + fillWindow, to.chainId)) {
      throw badRequest('Invalid request: body.recipient cannot be paid a fill: it refuses the coins, or needs more gas to take them than a fill carries', [
        { field: 'body.recipient', message: 'refuses the payment of a fill (a contract that reverts on receipt or needs more gas than a fill carries)' },
      ]);
    }
    let row: IntentRow;
    try {
      row = await this.store.create(
        {
          id: `in_${randomBytes(16).toString('base64url')}`,
          userId,
          status: 'awaiting_open',
          fromNetwork: from.slug,
          toNetwork: to.slug,
          originChainId: from.chainId,
          destinationChainId: to.chainId,
          sender: sender.toLowerCase(),
          recipient: recipient.toLowerCase(),
          inputWei: inputWei.toString(),
          outputWei: q.outputWei.toString(),
          feeWei: q.feeWei.toString(),
          gasReserveWei: q.gasReserveWei.toString(),
          solver: solver.address.toLowerCase(),
          originSettler: settlersFrom.origin.toLowerCase(),
          destinationSettler: settlersTo.destination.toLowerCase(),
          nonce,
          orderId: orderId.toLowerCase(),
          openDeadline,
          fillWindow,
          fillDeadline: openDeadline + fillWindow,
        },
        funds.balance,
        funds.block,
        this.setup.maxAwaitingOpen,
        this.setup.shares,
      );
    } catch (err) {
      if (err instanceof AwaitingOpenError) {
        throw new HttpError(AwaitingOpenError.code, `This account has ${err.max} intents waiting for their open, the most it may have; open them or let them expire first`, {
          details: { awaitingOpen: err.max, max: err.max },
        });
      }
      if (err instanceof ReserveCapError) throw this.#capRefusal(err, to.slug, decimals, to.currency.symbol);
      if (err instanceof LiquidityError) {
        const available = formatWei(err.availableWei, decimals);
        throw new HttpError(LiquidityError.code, `The solver cannot fill this on ${to.slug} now: ${available} ${to.currency.symbol} is free for new intents; try a smaller amount or later`, {
          details: { available, needed: formatWei(err.neededWei, decimals) },
        });
      }
      throw err;
    }
    this.#log.info({ intentId: row.id, from: from.slug, to: to.slug, inputWei: inputWei.toString(), outputWei: q.outputWei.toString() }, 'intent created');
    this.#onCreated?.();
    return toIntent(row, [], decimals);
  }

  /** C51: a share of the solver's liquidity the intent would go beyond, as a 409 naming its setting. */
  #capRefusal(err: ReserveCapError, network: string, decimals: number, symbol: string): HttpError {
    const share = `${err.percent}% of the solver's liquidity on ${network} (intents.${err.cap})`;
    const left = err.limitWei > err.reservedWei ? err.limitWei - err.reservedWei : 0n;
    const amount = (wei: bigint) => `${formatWei(wei, decimals)} ${symbol}`;
    const message = {
      maxReservePerIntent: `One intent may reserve at most ${share}, ${amount(err.limitWei)} now; try a smaller amount`,
      maxReservePerAccount: `An account's intents not yet filled may reserve at most ${share} together; ${amount(left)} of it is left for this account now; wait until they are filled or expire`,
      maxReserveAwaitingOpen: `Intents waiting for their open may reserve at most ${share} together; ${amount(left)} of it is free now; try a smaller amount or later`,
    }[err.cap];
    return new HttpError(ReserveCapError.code, message, {
      details: { setting: `intents.${err.cap}`, percent: err.percent, available: formatWei(left, decimals), needed: formatWei(err.neededWei, decimals) },
    });
  }

  /** The account's intents, newest first (C41). */
  async list(userId: string, limit: number, before?: string): Promise<Intent[]> {
    const rows = await this.store.list(userId, limit, before);
    if (rows === null) throw badRequest('Invalid request: querystring.before is not an intent of this account', [{ field: 'querystring.before', message: 'unknown intent id' }]);
    const txs = await this.store.transactionsOf(rows.map((r) => r.id));
    return rows.map((r) =>
      toIntent(
        r,
        txs.filter((x) => x.intentId === r.id),
        this.decimals(r.fromNetwork),
      ),
    );
  }

  /** One intent of the account; another account's is 404 like a missing one (C7). */
  async get(userId: string, id: string): Promise<Intent> {
    const row = await this.store.get(id);
    if (!row || row.userId !== userId) throw notFound('intent');
    return this.view(row);
  }

  /** The intent of a row, with its transactions. */
  async view(row: IntentRow, db?: Db): Promise<Intent> {
    return toIntent(row, await this.store.transactionsOf([row.id], db), this.decimals(row.fromNetwork));
  }

  /**
   * Whether the destination settler's `fill` of this intent, simulated now from the solver with the
   * fill's gas limit, fails in paying the recipient (`PaymentFailed`: a contract that reverts on
   * receipt, or needs more gas than the call is left). Any other outcome (the solver short of
   * coins, a node that cannot simulate) is not the recipient's doing: the liquidity check and the
   * solver decide those.
   */
  async #recipientRefuses(
    pool: ReturnType<Upstreams['pool']>,
    solver: Address,
    settler: Address,
    orderId: Hex,
    recipient: Address,
    outputWei: bigint,
    fillDeadline: number,
    chainId: number,
  ): Promise<boolean> {
    const data = encodeFill(orderId, encodeOriginData(orderId, recipient, outputWei, fillDeadline, chainId));
    try {
      await pool.request('eth_call', [{ from: solver, to: settler, data, value: toHex(outputWei), gas: toHex(this.setup.fillGasLimit) }, 'latest']);
      return false;
    } catch (err) {
      return err instanceof UpstreamRpcError && typeof err.details === 'string' && err.details.toLowerCase().startsWith(PAYMENT_FAILED);
    }
  }

  /** The origin settler must name the solver as its oracle, or no intent could ever settle. */
  async #checkOracle(network: string, settler: Address, solver: Address): Promise<void> {
    if (this.#oracleChecked.has(network)) return;
    let word: Hex;
    try {
      word = await this.#upstreams.pool(network).request<Hex>('eth_call', [{ to: settler, data: encodeOracleCall() }, 'latest']);
    } catch (err) {
      throw upstreamFailure(network, err);
    }
    if (!/^0x[0-9a-fA-F]{64}$/.test(word) || BigInt(word) !== BigInt(solver)) {
      this.#log.error({ network, settler }, 'intents: the origin settler is not a settler whose oracle is the solver wallet; check intents.settlers and the solver key');
      throw new HttpError('SERVICE_UNAVAILABLE', `Intents from ${network} are unavailable: the settler is misconfigured`);
    }
    this.#oracleChecked.add(network);
  }
}
