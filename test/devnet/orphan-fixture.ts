// Fixture for devnet.test.ts: starts a small devnet, prints its anvil pids as one JSON line, then
// idles until the test SIGKILLs this process. Not a test file itself (no .test.ts suffix).
import { startDevnet } from '../../src/devnet/devnet.ts';

const devnet = await startDevnet({
  networks: [
    { slug: 'native-mainnet', chainId: 50, native: true },
    { slug: 'ethereum', chainId: 1 },
  ],
  nativeBlockTimeSeconds: 1,
});
process.stdout.write(`${JSON.stringify(devnet.pids)}\n`);
setInterval(() => {}, 60_000);
