/** One admitted JSON-RPC call, as usage (C21, C27): recorded off the hot path. */
export interface UsageEvent {
  userId: string;
  keyId: string;
  network: string;
  method: string;
  computeUnits: number;
}

/** Where the proxy reports usage; `record` must be cheap and never wait on storage. */
export interface UsageSink {
  record(event: UsageEvent): void;
}
