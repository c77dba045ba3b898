import type { Address, Hex } from 'viem';
import { formatUnits } from 'viem/utils';
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts';
import { ConfigError } from '../errors/config.ts';
import { validateConfig } from '../config/load.ts';
import type { Config } from '../config/schema.ts';

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

// The order of secp256k1: a private key must lie in [1, n - 1].
const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/**
 * Whole native units as decimal text ("1", "0.5") to base units, or why it is not acceptable:
 * no sign, no exponent, at most `decimals` digits after the point. Exact, never rounded.
 */
export function parseAmount(text: string, decimals: number): bigint | string {
  const m = /^([0-9]+)(?:\.([0-9]+))?$/.exec(text);
  if (!m) return 'must be a decimal number of whole units, such as "1" or "0.5"';
  const fraction = m[2] ?? '';
  if (fraction.length > decimals) return `must have at most ${decimals} decimals`;
  return BigInt(`${m[1]}${fraction.padEnd(decimals, '0')}`);
}

/** Base units as decimal text in whole units, without trailing zeros ("1", "0.5"). */
export function formatAmount(wei: bigint, decimals: number): string {
  return formatUnits(wei, decimals);
}

function amountSetting(text: string, decimals: number, setting: string): bigint {
  const wei = parseAmount(text, decimals);
  if (typeof wei === 'string') throw new ConfigError(`invalid setting ${setting}: ${wei}`);
  if (wei <= 0n) throw new ConfigError(`invalid setting ${setting}: must be more than 0`);
  return wei;
}

/** A faucet key as a signer; the message names the setting, never the key. */
function signer(key: string, setting: string): PrivateKeyAccount {
  const n = /^0x[0-9a-fA-F]{64}$/.test(key) ? BigInt(key) : 0n;
  if (n <= 0n || n >= SECP256K1_N) throw new ConfigError(`invalid setting ${setting}: not a valid secp256k1 private key`);
  return privateKeyToAccount(key as Hex);
}

/**
 * The faucet wallet of every testnet that has a key (`faucet.networks.<slug>.privateKey`, else
 * `faucet.privateKey`) and is not switched off, in config order.
 *
 * @throws ConfigError naming a bad faucet setting (a mainnet or unknown slug, an amount, a key).
 */
export function faucetWallets(config: Config): FaucetWallet[] {
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
    const account = signer(key, where);
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
