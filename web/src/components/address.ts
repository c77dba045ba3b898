// C28's address rule, the same in the browser as in the gateway (src/onchain/addresses.ts), so a
// typo is pointed out before anything is sent. The gateway checks again; its word is final.
import { getAddress } from 'viem/utils';

/** The native chain's networks (spec 8: chain ids 50 and 51) accept the `xdc` prefix. */
export const isNativeChain = (chainId: number | undefined): boolean => chainId === 50 || chainId === 51;

/**
 * C28: `0x` and 40 hex digits, one case throughout or a valid EIP-55 checksum; `xdc…` on the
 * native networks. Returns `{ address }` (EIP-55) or `{ problem }` in words.
 */
export function checkAddress(text: string, native: boolean, opts: { allowZero?: boolean } = {}): { address: string } | { problem: string } {
  const input = text.trim();
  if (!input) return { problem: 'Enter an address.' };
  let hex = input;
  if (/^xdc/i.test(input)) {
    if (!native) return { problem: 'Must start with 0x (the xdc prefix is accepted on the native networks only).' };
    hex = `0x${input.slice(3)}`;
  }
  if (!/^0x[0-9a-fA-F]{40}$/.test(hex)) return { problem: 'Must be 0x followed by 40 hex digits.' };
  const digits = hex.slice(2);
  const oneCase = digits === digits.toLowerCase() || digits === digits.toUpperCase();
  const address = getAddress(hex.toLowerCase());
  if (!oneCase && address !== hex) return { problem: 'The mixed-case checksum (EIP-55) does not match: check for a typo, or write the address in lower case.' };
  if (!opts.allowZero && /^0x0{40}$/.test(address)) return { problem: 'Must not be the zero address.' };
  return { address };
}

/** A decimal amount of whole units ("1", "0.5"), as the faucet and intents take it. */
export function checkAmount(text: string, decimals: number): string | undefined {
  const m = /^([0-9]+)(?:\.([0-9]+))?$/.exec(text.trim());
  if (!m) return 'Must be a number of whole units, such as 1 or 0.5.';
  if ((m[2] ?? '').length > decimals) return `At most ${decimals} decimals.`;
  if (!/[1-9]/.test(text)) return 'Must be more than 0.';
  return undefined;
}
