// C42: deploying the settlers (both on every chain given, the origin one with the solver as its
// oracle) from the checked-in bytecode, for the devnet and for `npm run deploy:settlers`.
import type { Address, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { encodeDeployData, keccak256 } from 'viem/utils';
import { validateConfig } from '../config/load.ts';
import { DeploymentError } from '../errors/node.ts';
// eslint-disable-next-line no-restricted-imports -- withDevnetIntents rewrites the whole config for --devnet (config loading)
import type { Config, IntentsConfig } from '../config/schema.ts';
import { type CallOptions, type Receipt, rpc, sendRawTransaction, waitForReceipt } from '../json/rpc-client.ts';
import { loadArtifact } from '../onchain/artifacts.ts';

/** One chain to deploy on: plain JSON-RPC (never through the gateway). */
export interface DeployChain {
  slug: string;
  chainId: number;
  rpcUrl: string;
}

export interface DeployOptions {
  chains: readonly DeployChain[];
  /** Signs the deployments (and the funding, when asked); must hold coins on every chain. */
  deployerKey: Hex;
  /** The oracle of every origin settler: the solver wallet's address. */
  oracle: Address;
  /** Wei sent from the deployer to `fund.address` on every chain after the deployment. */
  fund?: { address: Address; wei: bigint };
  /** Milliseconds to wait for each receipt; default 60,000. */
  timeoutMs?: number;
}

export interface DeployedSettlers {
  /** Per slug, as `intents.settlers` takes them. */
  settlers: Record<string, { origin: Address; destination: Address }>;
}

/**
 * Every call here may be repeated safely (reads, and signed transactions), so one with no answer
 * is tried again: on a loaded machine a start that is busy migrating storage can leave an answer
 * unread past its timeout; the next attempt finds the loop free.
 */
const CALLS: CallOptions = { timeoutMs: 15_000, attempts: 3 };
/** Milliseconds between two looks for a receipt. */
const RECEIPT_POLL_MS = 100;

/** Signs and sends the deployer's transactions on one chain, nonces in order, each waited for. */
async function deployOn(chain: DeployChain, opts: DeployOptions): Promise<{ origin: Address; destination: Address }> {
  const account = privateKeyToAccount(opts.deployerKey);
  const url = chain.rpcUrl;
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const call = <T>(method: string, params: unknown[]) => rpc<T>(url, method, params, CALLS);
  const id = Number(BigInt(await call<Hex>('eth_chainId', [])));
  if (id !== chain.chainId) throw new DeploymentError(`${chain.slug}: the node at the given URL is chain ${id}, not ${chain.chainId}`);
  let nonce = Number(BigInt(await call<Hex>('eth_getTransactionCount', [account.address, 'pending'])));
  const send = async (tx: { to?: Address; data?: Hex; value?: bigint }): Promise<Receipt> => {
    const gasPrice = BigInt(await call<Hex>('eth_gasPrice', []));
    const estimate = { from: account.address, ...(tx.to ? { to: tx.to } : {}), ...(tx.data ? { data: tx.data } : {}), value: `0x${(tx.value ?? 0n).toString(16)}` };
    const gas = (BigInt(await call<Hex>('eth_estimateGas', [estimate])) * 12n) / 10n;
    const raw = await account.signTransaction({ chainId: id, nonce: nonce++, type: 'legacy', gasPrice: (gasPrice * 12n) / 10n, gas, ...tx });
    await sendRawTransaction(url, raw, CALLS);
    return waitForReceipt(url, keccak256(raw), { timeoutMs, pollMs: RECEIPT_POLL_MS, call: CALLS });
  };
  const origin = loadArtifact('OriginSettler');
  const destination = loadArtifact('DestinationSettler');
  const o = await send({ data: encodeDeployData({ abi: origin.abi, bytecode: origin.bytecode, args: [opts.oracle] }) });
  const d = await send({ data: encodeDeployData({ abi: destination.abi, bytecode: destination.bytecode }) });
  if (!o.contractAddress || !d.contractAddress) throw new DeploymentError(`${chain.slug}: a deployment created no contract`);
  if (opts.fund && opts.fund.wei > 0n) await send({ to: opts.fund.address, value: opts.fund.wei });
  return { origin: o.contractAddress, destination: d.contractAddress };
}

/** Deploys both settlers on every chain (in parallel across chains) and funds the solver when asked. */
export async function deploySettlers(opts: DeployOptions): Promise<DeployedSettlers> {
  const entries = await Promise.all(opts.chains.map(async (c) => [c.slug, await deployOn(c, opts)] as const));
  return { settlers: Object.fromEntries(entries) };
}

/**
 * The devnet's solver wallet: the configured `intents.solverPrivateKey` when there is one, else a
 * key made for this run (in memory only). Fund its address on every chain, then deploy with it.
 */
export function devnetSolver(config?: { intents: Pick<IntentsConfig, 'solverPrivateKey'> }): { privateKey: Hex; address: Address } {
  const privateKey = (config?.intents.solverPrivateKey as Hex | null | undefined) ?? generatePrivateKey();
  return { privateKey, address: privateKeyToAccount(privateKey).address };
}

/** `config` with the deployed settlers and the solver key under `intents`, validated again. */
export function withDevnetIntents(config: Config, deployed: { settlers: Record<string, { origin: Address; destination: Address }>; solverPrivateKey: Hex }): Config {
  const copy = structuredClone<Config>(config);
  copy.intents.settlers = { ...copy.intents.settlers, ...deployed.settlers };
  copy.intents.solverPrivateKey = deployed.solverPrivateKey;
  return validateConfig(copy);
}

/**
 * C42 under `--devnet`: both settlers on every chain, deployed by the solver wallet itself (funded
 * beforehand, e.g. through the devnet's `fund` list) with the solver as the origin settlers'
 * oracle. Returns what to merge into the config as `intents`.
 */
export async function deployDevnetSettlers(opts: {
  chains: readonly DeployChain[];
  solver: { privateKey: Hex; address: Address };
}): Promise<{ settlers: Record<string, { origin: Address; destination: Address }>; solverPrivateKey: Hex }> {
  const { settlers } = await deploySettlers({ chains: opts.chains, deployerKey: opts.solver.privateKey, oracle: opts.solver.address, timeoutMs: 30_000 });
  return { settlers, solverPrivateKey: opts.solver.privateKey };
}
