// C33 (soak): a follower that runs for hours holds no block it has handed on. The soak's heap
// snapshots found each wait of the follower (a head poll, a block read) raced against one
// promise that lives as long as the follower: every race left a reaction on it that held the
// read's answer, so the heap grew by every block of every network until the follower stopped.
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { after, before, test } from 'node:test';
import { type Devnet, startDevnet } from '../../src/devnet/devnet.ts';
import type { BlockConsumer, FollowedBlock } from '../../src/events/types.ts';
import type { TestApp } from '../support/app.ts';
import { waitFor } from '../support/wait.ts';
import { chainHead, mine, SEPOLIA, startFollowingApp } from './helpers.ts';

setFlagsFromString('--expose-gc');
/** A full collection (the tests run without --expose-gc). */
const gc = runInNewContext('gc') as () => void;

/** Keeps only weak references to the blocks it is handed: whatever else holds them shows. */
class WeakRecorder implements BlockConsumer {
  readonly name = 'weak-recorder';
  readonly refs: WeakRef<FollowedBlock>[] = [];
  last = -1;
  networks(): string[] {
    return [SEPOLIA];
  }
  async onBlock(block: FollowedBlock): Promise<void> {
    this.refs.push(new WeakRef(block));
    this.last = block.number;
  }
}

let devnet: Devnet;
let chainUrl: string;
let app: TestApp | undefined;

before(async () => {
  // The block time applies to native networks only: this one is mined by the test, block by block.
  devnet = await startDevnet({ networks: [{ slug: SEPOLIA, chainId: 11_155_111 }], nativeBlockTimeSeconds: 1 });
  chainUrl = devnet.upstreams[SEPOLIA]?.http as string;
});
after(async () => {
  await app?.close();
  await devnet?.stop();
});

test('blocks handed on are not held by the follower while it runs', async () => {
  app = await startFollowingApp({ [SEPOLIA]: chainUrl });
  const rec = new WeakRecorder();
  app.app.parts.follower.register(rec);
  await mine(chainUrl, 1);
  await waitFor(() => rec.last >= 0, { what: 'the follower to hand on a first block' });

  // One block at a time, each read on its own: many waits, each with its own answer.
  for (let i = 0; i < 15; i++) {
    await mine(chainUrl, 1);
    const head = await chainHead(chainUrl);
    await waitFor(() => rec.last === head, { what: `block ${head} handed on` });
  }
  // A few head polls more, then two full collections (finalizers in the second).
  await new Promise((r) => setTimeout(r, 300));
  gc();
  await new Promise((r) => setImmediate(r));
  gc();
  const alive = rec.refs.filter((r) => r.deref() !== undefined).length;
  assert.ok(rec.refs.length >= 16, `blocks handed on: ${rec.refs.length}`);
  // The last block is still known to the follower (the reorg check), nothing older.
  assert.ok(alive <= 2, `${alive} of ${rec.refs.length} handed blocks still held after a full GC`);
});
