// C33, C48: the block follower asks its consumers for their networks every refresh interval. A
// consumer that keeps failing other than on storage (a read that times out at each asking, a bug)
// is warned about once per streak, then at debug level, and one info line says when it answers
// again; a storage outage is said once for all consumers (test/storage/jobs-outage.test.ts).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Logger } from 'pino';
import { BlockFollower } from '../../src/events/follower.ts';
import type { Db } from '../../src/storage/db.ts';
import type { Upstreams } from '../../src/upstreams/upstreams.ts';
import { waitFor } from '../support/wait.ts';

function recordingLogger(): { lines: Array<{ level: string; msg: string; consumer?: string }>; logger: Logger } {
  const lines: Array<{ level: string; msg: string; consumer?: string }> = [];
  const at =
    (level: string) =>
    (obj: { consumer?: string }, msg: string): void =>
      void lines.push({ level, msg, consumer: obj.consumer });
  const logger = { warn: at('warn'), info: at('info'), debug: at('debug'), error: at('error') } as Record<string, unknown>;
  logger.child = () => logger;
  return { lines, logger: logger as unknown as Logger };
}

describe('the follower asking its consumers for their networks', () => {
  test('a consumer failing at 20 askings in a row: one warning, debug lines after, one info line when it answers again', async () => {
    const { lines, logger } = recordingLogger();
    // No network is ever wanted here, so neither storage nor a node is touched.
    const follower = new BlockFollower({
      db: {} as Db,
      settings: { events: { confirmations: 1, maxCatchUpBlocks: 10, batchBlocks: 10, leaseSeconds: 2, pollIntervalMs: 100 }, networks: [] },
      upstreams: {} as Upstreams,
      logger,
      refreshIntervalMs: 5,
    });
    let asked = 0;
    let failing = true;
    const broken = {
      name: 'broken',
      networks: (): string[] => {
        asked++;
        if (failing) throw new Error('networks() took more than 5000 ms');
        return [];
      },
      onBlock: async () => {},
    };
    const fine = { name: 'fine', networks: (): string[] => [], onBlock: async () => {} };
    follower.register(broken);
    follower.register(fine);
    follower.start();
    try {
      await waitFor(() => asked >= 20, { what: '20 askings' });
      failing = false;
      await waitFor(() => lines.some((l) => l.msg.includes('says its networks again')), { what: 'the recovery line' });
      const failedAt = asked;
      await waitFor(() => asked >= failedAt + 5, { what: '5 more askings' });
    } finally {
      await follower.close();
    }
    const warnings = lines.filter((l) => l.level === 'warn');
    assert.deepEqual(warnings.map((l) => [l.consumer, l.msg]), [['broken', 'follower: a consumer could not say its networks; its last answer is kept']]);
    assert.ok(lines.filter((l) => l.level === 'debug' && l.consumer === 'broken').length >= 10, 'later failures at debug level');
    assert.equal(lines.filter((l) => l.msg.includes('says its networks again')).length, 1);
    assert.equal(lines.filter((l) => l.consumer === 'fine').length, 0, 'a consumer that answers is not logged');
  });
});
