// C42: how the gateway speaks to the settler contracts (contracts/OriginSettler.sol,
// contracts/DestinationSettler.sol): the order it asks the user to open, the order id as the
// origin settler computes it, the solver's calls, and the events the follower reads.
import type { Abi, AbiEvent, Address, Hex } from 'viem';
import { decodeEventLog, encodeAbiParameters, encodeFunctionData, getAbiItem, keccak256, pad, toEventSelector, toHex } from 'viem/utils';
import { loadArtifact } from '../onchain/artifacts.ts';

/** The settlers' ABIs, from the checked-in artifacts (contracts/build). */
export const originAbi = (): Abi => loadArtifact('OriginSettler').abi;
export const destinationAbi = (): Abi => loadArtifact('DestinationSettler').abi;

/** `OriginSettler.NATIVE_ORDER_TYPE`: the EIP-712-style type string of the order data, hashed. */
export const NATIVE_ORDER_TYPE = keccak256(
  toHex(
    'NativeOrder(bytes32 nonce,uint32 openDeadline,uint32 fillWindow,uint256 inputAmount,uint256 outputAmount,uint64 destinationChainId,bytes32 destinationSettler,address recipient)',
  ),
);

const NATIVE_ORDER = [
  {
    type: 'tuple',
    components: [
      { name: 'nonce', type: 'bytes32' },
      { name: 'openDeadline', type: 'uint32' },
      { name: 'fillWindow', type: 'uint32' },
      { name: 'inputAmount', type: 'uint256' },
      { name: 'outputAmount', type: 'uint256' },
      { name: 'destinationChainId', type: 'uint64' },
      { name: 'destinationSettler', type: 'bytes32' },
      { name: 'recipient', type: 'address' },
    ],
  },
] as const;

/** The gateway's order data (`NativeOrder` in OriginSettler.sol). */
export interface NativeOrder {
  nonce: Hex;
  openDeadline: number;
  fillWindow: number;
  inputWei: bigint;
  outputWei: bigint;
  destinationChainId: number;
  destinationSettler: Address;
  recipient: Address;
}

let topics: { open: Hex; settled: Hex; refunded: Hex; filled: Hex } | undefined;

/** Topics (event selectors) of the events the solver reads, from the ABIs. */
export function settlerTopics(): { open: Hex; settled: Hex; refunded: Hex; filled: Hex } {
  const selector = (abi: Abi, name: string) => toEventSelector(getAbiItem({ abi, name }) as AbiEvent);
  topics ??= {
    open: selector(originAbi(), 'Open'),
    settled: selector(originAbi(), 'Settled'),
    refunded: selector(originAbi(), 'Refunded'),
    filled: selector(destinationAbi(), 'Filled'),
  };
  return topics;
}

/** `orderIdOf(user, nonce)` exactly as the origin settler computes it: keccak256(abi.encode(chainid, settler, user, nonce)). */
export function orderIdOf(originChainId: number, originSettler: Address, user: Address, nonce: Hex): Hex {
  return keccak256(
    encodeAbiParameters([{ type: 'uint256' }, { type: 'address' }, { type: 'address' }, { type: 'bytes32' }], [BigInt(originChainId), originSettler, user, nonce]),
  );
}

export function encodeOrderData(o: NativeOrder): Hex {
  return encodeAbiParameters(NATIVE_ORDER, [
    {
      nonce: o.nonce,
      openDeadline: o.openDeadline,
      fillWindow: o.fillWindow,
      inputAmount: o.inputWei,
      outputAmount: o.outputWei,
      destinationChainId: BigInt(o.destinationChainId),
      destinationSettler: pad(o.destinationSettler),
      recipient: o.recipient,
    },
  ]);
}

/**
 * Calldata of `open(OnchainCrossChainOrder)`. The order's `fillDeadline` is the latest the settler
 * can resolve (an open at the open deadline plus the fill window); the settler's own is the open's
 * block time plus the fill window.
 */
