// In-process limits shared by the workers of one gateway (C56; docs/scaling.md "Workers"): the
// counters live in the primary's MemoryLimiter, and each worker's consume, refund and seed go there
// over the cluster's IPC channel. A key limited to 10 a minute gets 10 in all, whichever workers
// its calls land on (C12: all checks consumed together or none, decided in one place, without
// awaiting in between). Without REDIS_URL these are the limits; with it, they are where the
// workers' limits go while Redis is away (C48), so that one machine admits a key its limit once,
// not once per worker.
import type { IpcChannel } from '../storage/ipc.ts';
import { type Check, type ConsumeResult, type CounterSeed, type Limiter, MemoryLimiter } from './limiter.ts';
import type { Fallback } from './redis-limiter.ts';

/** A worker's limiter: the primary's MemoryLimiter, one IPC round trip per consume. */
export class SharedLimiter implements Limiter, Fallback {
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

  seedWindow(key: string, at: readonly number[]): void {
    this.#tell('limits.seedWindow', { key, at });
  }

  away(): void {
    this.#tell('limits.away', null);
  }

  back(): void {
    this.#tell('limits.back', null);
  }

  /** The sweep of idle keys runs in the primary. */
  start(): void {}

  async close(): Promise<void> {}

  /** Notes in order with the calls; with the primary gone this worker is stopping and nothing is owed to it. */
  #tell(topic: string, body: unknown): void {
    if (!this.#channel.closed) this.#channel.note(topic, body);
  }
}

/**
 * The primary's side: one MemoryLimiter for every worker. While any worker says Redis is away for
 * it (C48), what the workers admitted in memory stays; once the last says Redis answers again (or
 * it exits) memory starts afresh for the next outage, as one process' fallback does.
 */
export class SharedLimits {
  #memory = new MemoryLimiter();
  readonly #away = new Set<IpcChannel>();

  /** Answers one worker's limiter calls; `gone` when that worker exits. */
  serve(channel: IpcChannel): void {
    channel.handle('limits.consume', (checks) => this.#memory.consumeSync(checks as Check[]));
    channel.handle('limits.refund', (checks) => this.#memory.refund(checks as Check[]));
    channel.handle('limits.seed', (counters) => this.#memory.seed(counters as CounterSeed[]));
    channel.onNote('limits.seedWindow', (body) => {
      const { key, at } = body as { key: string; at: number[] };
      this.#memory.seedWindow(key, at);
    });
    channel.onNote('limits.away', () => this.#away.add(channel));
    channel.onNote('limits.back', () => this.gone(channel));
  }

  /** The worker of `channel` uses Redis again, or exited. */
  gone(channel: IpcChannel): void {
    if (!this.#away.delete(channel) || this.#away.size > 0) return;
    void this.#memory.close();
    this.#memory = new MemoryLimiter();
    this.#memory.start();
  }

  /** How many workers count on memory now (tests, logs). */
  get away(): number {
    return this.#away.size;
  }

  start(): void {
    this.#memory.start();
  }

  close(): Promise<void> {
    return this.#memory.close();
  }
}
