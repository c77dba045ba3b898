// C35: USD values to the cent, without floating-point arithmetic on the amount: whale alerts,
// address activity webhooks and balances all price amounts here.

/**
 * `price` as an exact decimal: `{ units, scale }` with price = units / 10^scale. The number's
 * shortest round-trip text is taken ("0.05", not the binary 0.05000000000000000277…): a price
 * read as 5,000,000 with 8 decimals is meant as 0.05, and that text says exactly that.
 */
export function decimalOf(price: number): { units: bigint; scale: number } {
  if (!Number.isFinite(price) || price < 0) throw new RangeError(`not a price: ${price}`);
  const [mantissa = '0', exp = '0'] = String(price).toLowerCase().split('e');
  const [int = '0', frac = ''] = mantissa.split('.');
  let units = BigInt(int + frac);
  let scale = frac.length - Number(exp);
  if (scale < 0) {
    units *= 10n ** BigInt(-scale);
    scale = 0;
  }
  return { units, scale };
}

/**
 * USD cents of `wei` (an amount with `decimals` decimals) at `price` USD per whole coin, rounded
 * half up: value * price computed on integers, then rounded once.
 */
export function usdCents(wei: bigint, decimals: number, price: number): bigint {
  const { units, scale } = decimalOf(price);
  const numerator = wei * units * 100n;
  const denominator = 10n ** BigInt(decimals + scale);
  return (numerator * 2n + denominator) / (denominator * 2n);
}
