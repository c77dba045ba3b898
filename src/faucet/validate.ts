import type { Address } from 'viem';
import { getAddress } from 'viem/utils';
import type { NetworkRegistry } from '../chains/registry.ts';
import { badRequest } from '../errors/http.ts';
import { formatAmount, type FaucetWallet, parseAmount } from './wallets.ts';

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
 * A recipient address (C28): `0x` and 40 hex digits, all lower case, all upper case or with a
 * valid EIP-55 checksum; on the native networks an `xdc` prefix is accepted and becomes `0x`.
 * Returns the EIP-55 form, or why the address is refused.
 */
export function parseRecipient(text: string, native: boolean): string {
  let hex = text;
  if (/^xdc/i.test(text)) {
    if (!native) return 'must start with 0x (the xdc prefix is accepted on the native networks only)';
    hex = `0x${text.slice(3)}`;
  }
  if (!/^0x[0-9a-fA-F]{40}$/.test(hex)) return 'must be 0x followed by 40 hex digits';
  const digits = hex.slice(2);
  // EIP-55: one case throughout carries no checksum; mixed case must be the checksum.
  const oneCase = digits === digits.toLowerCase() || digits === digits.toUpperCase();
  const address = getAddress(hex.toLowerCase());
  if (!oneCase && address !== hex) return 'has an invalid EIP-55 checksum (mixed case must match it; all lower case is accepted)';
  if (/^0x0{40}$/.test(address)) return 'must not be the zero address';
  return address;
}

/**
 * Checks a grant request (C28) and lists every problem at once.
 * @throws HttpError VALIDATION_ERROR (400) with `details: [{field, message}]`.
 */
export function validateGrant(body: GrantRequest, wallets: ReadonlyMap<string, FaucetWallet>, registry: NetworkRegistry): ValidGrant {
  const problems: Array<{ field: string; message: string }> = [];
  const network = registry.bySlug(body.network);
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
