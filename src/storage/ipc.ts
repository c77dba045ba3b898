// Calls and notes between the processes of one gateway (WORKERS, docs/scaling.md "Workers"): a
// worker and the primary that owns the embedded store and the in-process limits talk over the
// IPC channel Node's cluster gives every worker. Knows no topic: the store, the limiter, usage
// and key changes each register their own.

import { IpcClosedError } from '../errors/storage.ts';

/** One end of a process's IPC channel: `process` in a worker, a `cluster.Worker` in the primary. */
export interface IpcEndpoint {
  send(message: unknown, callback?: (err: Error | null) => void): boolean;
  on(event: 'message', listener: (message: unknown) => void): unknown;
  on(event: 'disconnect', listener: () => void): unknown;
}

type Wire =
  | { junction: 'call'; id: number; topic: string; body: unknown }
  | { junction: 'answer'; id: number; ok: true; body: unknown }
  | { junction: 'answer'; id: number; ok: false; error: { message: string; name: string; fields: Record<string, string | number> } }
  | { junction: 'note'; topic: string; body: unknown };

/** What crosses the pipe: the messages of one event-loop turn, in the order they were sent. */
interface Batch {
  junction: 'batch';
  list: Wire[];
}

/**
 * Request/answer and one-way messages over one IPC channel. Messages arrive in the order sent
 * (one pipe), so a call made after a note is answered after that note was handled: the stop
 * relies on it (the last usage batch, then a call that answers once it was taken). The channel
 * must be set up with `serialization: 'advanced'` (cluster.setupPrimary): rows carry Dates and
 * Uint8Arrays, limits carry numbers that must stay numbers.
 */
export class IpcChannel {
  readonly #end: IpcEndpoint;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  readonly #handlers = new Map<string, (body: unknown) => unknown>();
  readonly #notes = new Map<string, (body: unknown) => void>();
  #nextId = 1;
  #closed: Error | null = null;
  /** Messages sent in this turn of the event loop, with their callbacks: they leave together. */
  #outbox: Wire[] = [];
  #callbacks: Array<((err: Error | null) => void) | undefined> = [];

  constructor(end: IpcEndpoint) {
    this.#end = end;
    end.on('message', (m) => this.#receive(m));
    end.on('disconnect', () => this.close(new IpcClosedError('the other process is gone')));
  }

  /** Answers calls of `topic` with what `handler` returns (or throws). */
  handle(topic: string, handler: (body: unknown) => unknown): void {
    this.#handlers.set(topic, handler);
  }

  /** Receives the notes of `topic`. */
  onNote(topic: string, listener: (body: unknown) => void): void {
    this.#notes.set(topic, listener);
  }

  /** Asks the other process; rejects when it answers with an error or goes away first. */
  call<T>(topic: string, body: unknown): Promise<T> {
    if (this.#closed) return Promise.reject(this.#closed);
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.#send({ junction: 'call', id, topic, body }, (err) => {
        if (!err) return;
        this.#pending.delete(id);
        reject(new IpcClosedError(`could not reach the other process: ${err.message}`));
      });
    });
  }

  /** Tells the other process without waiting for anything; throws when the channel is closed. */
  note(topic: string, body: unknown): void {
    if (this.#closed) throw this.#closed;
    this.#send({ junction: 'note', topic, body });
    // Leaves now, with what waits before it: a note can be what must be out before an answer is
    // written (a worker's usage, handed over before the answers of its calls, C56).
    this.#flush();
  }

  get closed(): boolean {
    return this.#closed !== null;
  }

  /** Fails every call still waiting (the other process died); later calls fail at once. */
  close(reason: Error = new IpcClosedError('the channel is closed')): void {
    this.#closed ??= reason;
    for (const p of this.#pending.values()) p.reject(this.#closed);
    this.#pending.clear();
  }

  /**
   * Queues `message` to leave with the others of this event-loop turn. Each message sent over the
   * pipe costs both processes a serialization, a write, a read and a 'message' event: under load a
   * worker asks the limiter once per call, so a turn's calls (and the primary's answers to them)
   * go as one message. Order is kept: the queue is the order of sending.
   */
  #send(message: Wire, callback?: (err: Error | null) => void): void {
    this.#outbox.push(message);
    this.#callbacks.push(callback);
    if (this.#outbox.length === 1) setImmediate(this.#flush);
  }

  readonly #flush = (): void => {
    const list = this.#outbox;
    const callbacks = this.#callbacks;
    this.#outbox = [];
    this.#callbacks = [];
    if (list.length === 0) return;
    const done = (err: Error | null) => {
      for (const cb of callbacks) cb?.(err);
    };
    try {
      this.#end.send(list.length === 1 ? list[0] : ({ junction: 'batch', list } satisfies Batch), (err) => done(err ?? null));
    } catch (err) {
      // A channel closed under us (the process is exiting): as a failed send of each message.
      done(err as Error);
    }
  };

  #receive(raw: unknown): void {
    if (typeof raw !== 'object' || raw === null || !('junction' in raw)) return;
    if ((raw as Batch).junction === 'batch') {
      for (const m of (raw as Batch).list) this.#receive(m);
      return;
    }
    const m = raw as Wire;
    if (m.junction === 'answer') {
      const p = this.#pending.get(m.id);
      if (!p) return;
      this.#pending.delete(m.id);
      if (m.ok) p.resolve(m.body);
      else p.reject(Object.assign(new Error(m.error.message), m.error.fields, { name: m.error.name }));
    } else if (m.junction === 'note') {
      this.#notes.get(m.topic)?.(m.body);
    } else if (m.junction === 'call') {
      const handler = this.#handlers.get(m.topic);
      // A send that fails (the caller is gone) fails nothing here: nobody waits for this answer.
      const answer = (a: Wire) => {
        if (!this.#closed) this.#send(a);
      };
      let result: unknown;
      try {
        if (!handler) throw new Error(`no handler for ${m.topic}`);
        result = handler(m.body);
      } catch (err) {
        answer({ junction: 'answer', id: m.id, ok: false, error: wire(err) });
        return;
      }
      Promise.resolve(result).then(
        (body) => answer({ junction: 'answer', id: m.id, ok: true, body }),
        (err: unknown) => answer({ junction: 'answer', id: m.id, ok: false, error: wire(err) }),
      );
    }
  }
}

/** An error as sent: its message, name and own string/number fields (a SQLSTATE `code`, a `constraint`). */
function wire(err: unknown): { message: string; name: string; fields: Record<string, string | number> } {
  if (!(err instanceof Error)) return { message: String(err), name: 'Error', fields: {} };
  const fields: Record<string, string | number> = {};
  for (const [k, v] of Object.entries(err)) if (typeof v === 'string' || typeof v === 'number') fields[k] = v;
  return { message: err.message, name: err.name, fields };
}
