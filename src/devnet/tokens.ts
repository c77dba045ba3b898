// C40: under `--devnet` a test ERC-20 (contracts/TestToken.sol) lives on every devnet chain and
// the dev accounts hold some, so the unified balance reads a real token through `balanceOf`.
import type { Address, Hex } from 'viem';
import { encodeDeployData, encodeFunctionData, getAddress, parseUnits } from 'viem/utils';
import type { NetworkConfig, TokenConfig } from '../config/schema.ts';
import { loadArtifact } from '../onchain/artifacts.ts';
import { rpc, waitForReceipt } from '../json/rpc-client.ts';
import { DevnetError } from '../errors/devnet.ts';

/** The devnet's test token: a dollar with 6 decimals (as USDC), priced at a fixed 1 USD. */
export const DEVNET_TOKEN = Object.freeze({ name: 'Junction Test Dollar', symbol: 'JUSD', decimals: 6, usd: 1 });

/** Whole tokens minted to each recipient. */
export const DEVNET_TOKEN_MINT = '1000000';

export interface DeployTestTokensOptions {
  /** Per slug: the chain's HTTP address (`devnet.upstreams[slug].http`). */
  urls: Readonly<Record<string, string>>;
  /** The deployer and only minter: an unlocked dev account (the devnet's own, `devnet.accounts[9]`). */
  from: Address;
  /** Who receives `amount` each (the dev accounts). */
  recipients: readonly Address[];
  /** Whole tokens per recipient, as a decimal string; default {@link DEVNET_TOKEN_MINT}. */
  amount?: string;
}

/**
 * Deploys a TestToken on every chain of `urls` at once and mints `amount` to each recipient in
 * one transaction per chain. Blocks are mined on the spot, so chains that mine on a timer (the
 * native ones) do not wait for their next block. Resolves with the token's address per slug (EIP-55);
 * rejects naming the chain when a deployment fails.
 */
export async function deployTestTokens(opts: DeployTestTokensOptions): Promise<Record<string, Address>> {
  const { abi, bytecode } = loadArtifact('TestToken');
  const deploy = encodeDeployData({ abi, bytecode, args: [DEVNET_TOKEN.name, DEVNET_TOKEN.symbol, DEVNET_TOKEN.decimals] });
  const value = parseUnits(opts.amount ?? DEVNET_TOKEN_MINT, DEVNET_TOKEN.decimals);
  const mint = encodeFunctionData({ abi, functionName: 'mintMany', args: [opts.recipients, value] });
  const send = async (url: string, tx: { to?: Address; data: Hex }) => {
    const hash = await rpc<Hex>(url, 'eth_sendTransaction', [{ from: opts.from, ...tx }]);
    await rpc(url, 'evm_mine', []);
    return waitForReceipt(url, hash);
  };
  const entries = await Promise.all(
    Object.entries(opts.urls).map(async ([slug, url]): Promise<[string, Address]> => {
      try {
        const receipt = await send(url, { data: deploy });
        if (!receipt.contractAddress) throw new DevnetError('the deployment created no contract');
        const token = getAddress(receipt.contractAddress);
        if (opts.recipients.length > 0) await send(url, { to: token, data: mint });
        return [slug, token];
      } catch (err) {
        throw new DevnetError(`devnet ${slug}: test token not deployed: ${(err as Error).message}`, { cause: err });
      }
    }),
  );
  return Object.fromEntries(entries);
}

/** The `tokens` entry of a devnet network for its test token at `address` (fixed price of 1 USD). */
export function testTokenConfig(address: Address): TokenConfig {
  return {
    symbol: DEVNET_TOKEN.symbol,
    address,
    decimals: DEVNET_TOKEN.decimals,
    price: { type: 'fixed', usd: DEVNET_TOKEN.usd },
  };
}

/**
 * Sets each devnet network's `tokens` to its test token (C40), on a config draft before it is
 * validated: the configured tokens' addresses (the real USDC and USDT) hold no contract on a local
 * chain. Networks without a test token keep theirs.
 */
export function applyDevnetTokens(draft: { networks: NetworkConfig[] }, tokens: Readonly<Record<string, Address>>): void {
  for (const n of draft.networks) {
    const address = tokens[n.slug];
    if (address) n.tokens = [testTokenConfig(address)];
  }
}