export function encodeOpen(o: NativeOrder): Hex {
  return encodeFunctionData({
    abi: originAbi(),
    functionName: 'open',
    args: [{ fillDeadline: o.openDeadline + o.fillWindow, orderDataType: NATIVE_ORDER_TYPE, orderData: encodeOrderData(o) }],
  });
}

/** The fill instruction's `originData` as the origin settler builds it (DestinationSettler.fill reads it). */
export function encodeOriginData(orderId: Hex, recipient: Address, outputWei: bigint, fillDeadline: number, destinationChainId: number): Hex {
  return encodeAbiParameters(
    [{ type: 'bytes32' }, { type: 'address' }, { type: 'uint256' }, { type: 'uint32' }, { type: 'uint64' }],
    [orderId, recipient, outputWei, fillDeadline, BigInt(destinationChainId)],
  );
}

/** `fill(orderId, originData, fillerData)`; the filler repaid on the origin is the sender (empty fillerData). */
export function encodeFill(orderId: Hex, originData: Hex): Hex {
  return encodeFunctionData({ abi: destinationAbi(), functionName: 'fill', args: [orderId, originData, '0x'] });
}

export function encodeSettle(orderId: Hex, filler: Address): Hex {
  return encodeFunctionData({ abi: originAbi(), functionName: 'settle', args: [orderId, filler] });
}

export function encodeRefund(orderId: Hex): Hex {
  return encodeFunctionData({ abi: originAbi(), functionName: 'refund', args: [orderId] });
}

export function encodeOracleCall(): Hex {
  return encodeFunctionData({ abi: originAbi(), functionName: 'oracle' });
}

/** A log as `eth_getLogs` answers it. */
export interface RawLog {
  address: string;
  topics: Hex[];
  data: Hex;
  transactionHash: string;
  blockNumber: string;
  removed?: boolean;
}

/** One output of an ERC-7683 resolved order, as the event carries it. */
export interface OrderOutput {
  token: Hex;
  amount: bigint;
  recipient: Hex;
  chainId: bigint;
}

/** `ResolvedCrossChainOrder` as the Open event carries it. */
export interface ResolvedOrder {
  user: Address;
  originChainId: bigint;
  openDeadline: number;
  fillDeadline: number;
  orderId: Hex;
  maxSpent: readonly OrderOutput[];
  minReceived: readonly OrderOutput[];
  fillInstructions: readonly { destinationChainId: bigint; destinationSettler: Hex; originData: Hex }[];
}

export type SettlerEvent =
  | { kind: 'open'; orderId: Hex; order: ResolvedOrder }
  | { kind: 'settled'; orderId: Hex; filler: Address; amount: bigint }
  | { kind: 'refunded'; orderId: Hex; user: Address; amount: bigint }
  | { kind: 'filled'; orderId: Hex; filler: Address; recipient: Address; amount: bigint };

/** Decodes a settler log; null for a log of another kind or one that does not decode. */
export function decodeSettlerLog(log: RawLog): SettlerEvent | null {
  const t = settlerTopics();
  const topic = log.topics[0];
  const isOrigin = topic === t.open || topic === t.settled || topic === t.refunded;
  if (!isOrigin && topic !== t.filled) return null;
  try {
    const decoded = decodeEventLog({ abi: isOrigin ? originAbi() : destinationAbi(), data: log.data, topics: log.topics as [Hex, ...Hex[]] });
    const a = decoded.args as unknown as Record<string, unknown>;
    switch (decoded.eventName as string | undefined) {
      case 'Open':
        return { kind: 'open', orderId: a.orderId as Hex, order: a.resolvedOrder as ResolvedOrder };
      case 'Settled':
        return { kind: 'settled', orderId: a.orderId as Hex, filler: a.filler as Address, amount: a.amount as bigint };
      case 'Refunded':
        return { kind: 'refunded', orderId: a.orderId as Hex, user: a.user as Address, amount: a.amount as bigint };
      case 'Filled':
        return { kind: 'filled', orderId: a.orderId as Hex, filler: a.filler as Address, recipient: a.recipient as Address, amount: a.amount as bigint };
      default:
        return null;
    }
  } catch {
    return null;
  }
}
