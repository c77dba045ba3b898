// Amounts of a chain's coin: whole units as decimal text to base units and back, exact.
// src/onchain/ holds what faucet, balance, intents and devnet share about talking to a chain
// (named apart from src/chains/, which holds the networks).
import { formatUnits } from 'viem/utils';

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
