// The settler contracts of C42 on real chains (two anvil chains of the devnet), from their
// checked-in bytecode: open locks the exact amount, fill pays once, settle is the oracle's,
// refund waits for the fill deadline and returns the exact amount, settle after refund fails.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import {
  type Abi,
  type Address,
  createPublicClient,
  createWalletClient,
  decodeEventLog,
  defineChain,
  encodeAbiParameters,
  type Hex,
  http,
  keccak256,
  pad,
  parseEther,
  parseEventLogs,
  type PublicClient,
  type WalletClient,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { type Devnet, startDevnet } from '../../src/devnet/devnet.ts';

interface Artifact {
  abi: Abi;
  bytecode: Hex;
}
const artifact = (name: string): Artifact => {
  const a = JSON.parse(readFileSync(new URL(`../../contracts/build/${name}.json`, import.meta.url), 'utf8')) as { abi: Abi; bytecode: string };
  return { abi: a.abi, bytecode: (a.bytecode.startsWith('0x') ? a.bytecode : `0x${a.bytecode}`) as Hex };
};
const ORIGIN = artifact('OriginSettler');
const DESTINATION = artifact('DestinationSettler');

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

let devnet: Devnet;
const chains: Record<'origin' | 'dest', { pub: PublicClient; wallet: (i: number) => WalletClient; url: string; id: number }> = {} as never;
let originSettler: Address;
let destinationSettler: Address;

const ORIGIN_ID = 1; // ethereum
const DEST_ID = 42161; // arbitrum

function clients(url: string, id: number) {
  const chain = defineChain({ id, name: `chain-${id}`, nativeCurrency: { name: 'ETH', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [url] } } });
  return {
    url,
    id,
    pub: createPublicClient({ chain, transport: http(url) }) as PublicClient,
    wallet: (i: number) => createWalletClient({ chain, transport: http(url), account: privateKeyToAccount(devnet.accounts[i]!.privateKey) }),
  };
}

async function deploy(c: (typeof chains)['origin'], a: Artifact, args: unknown[]): Promise<Address> {
  const w = c.wallet(0);
  const hash = await w.deployContract({ abi: a.abi, bytecode: a.bytecode, args, account: w.account!, chain: w.chain });
  const receipt = await c.pub.waitForTransactionReceipt({ hash });
  assert.equal(receipt.status, 'success');
  return receipt.contractAddress!;
}

const ORACLE = 7; // dev account indexes
const USER = 1;
const SOLVER = 2;
const RECIPIENT = 3;
const STRANGER = 4;

