// C45: the devnet's price feed (contracts/DevPriceFeed.sol), deployed on each native chain and
// read by the gateway's `chainlink` price source (C34) like any Chainlink AggregatorV3 feed.
import type { Address, Hex } from 'viem';
import { decodeFunctionResult, encodeDeployData, encodeFunctionData } from 'viem/utils';
import { loadArtifact } from '../onchain/artifacts.ts';
import { rpc, waitForReceipt } from '../json/rpc-client.ts';
import { DevnetError } from '../errors/devnet.ts';

/** Digits after the point in the feed's answers (as Chainlink's USD feeds). */
export const FEED_DECIMALS = 8;

/** USD as the feed's integer answer (8 decimals), rounded to the nearest unit. */
export function toFeedAnswer(usd: number): bigint {
  if (!Number.isFinite(usd) || usd < 0) throw new Error(`not a price: ${usd}`);
  return BigInt(Math.round(usd * 10 ** FEED_DECIMALS));
}

/**
 * Deploys a DevPriceFeed from `from` (an unlocked dev account) answering `usd`, mines the block at
 * once instead of waiting for the next timed one, and returns the feed's address.
 */
export async function deployPriceFeed(url: string, from: Address, description: string, usd: number): Promise<Address> {
  const { abi, bytecode } = loadArtifact('DevPriceFeed');
  const data = encodeDeployData({ abi, bytecode, args: [description, toFeedAnswer(usd)] });
  const hash = await rpc<Hex>(url, 'eth_sendTransaction', [{ from, data }]);
  await rpc(url, 'evm_mine', []);
  const receipt = await waitForReceipt(url, hash);
  if (!receipt.contractAddress) throw new DevnetError(`price feed deployment ${hash} created no contract`);
  return receipt.contractAddress;
}

/**
 * Sets the feed's answer to `usd`, updated at `updatedAt` (unix seconds; default: the block's
 * time), as its owner `from`; resolves once the change is mined (mined at once).
 */
export async function setFeedPrice(url: string, feed: Address, from: Address, usd: number, updatedAt?: number): Promise<void> {
  const { abi } = loadArtifact('DevPriceFeed');
  const data = encodeFunctionData({ abi, functionName: 'updateAnswer', args: [toFeedAnswer(usd), BigInt(updatedAt ?? 0)] });
  const hash = await rpc<Hex>(url, 'eth_sendTransaction', [{ from, to: feed, data }]);
  await rpc(url, 'evm_mine', []);
  await waitForReceipt(url, hash);
}

/** The feed's newest answer in USD and when it was updated (unix seconds). */
export async function readFeed(url: string, feed: Address): Promise<{ usd: number; updatedAt: number }> {
  const { abi } = loadArtifact('DevPriceFeed');
  const data = encodeFunctionData({ abi, functionName: 'latestRoundData' });
  const result = await rpc<Hex>(url, 'eth_call', [{ to: feed, data }, 'latest']);
  const [, answer, , updatedAt] = decodeFunctionResult({ abi, functionName: 'latestRoundData', data: result }) as readonly [
    bigint,
    bigint,
    bigint,
    bigint,
    bigint,
  ];
  return { usd: Number(answer) / 10 ** FEED_DECIMALS, updatedAt: Number(updatedAt) };
}

/**
 * Re-posts the feed's current answer as updated now, as a Chainlink feed's heartbeat does, so the
 * devnet's price never turns stale (C34's maxAgeSeconds) while the devnet runs.
 */
export async function refreshFeed(url: string, feed: Address, from: Address): Promise<void> {
  const { abi } = loadArtifact('DevPriceFeed');
  // The exact integer answer, not a USD number rounded through a float: the price stays as it is.
  const call = encodeFunctionData({ abi, functionName: 'latestAnswer' });
  const answer = decodeFunctionResult({ abi, functionName: 'latestAnswer', data: await rpc<Hex>(url, 'eth_call', [{ to: feed, data: call }, 'latest']) }) as bigint;
  const data = encodeFunctionData({ abi, functionName: 'updateAnswer', args: [answer, 0n] });
  await rpc<Hex>(url, 'eth_sendTransaction', [{ from, to: feed, data }]);
}
