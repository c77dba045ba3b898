// C31: the devnet starts one real anvil chain per network and leaves none behind.
// slow: anvil chains started and stopped
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createPublicClient, createWalletClient, http, parseEther } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { mainnet } from 'viem/chains';
import { type Devnet, type DevnetNetwork, anvilBinary, startDevnet } from '../../src/devnet/devnet.ts';
import { waitFor } from '../support/wait.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const config = JSON.parse(readFileSync(path.join(root, 'config/default.json'), 'utf8')) as {
  networks: { slug: string; chainId: number; native?: boolean }[];
};
const networks: DevnetNetwork[] = config.networks.map(({ slug, chainId, native }) => ({
  slug,
  chainId,
  ...(native ? { native } : {}),
}));

const FAUCET = '0x000000000000000000000000000000000000fa0c' as const;
const silent = { info() {}, warn() {}, error() {} };

const client = (url: string) => createPublicClient({ transport: http(url), pollingInterval: 100 });

/** Alive and not a zombie (a zombie has exited; only its parent has not reaped it yet). */
function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** Pids of the live anvil processes whose parent is `ppid`. */
function anvilChildrenOf(ppid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (comm === 'anvil' && parent === ppid && isAlive(Number(entry))) out.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return out;
}

function refusesConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });
}

/** Whether `check` holds within `ms` (the callers assert it with their own message). */
function waitUntil(check: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  return waitFor(check, { timeoutMs: ms, intervalMs: 100 }).then(
    () => true,
    () => false,
  );
}

describe('anvilBinary', () => {
  test('points at the platform binary, not the bin.mjs wrapper', () => {
    const bin = anvilBinary();
    assert.ok(path.isAbsolute(bin));
    assert.match(path.basename(bin), /^anvil(\.exe)?$/);
  });
});

describe('startDevnet with the 16 networks of config/default.json', () => {
  let devnet: Devnet;
  let startMs = 0;

  before(async () => {
    const t0 = performance.now();
    devnet = await startDevnet({ networks, nativeBlockTimeSeconds: 1, fund: [FAUCET], logger: silent });
    startMs = performance.now() - t0;
  });
  after(() => devnet?.stop());

  test('is ready well under 60 s', (t) => {
    t.diagnostic(`16 chains ready in ${Math.round(startMs)} ms`);
    assert.equal(networks.length, 16);
    assert.ok(startMs < 30_000, `took ${startMs} ms`);
  });

  test('every chain answers eth_chainId with its network chainId', async () => {
    assert.deepEqual(Object.keys(devnet.upstreams).sort(), networks.map((n) => n.slug).sort());
    const ids = await Promise.all(networks.map((n) => client(devnet.upstreams[n.slug]?.http ?? '').getChainId()));
    assert.deepEqual(ids, networks.map((n) => n.chainId));
    for (const n of networks) assert.match(devnet.upstreams[n.slug]?.ws ?? '', /^ws:\/\/127\.0\.0\.1:\d+$/);
  });

  test('the pids are anvil itself (setpriv execs it), not a wrapper', () => {
    for (const pid of Object.values(devnet.pids)) {
      assert.equal(readFileSync(`/proc/${pid}/comm`, 'utf8').trim(), 'anvil');
    }
  });

  test('a native network mines blocks on its own', async () => {
    const native = networks.find((n) => n.native);
    assert.ok(native);
    const c = client(devnet.upstreams[native.slug]?.http ?? '');
    const first = await c.getBlockNumber();
    assert.ok(await waitUntil(async () => (await c.getBlockNumber()) > first, 4_000), 'no new block within 4 s');
  });

  test('a funded address holds 1,000,000 ether on every chain', async () => {
    const balances = await Promise.all(
      networks.map((n) => client(devnet.upstreams[n.slug]?.http ?? '').getBalance({ address: FAUCET })),
    );
    for (const b of balances) assert.equal(b, parseEther('1000000'));
  });

  test('a default account signs a transaction on a non-native chain and it is mined at once', async () => {
    assert.equal(devnet.accounts.length, 10);
    const [sender, receiver] = devnet.accounts;
    assert.ok(sender && receiver);
    assert.equal(sender.address, '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266');
    const url = devnet.upstreams.ethereum?.http ?? '';
    const pub = client(url);
    assert.equal(await pub.getBlockNumber(), 0n, 'a non-native chain mines only on transactions');
    const before = await pub.getBalance({ address: receiver.address });
    const wallet = createWalletClient({ account: privateKeyToAccount(sender.privateKey), chain: mainnet, transport: http(url) });
    const hash = await wallet.sendTransaction({ to: receiver.address, value: parseEther('1.5') });
    const receipt = await pub.waitForTransactionReceipt({ hash, timeout: 5_000 });
    assert.equal(receipt.status, 'success');
    assert.equal(receipt.blockNumber, 1n);
    assert.equal(await pub.getBalance({ address: receiver.address }), before + parseEther('1.5'));
  });

  test('stop() leaves no anvil process alive and closes every port', async () => {
    const pids = Object.values(devnet.pids);
    const ports = Object.values(devnet.upstreams).map((u) => Number(new URL(u.http).port));
    await Promise.all([devnet.stop(), devnet.stop()]); // idempotent, even concurrently
    await devnet.stop();
    for (const pid of pids) assert.equal(isAlive(pid), false, `anvil ${pid} still alive`);
    for (const port of ports) assert.equal(await refusesConnections(port), true, `port ${port} still open`);
  });
});

