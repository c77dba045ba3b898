// C34/C45: DevPriceFeed reads like a Chainlink AggregatorV3 feed, and only its owner sets answers.
// Deployed by the devnet itself on a native anvil chain, from the checked-in artifact.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Address, createPublicClient, http, type PublicClient } from 'viem';
import { type Devnet, startDevnet } from '../../src/devnet/devnet.ts';
import { loadArtifact } from '../../src/onchain/artifacts.ts';
import { rpc } from '../../src/json/rpc-client.ts';

const silent = { info() {}, warn() {}, error() {} };
const { abi } = loadArtifact('DevPriceFeed');

describe('DevPriceFeed', () => {
  let devnet: Devnet;
  let client: PublicClient;
  let feed: Address;
  let url: string;

  before(async () => {
    devnet = await startDevnet({
      networks: [{ slug: 'native-mainnet', chainId: 50, native: true }],
      nativeBlockTimeSeconds: 1,
      nativeUsdPrice: 0.05,
      logger: silent,
    });
    url = devnet.upstreams['native-mainnet']?.http ?? '';
    feed = devnet.priceFeeds['native-mainnet'] as Address;
    client = createPublicClient({ transport: http(url) });
  });
  after(() => devnet?.stop());

  const read = (functionName: string, args: readonly unknown[] = []) => client.readContract({ address: feed, abi, functionName, args });

  test('answers decimals, description, version and the first round at devnet.nativeUsdPrice', async () => {
    assert.equal(await read('decimals'), 8);
    assert.equal(await read('description'), 'native-mainnet / USD');
    assert.equal(await read('version'), 4n);
    assert.equal(await read('owner'), devnet.accounts[9]?.address, 'owned by dev account 9, the devnet\'s own');
    const [roundId, answer, startedAt, updatedAt, answeredInRound] = (await read('latestRoundData')) as bigint[];
    assert.equal(roundId, 1n);
    assert.equal(answer, 5_000_000n, '0.05 USD with 8 decimals');
    assert.equal(answeredInRound, 1n);
    assert.ok(updatedAt !== undefined && startedAt === updatedAt && Math.abs(Number(updatedAt) - Date.now() / 1000) < 120, 'updated at deployment');
  });

  test('the owner starts new rounds; getRoundData keeps the old ones and refuses unknown ones', async () => {
    await devnet.setPrice('native-mainnet', 2.5, 1_700_000_000);
    const [roundId, answer, , updatedAt] = (await read('latestRoundData')) as bigint[];
    assert.ok(roundId !== undefined && roundId >= 2n);
    assert.equal(answer, 250_000_000n);
    assert.equal(updatedAt, 1_700_000_000n);
    const first = (await read('getRoundData', [1n])) as bigint[];
    assert.equal(first[1], 5_000_000n, 'round 1 is unchanged');
    await assert.rejects(read('getRoundData', [roundId + 100n]), /NoData/);
    assert.equal(await read('latestAnswer'), 250_000_000n);
    assert.equal(await read('latestTimestamp'), 1_700_000_000n);
  });

  test('anyone else is refused (NotOwner)', async () => {
    const stranger = devnet.accounts[0]?.address;
    await assert.rejects(
      client.simulateContract({ address: feed, abi, functionName: 'updateAnswer', args: [1n, 0n], account: stranger as Address }),
      /NotOwner/,
    );
  });

  test('the devnet deploys it at the same address on every start (dev account 9, first transaction)', async () => {
    const code = await rpc<string>(url, 'eth_getCode', [feed, 'latest']);
    assert.equal(code, loadArtifact('DevPriceFeed').deployedBytecode);
    assert.equal(feed.toLowerCase(), '0x700b6a60ce7eaaea56f065753d8dcb9653dbad35');
  });
});
