// The Node.js runtime settings a gateway process runs with (C56; bench/README.md "V8's helper threads").

/**
 * V8's pool of helper threads (parallel scavenges, concurrent marking and sweeping, background
 * compilation) held to one thread. Node's default is four whatever the cores: on a machine where
 * the gateway shares its cores (with its node, its database, other workers: WORKERS=auto runs one
 * process per core), a parallel scavenge split over five threads waits for helpers that have no
 * core. One helper keeps marking and sweeping off the main thread. Against the default, with as
 * many scavenges: shorter scavenge pauses and a p99 at a fixed rate of 0.66-0.83x (embedded) and
 * 0.69-0.82x (PostgreSQL + Redis); the CPU per request within the bench's spread.
 * `npm start` and the image pass it; the primary passes it on to its workers.
 */
export const V8_POOL_FLAG = '--v8-pool-size=1';

/** A worker's Node.js options: the primary's own, and the pool size unless one was given (the operator's wins). */
export function workerExecArgv(own: readonly string[]): string[] {
  return own.some((a) => a.startsWith('--v8-pool-size')) ? [...own] : [...own, V8_POOL_FLAG];
}