describe('startDevnet when a chain cannot start', () => {
  test('rejects naming the network and stops the chains that did start', async () => {
    const beforePids = new Set(anvilChildrenOf(process.pid));
    await assert.rejects(
      startDevnet({
        networks: [
          { slug: 'good', chainId: 1 },
          { slug: 'broken', chainId: 1e20 }, // anvil refuses a chain id beyond u64
        ],
        nativeBlockTimeSeconds: 1,
        logger: silent,
      }),
      (err: Error) => {
        assert.match(err.message, /network "broken" \(chainId 100000000000000000000\)/);
        assert.doesNotMatch(err.message, /network "good"/);
        return true;
      },
    );
    assert.deepEqual(anvilChildrenOf(process.pid).filter((p) => !beforePids.has(p)), []);
  });
});

describe('a chain that misbehaves', () => {
  test('a chain that dies on its own is logged as an error naming its network, without crashing', async () => {
    const errors: object[] = [];
    const devnet = await startDevnet({
      networks: [{ slug: 'ethereum', chainId: 1 }],
      nativeBlockTimeSeconds: 1,
      logger: { ...silent, error: (obj) => errors.push(obj) },
    });
    try {
      process.kill(devnet.pids.ethereum ?? -1, 'SIGKILL');
      assert.ok(await waitUntil(() => errors.length > 0, 3_000), 'no error logged');
      assert.deepEqual({ ...errors[0], stderr: undefined }, { network: 'ethereum', code: null, signal: 'SIGKILL', stderr: undefined });
    } finally {
      await devnet.stop();
    }
    assert.equal(errors.length, 1, 'stop() after the crash logs nothing more');
  });

  test('stop() SIGKILLs a chain that ignores SIGTERM for ~3 s', async () => {
    const devnet = await startDevnet({ networks: [{ slug: 'ethereum', chainId: 1 }], nativeBlockTimeSeconds: 1, logger: silent });
    const pid = devnet.pids.ethereum ?? -1;
    process.kill(pid, 'SIGSTOP'); // a stopped process does not act on SIGTERM, but SIGKILL still ends it
    const t0 = performance.now();
    await devnet.stop();
    const ms = performance.now() - t0;
    assert.equal(isAlive(pid), false);
    assert.ok(ms >= 2_500 && ms < 6_000, `stop took ${ms} ms`);
  });
});

describe('when the process that started a devnet is SIGKILLed', () => {
  test('its anvil chains die with it', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'orphan-fixture.ts')], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const line = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.setEncoding('utf8');
      child.stdout.on('data', (chunk: string) => {
        out += chunk;
        if (out.includes('\n')) resolve(out.slice(0, out.indexOf('\n')));
      });
      child.once('exit', (code) => reject(new Error(`fixture exited early with code ${code}`)));
      setTimeout(() => reject(new Error('fixture printed no pids within 20 s')), 20_000).unref();
    });
    const pids = Object.values(JSON.parse(line) as Record<string, number>);
    assert.equal(pids.length, 2);
    for (const pid of pids) assert.equal(isAlive(pid), true);

    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    assert.ok(
      await waitUntil(() => pids.every((pid) => !isAlive(pid)), 5_000),
      `anvil left running: ${pids.filter(isAlive).join(', ')}`,
    );
  });
});
