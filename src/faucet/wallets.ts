// The faucet's wallets (C28, C30): one per testnet with a key, its amounts and gas limit, read from
// the config; on the devnet, keys made for the run (C31).
import type { Address } from 'viem';
import { generatePrivateKey, type PrivateKeyAccount } from 'viem/accounts';
import { ConfigError } from '../errors/config.ts';
import { validateConfig } from '../config/load.ts';
// eslint-disable-next-line no-restricted-imports -- withDevnetFaucetKeys rewrites the whole config for --devnet (config loading)
import type { Config, FaucetConfig, NetworkConfig } from '../config/schema.ts';
import { parseAmount } from '../onchain/amounts.ts';
import { signerFromKey } from '../onchain/wallets.ts';

/** One testnet's faucet: its wallet and limits, from config (C28, C30). */
export interface FaucetWallet {
  slug: string;
  chainId: number;
  native: boolean;
  symbol: string;
  decimals: number;
  /** Signs in this process; the key itself is never kept anywhere else. */
  account: PrivateKeyAccount;
  /** EIP-55 form. */
  address: Address;
  defaultWei: bigint;
  maxWei: bigint;
  gasLimit: bigint;
}

function amountSetting(text: string, decimals: number, setting: string): bigint {
  const wei = parseAmount(text, decimals);
  if (typeof wei === 'string') throw new ConfigError(`invalid setting ${setting}: ${wei}`);
  if (wei <= 0n) throw new ConfigError(`invalid setting ${setting}: must be more than 0`);
  return wei;
}

/**
 * The faucet wallet of every testnet that has a key (`faucet.networks.<slug>.privateKey`, else
 * `faucet.privateKey`) and is not switched off, in config order.
 *
 * @throws ConfigError naming a bad faucet setting (a mainnet or unknown slug, an amount, a key).
 */
/** The settings the faucet's wallets come from: its section and the networks (their types and coins). */
export interface FaucetWalletSettings {
  faucet: FaucetConfig;
  networks: readonly NetworkConfig[];
}

export function faucetWallets(config: FaucetWalletSettings): FaucetWallet[] {
  const f = config.faucet;
  for (const slug of Object.keys(f.networks)) {
    const net = config.networks.find((n) => n.slug === slug);
    if (!net) throw new ConfigError(`faucet.networks.${slug}: no network with slug "${slug}"`);
    if (net.type !== 'testnet') throw new ConfigError(`faucet.networks.${slug}: a faucet works on testnets only (C28)`);
  }
  const out: FaucetWallet[] = [];
  for (const n of config.networks) {
    if (n.type !== 'testnet') continue;
    const own = f.networks[n.slug];
    if (own?.enabled === false) continue;
    const key = own?.privateKey ?? f.privateKey;
    if (!key) continue;
    const where = own?.privateKey ? `faucet.networks.${n.slug}.privateKey` : 'faucet.privateKey';
    const account = signerFromKey(key, where);
    const { decimals, symbol } = n.currency;
    const defaultWei = own?.defaultAmount
      ? amountSetting(own.defaultAmount, decimals, `faucet.networks.${n.slug}.defaultAmount`)
      : amountSetting(f.defaultAmount, decimals, 'faucet.defaultAmount');
    const maxWei = own?.maxAmount
      ? amountSetting(own.maxAmount, decimals, `faucet.networks.${n.slug}.maxAmount`)
      : amountSetting(f.maxAmount, decimals, 'faucet.maxAmount');
    if (defaultWei > maxWei) throw new ConfigError(`faucet: the default amount on ${n.slug} is more than its maximum`);
    out.push({
      slug: n.slug,
      chainId: n.chainId,
      native: n.native === true,
      symbol,
      decimals,
      account,
      address: account.address,
      defaultWei,
      maxWei,
      gasLimit: BigInt(own?.gasLimit ?? f.gasLimit),
    });
  }
  return out;
}

/**
 * C31: on the devnet, every testnet among `slugs` (default all) that has no faucet key gets one
 * made for this run, in memory only. Returns the config holding those keys and every faucet
 * address on those networks, for the devnet to fund.
 */
export function withDevnetFaucetKeys(config: Config, slugs?: Iterable<string>): { config: Config; fund: Address[] } {
  const wanted = new Set(slugs ?? config.networks.map((n) => n.slug));
  const copy = structuredClone<Config>(config);
  if (!copy.faucet.privateKey) {
    for (const n of copy.networks) {
      const own = copy.faucet.networks[n.slug];
      if (n.type !== 'testnet' || !wanted.has(n.slug) || own?.enabled === false || own?.privateKey) continue;
      copy.faucet.networks[n.slug] = { ...own, privateKey: generatePrivateKey() };
    }
  }
  const next = validateConfig(copy);
  const fund = [...new Set(faucetWallets(next).filter((w) => wanted.has(w.slug)).map((w) => w.address))];
  return { config: next, fund };
}
