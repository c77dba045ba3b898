// C28: a grant request checked (network, recipient, amount), every problem listed at once.
import type { Address } from 'viem';
import type { Networks } from '../chains/networks.ts';
import { badRequest } from '../errors/http.ts';
import { parseRecipient } from '../onchain/addresses.ts';
import { formatAmount, parseAmount } from '../onchain/amounts.ts';
import type { FaucetWallet } from './wallets.ts';

/** `POST /faucet/request` body as the route schema lets it through. */
export interface GrantRequest {
  network: string;
  address: string;
  amount?: string | undefined;
}

/** A request that passed every C28 check. */
export interface ValidGrant {
  wallet: FaucetWallet;
  /** EIP-55 form. */
  recipient: Address;
  amountWei: bigint;
}

/**
 * Checks a grant request (C28) and lists every problem at once.
 * @throws HttpError VALIDATION_ERROR (400) with `details: [{field, message}]`.
 */
export function validateGrant(body: GrantRequest, wallets: ReadonlyMap<string, FaucetWallet>, networks: Networks): ValidGrant {
  const problems: Array<{ field: string; message: string }> = [];
  const network = networks.bySlug(body.network);
  const wallet = wallets.get(body.network);
  if (!network) problems.push({ field: 'body.network', message: `unknown network "${body.network}"` });
  else if (network.type !== 'testnet') problems.push({ field: 'body.network', message: `${body.network} is not a testnet; the faucet serves testnets only` });
  else if (!wallet) problems.push({ field: 'body.network', message: `${body.network} has no faucet wallet` });

  const recipient = parseRecipient(body.address, network?.native === true);
  if (!recipient.startsWith('0x')) problems.push({ field: 'body.address', message: recipient });
  else if (wallet && recipient === wallet.address) problems.push({ field: 'body.address', message: "is the faucet's own address" });

  let amountWei: bigint | undefined = wallet?.defaultWei;
  if (body.amount !== undefined) {
    const parsed = parseAmount(body.amount, wallet?.decimals ?? network?.currency.decimals ?? 18);
    if (typeof parsed === 'string') problems.push({ field: 'body.amount', message: parsed });
    else if (parsed <= 0n) problems.push({ field: 'body.amount', message: 'must be more than 0' });
    else if (wallet && parsed > wallet.maxWei) {
      problems.push({ field: 'body.amount', message: `must be at most ${formatAmount(wallet.maxWei, wallet.decimals)} ${wallet.symbol}` });
    } else amountWei = parsed;
  }

  if (problems.length || !wallet || amountWei === undefined) {
    throw badRequest(`Invalid request: ${problems.map((p) => `${p.field} ${p.message}`).join('; ')}`, problems);
  }
  return { wallet, recipient: recipient as Address, amountWei };
}
