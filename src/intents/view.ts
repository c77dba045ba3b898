// C41: an intent as the API and the `intent.updated` webhook event (C38) give it.
import type { Address, Hex } from 'viem';
import { formatUnits, getAddress, pad } from 'viem/utils';
import { encodeOpen, encodeOriginData } from './contracts.ts';
import type { IntentStatus, IntentTxKind } from './schema.ts';
import type { IntentRow, IntentTxRow } from './store.ts';

/** One output of the ERC-7683 order (amounts in wei as decimal strings, addresses as bytes32). */
export interface OutputView {
  token: Hex;
  amount: string;
  recipient: Hex;
  chainId: number;
}

/** One step's transaction: the solver's once recorded, the confirmed one once its event is confirmed. */
export interface StepTransaction {
  network: string;
  txHash: string | null;
  /** pending (recorded, not yet accepted by a node), sent, confirmed (its event is confirmed), reverted, failed (refused by the node). */
  status: 'pending' | 'sent' | 'confirmed' | 'reverted' | 'failed';
  blockNumber: number | null;
  /** The block's time (ISO 8601 UTC) once confirmed. */
  timestamp: string | null;
}

export interface Intent {
  id: string;
  status: IntentStatus;
  fromNetwork: string;
  toNetwork: string;
  sender: Address;
  recipient: Address;
  inputAmount: string;
  outputAmount: string;
  fee: string;
  order: {
    user: Address;
    originChainId: number;
    openDeadline: number;
    fillDeadline: number;
    orderId: Hex;
    maxSpent: OutputView[];
    minReceived: OutputView[];
    fillInstructions: { destinationChainId: number; destinationSettler: Hex; originData: Hex }[];
  };
  open: { chainId: number; to: Address; data: Hex; value: string };
  transactions: Record<'open' | IntentTxKind, StepTransaction | null>;
  createdAt: string;
  updatedAt: string;
}

const ZERO32: Hex = `0x${'0'.repeat(64)}`;

function confirmed(network: string, hash: string | null, block: number | null, at: Date | null): StepTransaction {
  return { network, txHash: hash, status: 'confirmed', blockNumber: block, timestamp: at ? at.toISOString() : null };
}

/** The step's view: the confirmed transaction when there is one, else the solver's latest. */
function step(row: IntentRow, kind: IntentTxKind, txs: readonly IntentTxRow[]): StepTransaction | null {
  const network = kind === 'fill' ? row.toNetwork : row.fromNetwork;
  const done = {
    fill: [row.fillTxHash, row.fillBlock, row.filledAt],
    settle: [row.settleTxHash, row.settleBlock, row.settledAt],
    refund: [row.refundTxHash, row.refundBlock, row.refundedAt],
  } as const;
  const [hash, block, at] = done[kind];
  if (hash || at) return confirmed(network, hash, block, at);
  const mine = txs.filter((x) => x.kind === kind).at(-1);
  if (!mine) return null;
  const status = mine.status === 'mined' ? 'sent' : mine.status;
  return { network, txHash: mine.txHash, status, blockNumber: null, timestamp: null };
}

/** The intent of C41 from its row and the solver's transactions of it. */
export function toIntent(row: IntentRow, txs: readonly IntentTxRow[], decimals: number): Intent {
  const sender = getAddress(row.sender);
  const recipient = getAddress(row.recipient);
  const input = BigInt(row.inputWei);
  const output = BigInt(row.outputWei);
  const orderId = row.orderId as Hex;
  const order = {
    nonce: row.nonce as Hex,
    openDeadline: row.openDeadline,
    fillWindow: row.fillWindow,
    inputWei: input,
    outputWei: output,
    destinationChainId: row.destinationChainId,
    destinationSettler: row.destinationSettler as Address,
    recipient,
  };
  return {
    id: row.id,
    status: row.status,
    fromNetwork: row.fromNetwork,
    toNetwork: row.toNetwork,
    sender,
    recipient,
    inputAmount: formatUnits(input, decimals),
    outputAmount: formatUnits(output, decimals),
    fee: formatUnits(BigInt(row.feeWei), decimals),
    order: {
      user: sender,
      originChainId: row.originChainId,
      openDeadline: row.openDeadline,
      fillDeadline: row.fillDeadline,
      orderId,
      maxSpent: [{ token: ZERO32, amount: input.toString(), recipient: ZERO32, chainId: row.originChainId }],
      minReceived: [{ token: ZERO32, amount: output.toString(), recipient: pad(recipient), chainId: row.destinationChainId }],
      fillInstructions: [
        {
          destinationChainId: row.destinationChainId,
          destinationSettler: pad(row.destinationSettler as Address),
          originData: encodeOriginData(orderId, recipient, output, row.fillDeadline, row.destinationChainId),
        },
      ],
    },
    open: { chainId: row.originChainId, to: getAddress(row.originSettler), data: encodeOpen(order), value: input.toString() },
    transactions: {
      open: row.openedAt ? confirmed(row.fromNetwork, row.openTxHash, row.openBlock, row.openedAt) : null,
      fill: step(row, 'fill', txs),
      settle: step(row, 'settle', txs),
      refund: step(row, 'refund', txs),
    },
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}
