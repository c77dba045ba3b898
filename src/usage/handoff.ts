// Usage of the workers of one gateway (WORKERS; docs/scaling.md "Workers"), over the cluster's IPC
// channel: each worker hands what it records to the primary (service.ts `UsageHandoff`), the
// primary writes all of it in its own flushes and tells the workers which accounts were stored
// (their answer caches, C46; one of them checks usage.quota, C38).
import type { IpcChannel } from '../storage/ipc.ts';
import type { UsageBatch, UsageHandoff, UsageService } from './service.ts';

/** A worker's side: batches are notes (no answer awaited: the channel keeps their order). */
export class IpcUsageHandoff implements UsageHandoff {
  readonly #channel: IpcChannel;

  constructor(channel: IpcChannel) {
    this.#channel = channel;
  }

  send(batch: UsageBatch): void {
    this.#channel.note('usage.batch', batch);
  }

  onStored(listener: (userIds: ReadonlySet<string>, checkQuota: boolean) => void): void {
    this.#channel.onNote('usage.stored', (body) => {
      const { userIds, checkQuota } = body as { userIds: string[]; checkQuota: boolean };
      listener(new Set(userIds), checkQuota);
    });
  }
}

/** The primary's side: a worker's batches join the primary's usage, written at its next flush. */
export function serveUsageHandoff(channel: IpcChannel, usage: UsageService): void {
  channel.onNote('usage.batch', (body) => usage.absorb(body as UsageBatch));
  // Answered once every batch sent before it was taken (one ordered channel): a stopping worker's last word.
  channel.handle('usage.taken', () => null);
}
