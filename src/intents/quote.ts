// C41: the fee of an intent, quoted at creation: `intents.feeBps` of the amount plus the gas of a
// fill on the destination. Both coins are the same asset (a route joins networks with the same
// native coin), so the destination's gas cost counts one to one against the amount.

export interface QuoteInput {
  inputWei: bigint;
  feeBps: number;
  fillGasLimit: bigint;
  /** The destination's `eth_gasPrice`: what a fill is expected to cost per gas unit. */
  gasPrice: bigint;
  /** The most a gas unit of the solver's fill may cost with the fees it will offer. */
  maxPerGas: bigint;
}

export interface Quote {
  feeWei: bigint;
  /** `inputWei - feeWei`; zero or less means the amount does not cover the fee. */
  outputWei: bigint;
  /** Reserved on the destination wallet beside the output until the fill: the fill's gas at most. */
  gasReserveWei: bigint;
}

/** The fee rounds up to the next wei: the solver is never paid less than `feeBps`. */
export function quote(q: QuoteInput): Quote {
  const bps = (q.inputWei * BigInt(q.feeBps) + 9_999n) / 10_000n;
  const feeWei = bps + q.fillGasLimit * q.gasPrice;
  return { feeWei, outputWei: q.inputWei - feeWei, gasReserveWei: q.fillGasLimit * q.maxPerGas };
}
