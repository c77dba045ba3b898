// In-process limits shared by the workers of one gateway (WORKERS without REDIS_URL; docs/scaling.md
// "Workers"): the counters live in the primary's MemoryLimiter, and each worker's consume, refund
// and seed go there over the cluster's IPC channel. A key limited to 10 a minute gets 10 in all,
// whichever workers its calls land on (C12: all checks consumed together or none, decided in one
// place, without awaiting in between).
import type { IpcChannel } from '../storage/ipc.ts';
import type { Check, ConsumeResult, CounterSeed, Limiter, MemoryLimiter } from './limiter.ts';

/** A worker's limiter: the primary's MemoryLimiter, one IPC round trip per consume. */
export class SharedLimiter implements Limiter {
  readonly #channel: IpcChannel;

  constructor(channel: IpcChannel) {
    this.#channel = channel;
  }

  consume(checks: readonly Check[]): Promise<ConsumeResult> {
    return this.#channel.call<ConsumeResult>('limits.consume', checks);
  }

  async refund(checks: readonly Check[]): Promise<void> {
    await this.#channel.call('limits.refund', checks);
  }

  async seed(counters: readonly CounterSeed[]): Promise<void> {
    await this.#channel.call('limits.seed', counters);
  }

  /** The sweep of idle keys runs in the primary. */
  start(): void {}

  async close(): Promise<void> {}
}

/** The primary's side: answers one worker's limiter calls from `limiter`, the one all workers share. */
export function serveSharedLimiter(channel: IpcChannel, limiter: MemoryLimiter): void {
  channel.handle('limits.consume', (checks) => limiter.consumeSync(checks as Check[]));
  channel.handle('limits.refund', (checks) => limiter.refund(checks as Check[]));
  channel.handle('limits.seed', (counters) => limiter.seed(counters as CounterSeed[]));
}
