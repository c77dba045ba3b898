// An injected browser wallet (EIP-1193 `window.ethereum`), used by the intents page to send the
// open transaction. Nothing here talks to anything but the wallet itself.

interface Eip1193 {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>;
}

/** The injected wallet, when the browser has one. */
export function injectedWallet(): Eip1193 | undefined {
  const w = (window as unknown as { ethereum?: Eip1193 }).ethereum;
  return w && typeof w.request === 'function' ? w : undefined;
}

/** Words for what a wallet refused (EIP-1193 and EIP-3085 codes). */
export function walletErrorText(err: unknown, chain: { name: string; chainId: number }): string {
  const e = err as { code?: number; message?: string } | undefined;
  if (e?.code === 4001) return 'You declined the request in your wallet; nothing was sent.';
  if (e?.code === 4902) return `Your wallet does not know ${chain.name} (chain id ${chain.chainId}). Add it to the wallet, then try again.`;
  if (e?.code === 4100) return 'The wallet did not allow this site to use the account. Unlock it or connect this site, then try again.';
  return `The wallet refused: ${e?.message ?? 'no reason given'}.`;
}

/** The wallet's first account, asking the user to connect when needed. */
export async function walletAccount(w: Eip1193): Promise<string | undefined> {
  const accounts = (await w.request({ method: 'eth_requestAccounts' })) as string[];
  return accounts[0];
}

/**
 * Sends `tx` from the wallet's account on chain `chainId` (switching the wallet to it first) and
 * returns the transaction hash. The wallet shows the transaction and asks the user to confirm.
 */
export async function sendWithWallet(
  w: Eip1193,
  from: string,
  tx: { chainId: number; to: string; data: string; value: string },
): Promise<string> {
  const current = Number.parseInt(String(await w.request({ method: 'eth_chainId' })), 16);
  if (current !== tx.chainId) await w.request({ method: 'wallet_switchEthereumChain', params: [{ chainId: `0x${tx.chainId.toString(16)}` }] });
  return String(
    await w.request({
      method: 'eth_sendTransaction',
      params: [{ from, to: tx.to, data: tx.data, value: `0x${BigInt(tx.value).toString(16)}` }],
    }),
  );
}

/** The wallet's gas estimate of `tx`, in gas units; undefined when it cannot say. */
export async function estimateWithWallet(w: Eip1193, from: string, tx: { to: string; data: string; value: string }): Promise<bigint | undefined> {
  try {
    return BigInt(String(await w.request({ method: 'eth_estimateGas', params: [{ from, to: tx.to, data: tx.data, value: `0x${BigInt(tx.value).toString(16)}` }] })));
  } catch {
    return undefined;
  }
}
