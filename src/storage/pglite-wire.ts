// The messages between the gateway's thread and embedded storage's worker (pglite-remote.ts,
// pglite-worker.ts). Types only.

export interface PgliteWorkerData {
  /** A data folder on disk, already created (db.ts `initInWorker`); absent: in memory. */
  dir?: string;
  /** In memory: the image to start from (`migratedPgliteImage()`). */
  image?: ArrayBuffer;
  startParams: string[];
  /** PGlite's WebAssembly, compiled once per process (a compiled module is shared with workers, not copied). */
  wasmModule?: WebAssembly.Module;
  /** PGlite's file bundle (share/, lib/), read once per process. */
  fsBundle?: Blob;
}

/** PGlite's options for the module and bundle the gateway's thread handed over, when it did (both worker threads start PGlite from them). */
export function sharedPgliteOptions(data: PgliteWorkerData): { pgliteWasmModule?: WebAssembly.Module; fsBundle?: Blob } {
  return { ...(data.wasmModule ? { pgliteWasmModule: data.wasmModule } : {}), ...(data.fsBundle ? { fsBundle: data.fsBundle } : {}) };
}

export type PgliteRequest =
  | { op: 'query'; id: number; sql: string; params?: unknown[]; rowMode?: 'array' | 'object'; keepText?: number[] }
  | { op: 'exec'; id: number; sql: string }
  | { op: 'close' };

/** An error as posted: its class name (informative only), message and own string/number fields (SQLSTATE `code`, `constraint`, `detail`...). */
export interface WireError {
  message: string;
  className: string;
  name?: string;
  fields: Record<string, string | number>;
}

/** Id 0 answers the start (schema up to date, or why not). */
export type PgliteResponse = { id: number; ok: true; result: unknown } | { id: number; ok: false; error: WireError };
