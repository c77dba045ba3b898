import type { Logger } from 'pino';
import type { NetworkRegistry } from '../chains/registry.ts';
import type { Config } from '../config/schema.ts';
import type { UpstreamPools } from '../rpc-proxy/pools.ts';
import type { Db } from '../storage/db.ts';

/** The testnet faucet (C28–C30). TO BE BUILT. */
export class FaucetService {
  constructor(_deps: { db: Db; config: Config; registry: NetworkRegistry; pools: UpstreamPools; logger: Logger }) {}
  /** Resumes grants recorded but not confirmed before a restart. */
  async start(): Promise<void> {}
  async close(): Promise<void> {}
}
