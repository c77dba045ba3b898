// A wallet: a private key from the config as a signer, and the wallet's state as the node sees it
// (fees, balance, next nonce). src/onchain/ holds what faucet, balance, intents and devnet share
// about talking to a chain (named apart from src/chains/, which holds the networks).
import type { Address, Hex } from 'viem';
import { type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts';
import { ConfigError } from '../errors/config.ts';
import type { UpstreamPool } from '../upstreams/http/pool.ts';
import { type Fees, readFees } from './transactions.ts';

// The order of secp256k1: a private key must lie in [1, n - 1].
const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/**
 * A private key from the config as a signer (the faucet's and the solver's wallets).
 * @throws ConfigError naming `setting`, never the key, when it is not a valid secp256k1 key.
 */
export function signerFromKey(key: string, setting: string): PrivateKeyAccount {
  const n = /^0x[0-9a-fA-F]{64}$/.test(key) ? BigInt(key) : 0n;
  if (n <= 0n || n >= SECP256K1_N) throw new ConfigError(`invalid setting ${setting}: not a valid secp256k1 private key`);
  return privateKeyToAccount(key as Hex);
}

/** What a wallet looks like to the node right now. */
export interface WalletState {
  fees: Fees;
  /** The most one gas unit may cost with these fees. */
  maxPerGas: bigint;
  balance: bigint;
  /** `eth_getTransactionCount(wallet, "pending")`: the next nonce as the node sees it. */
  nonce: number;
}

/**
 * Fees, balance and pending nonce of the wallet, asked in parallel through the gateway's pool.
 * @throws NoUpstreamError or UpstreamRpcError as the pool does.
 */
export async function readWallet(pool: UpstreamPool, address: Address): Promise<WalletState> {
  const [{ fees, maxPerGas }, balance, nonce] = await Promise.all([
    readFees(pool),
    pool.request<Hex>('eth_getBalance', [address, 'latest']),
    pool.request<Hex>('eth_getTransactionCount', [address, 'pending']),
  ]);
  return { fees, maxPerGas, balance: BigInt(balance), nonce: Number(BigInt(nonce)) };
}
