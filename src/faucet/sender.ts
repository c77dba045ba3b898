// The faucet's own transactions (C28, C29): the gas a transfer takes and the signed grant; the
// sending itself is src/onchain/transactions.ts's.
import type { Address, Hex } from 'viem';
import type { Fees } from '../onchain/transactions.ts';
import { type UpstreamPool, UpstreamRpcError } from '../upstreams/http/pool.ts';
import type { FaucetWallet } from './wallets.ts';

/**
 * The gas a transfer of `value` from the faucet to `to` takes, as the node estimates it, or the
 * node's reason why it cannot succeed (a contract that reverts or burns any gas it is given).
 * @throws NoUpstreamError or UpstreamRpcError (other than the node's refusal) as the pool does.
 */
export async function transferGas(pool: UpstreamPool, from: Address, to: Address, value: bigint): Promise<bigint | { refused: string }> {
  try {
    return BigInt(await pool.request<Hex>('eth_estimateGas', [{ from, to, value: `0x${value.toString(16)}` }]));
  } catch (err) {
    if (err instanceof UpstreamRpcError) return { refused: err.message.slice(0, 200) };
    throw err;
  }
}

/** A plain value transfer from the faucet wallet, signed here (the node never holds the key). */
export function signGrant(w: FaucetWallet, to: Address, value: bigint, nonce: number, fees: Fees): Promise<Hex> {
  const base = { chainId: w.chainId, nonce, to, value, gas: w.gasLimit };
  return fees.type === 'legacy'
    ? w.account.signTransaction({ ...base, type: 'legacy', gasPrice: fees.gasPrice })
    : w.account.signTransaction({
        ...base,
        type: 'eip1559',
        maxFeePerGas: fees.maxFeePerGas,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      });
}