async function anvil(c: (typeof chains)['origin'], method: string, params: unknown[]): Promise<unknown> {
  const res = await fetch(c.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  return ((await res.json()) as { result: unknown }).result;
}

async function now(c: (typeof chains)['origin']): Promise<number> {
  return Number((await c.pub.getBlock()).timestamp);
}

let nonceCounter = 0;
async function openOrder(opts: { input: bigint; output: bigint; fillWindow?: number; value?: bigint; openDeadline?: number }) {
  const o = chains.origin;
  const nonce = keccak256(encodeAbiParameters([{ type: 'uint256' }], [BigInt(++nonceCounter)]));
  const t = await now(o);
  const fillWindow = opts.fillWindow ?? 600;
  const orderData = encodeAbiParameters(NATIVE_ORDER, [
    {
      nonce,
      openDeadline: opts.openDeadline ?? t + 600,
      fillWindow,
      inputAmount: opts.input,
      outputAmount: opts.output,
      destinationChainId: BigInt(DEST_ID),
      destinationSettler: pad(destinationSettler),
      recipient: devnet.accounts[RECIPIENT]!.address,
    },
  ]);
  const orderType = (await o.pub.readContract({ address: originSettler, abi: ORIGIN.abi, functionName: 'NATIVE_ORDER_TYPE' })) as Hex;
  const order = { fillDeadline: t + fillWindow + 3_600, orderDataType: orderType, orderData };
  const w = o.wallet(USER);
  const hash = await w.writeContract({ address: originSettler, abi: ORIGIN.abi, functionName: 'open', args: [order], value: opts.value ?? opts.input, account: w.account!, chain: w.chain });
  return { hash, nonce, order };
}

async function reverts(p: Promise<unknown>, error: string): Promise<void> {
  await assert.rejects(p, (err: Error) => {
    assert.match(`${err.message} ${JSON.stringify((err as { cause?: unknown }).cause ?? '')}`, new RegExp(error));
    return true;
  });
}

before(async () => {
  devnet = await startDevnet({
    networks: [
      { slug: 'ethereum', chainId: ORIGIN_ID },
      { slug: 'arbitrum', chainId: DEST_ID },
    ],
    nativeBlockTimeSeconds: 1,
  });
  chains.origin = clients(devnet.upstreams.ethereum!.http, ORIGIN_ID);
  chains.dest = clients(devnet.upstreams.arbitrum!.http, DEST_ID);
  [originSettler, destinationSettler] = await Promise.all([
    deploy(chains.origin, ORIGIN, [devnet.accounts[ORACLE]!.address]),
    deploy(chains.dest, DESTINATION, []),
  ]);
});

after(async () => {
  await devnet?.stop();
});

describe('settler contracts (C42)', () => {
  test('open locks the exact amount and emits Open with the resolved order', async () => {
    const input = parseEther('2.5');
    const output = parseEther('2.4975');
    const before = await chains.origin.pub.getBalance({ address: originSettler });
    const { hash, nonce } = await openOrder({ input, output });
    const receipt = await chains.origin.pub.waitForTransactionReceipt({ hash });
    assert.equal(receipt.status, 'success');
    assert.equal((await chains.origin.pub.getBalance({ address: originSettler })) - before, input);
    const [open] = parseEventLogs({ abi: ORIGIN.abi, logs: receipt.logs, eventName: 'Open' });
    assert.ok(open);
    const { args } = decodeEventLog({ abi: ORIGIN.abi, data: open.data, topics: open.topics }) as unknown as {
      args: { orderId: Hex; resolvedOrder: { user: Address; originChainId: bigint; orderId: Hex; maxSpent: { amount: bigint }[]; minReceived: { amount: bigint; chainId: bigint; recipient: Hex }[]; fillInstructions: { destinationChainId: bigint; destinationSettler: Hex; originData: Hex }[] } };
    };
    const user = devnet.accounts[USER]!.address;
    const expectedId = await chains.origin.pub.readContract({ address: originSettler, abi: ORIGIN.abi, functionName: 'orderIdOf', args: [user, nonce] });
    assert.equal(args.orderId, expectedId);
    const r = args.resolvedOrder;
    assert.equal(r.user, user);
    assert.equal(r.originChainId, BigInt(ORIGIN_ID));
    assert.equal(r.maxSpent[0]?.amount, input);
    assert.equal(r.minReceived[0]?.amount, output);
    assert.equal(r.minReceived[0]?.chainId, BigInt(DEST_ID));
    assert.equal(r.minReceived[0]?.recipient, pad(devnet.accounts[RECIPIENT]!.address.toLowerCase() as Hex));
    assert.equal(r.fillInstructions[0]?.destinationChainId, BigInt(DEST_ID));
    assert.equal(r.fillInstructions[0]?.destinationSettler, pad(destinationSettler.toLowerCase() as Hex));
  });

  test('open refuses a value other than the input amount, and an open after its deadline', async () => {
    await reverts(openOrder({ input: parseEther('1'), output: parseEther('1'), value: parseEther('0.9') }), 'WrongValue');
    await reverts(openOrder({ input: parseEther('1'), output: parseEther('1'), openDeadline: (await now(chains.origin)) - 10 }), 'OpenDeadlinePassed');
  });

  test('fill pays the recipient once; settle is the oracle’s and pays the filler the escrow', async () => {
    const input = parseEther('3');
    const output = parseEther('2.99');
    const { hash } = await openOrder({ input, output });
    const receipt = await chains.origin.pub.waitForTransactionReceipt({ hash });
    const [open] = parseEventLogs({ abi: ORIGIN.abi, logs: receipt.logs, eventName: 'Open' }) as unknown as {
      args: { orderId: Hex; resolvedOrder: { fillInstructions: { originData: Hex }[] } };
    }[];
    const orderId = open!.args.orderId;
    const originData = open!.args.resolvedOrder.fillInstructions[0]!.originData;
    const recipient = devnet.accounts[RECIPIENT]!.address;
    const solver = chains.dest.wallet(SOLVER);
    const before = await chains.dest.pub.getBalance({ address: recipient });
    const fill = await solver.writeContract({ address: destinationSettler, abi: DESTINATION.abi, functionName: 'fill', args: [orderId, originData, '0x'], value: output, account: solver.account!, chain: solver.chain });
    assert.equal((await chains.dest.pub.waitForTransactionReceipt({ hash: fill })).status, 'success');
    assert.equal((await chains.dest.pub.getBalance({ address: recipient })) - before, output);
    await reverts(
      solver.writeContract({ address: destinationSettler, abi: DESTINATION.abi, functionName: 'fill', args: [orderId, originData, '0x'], value: output, account: solver.account!, chain: solver.chain }),
      'AlreadyFilled',
    );

    const filler = devnet.accounts[SOLVER]!.address;
    const stranger = chains.origin.wallet(STRANGER);
    await reverts(
      stranger.writeContract({ address: originSettler, abi: ORIGIN.abi, functionName: 'settle', args: [orderId, filler], account: stranger.account!, chain: stranger.chain }),
      'NotOracle',
    );
    const oracle = chains.origin.wallet(ORACLE);
    const fillerBefore = await chains.origin.pub.getBalance({ address: filler });
    const settle = await oracle.writeContract({ address: originSettler, abi: ORIGIN.abi, functionName: 'settle', args: [orderId, filler], account: oracle.account!, chain: oracle.chain });
    assert.equal((await chains.origin.pub.waitForTransactionReceipt({ hash: settle })).status, 'success');
    assert.equal((await chains.origin.pub.getBalance({ address: filler })) - fillerBefore, input);
    await reverts(
      oracle.writeContract({ address: originSettler, abi: ORIGIN.abi, functionName: 'settle', args: [orderId, filler], account: oracle.account!, chain: oracle.chain }),
      'NotOpen',
    );
  });

  test('refund waits for the fill deadline, returns the exact amount, and settle after it fails', async () => {
    const input = parseEther('4');
    const { hash } = await openOrder({ input, output: parseEther('3.9'), fillWindow: 60 });
    const receipt = await chains.origin.pub.waitForTransactionReceipt({ hash });
    const [open] = parseEventLogs({ abi: ORIGIN.abi, logs: receipt.logs, eventName: 'Open' }) as unknown as { args: { orderId: Hex } }[];
    const orderId = open!.args.orderId;
    const anyone = chains.origin.wallet(STRANGER);
    await reverts(
      anyone.writeContract({ address: originSettler, abi: ORIGIN.abi, functionName: 'refund', args: [orderId], account: anyone.account!, chain: anyone.chain }),
      'FillDeadlineNotPassed',
    );
    await anvil(chains.origin, 'evm_increaseTime', [61]);
    await anvil(chains.origin, 'evm_mine', []);
    const user = devnet.accounts[USER]!.address;
    const before = await chains.origin.pub.getBalance({ address: user });
    const refund = await anyone.writeContract({ address: originSettler, abi: ORIGIN.abi, functionName: 'refund', args: [orderId], account: anyone.account!, chain: anyone.chain });
    assert.equal((await chains.origin.pub.waitForTransactionReceipt({ hash: refund })).status, 'success');
    assert.equal((await chains.origin.pub.getBalance({ address: user })) - before, input);
    const oracle = chains.origin.wallet(ORACLE);
    await reverts(
      oracle.writeContract({ address: originSettler, abi: ORIGIN.abi, functionName: 'settle', args: [orderId, devnet.accounts[SOLVER]!.address], account: oracle.account!, chain: oracle.chain }),
      'NotOpen',
    );
    await reverts(
      anyone.writeContract({ address: originSettler, abi: ORIGIN.abi, functionName: 'refund', args: [orderId], account: anyone.account!, chain: anyone.chain }),
      'NotOpen',
    );
  });
});
