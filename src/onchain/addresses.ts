// Account addresses as users write them (C28's rule): 0x or, on the native networks, xdc; one case
// or a valid EIP-55 checksum. src/onchain/ holds what faucet, balance, intents and devnet share
// about talking to a chain (named apart from src/chains/, which holds the networks).
import { getAddress } from 'viem/utils';

/**
 * An address (C28): `0x` and 40 hex digits, all lower case, all upper case or with a valid
 * EIP-55 checksum; on the native networks an `xdc` prefix is accepted and becomes `0x`.
 * Returns the EIP-55 form, or why the address is refused. The zero address is an address here.
 */
export function parseAddress(text: string, native: boolean): string {
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
  return address;
}

/**
 * An address coins are sent to or from (the faucet's recipient, an intent's sender and recipient):
 * `parseAddress`'s rule, and never the zero address, whose coins nobody can spend.
 */
export function parseRecipient(text: string, native: boolean): string {
  const address = parseAddress(text, native);
  if (/^0x0{40}$/.test(address)) return 'must not be the zero address';
  return address;
}

