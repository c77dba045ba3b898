import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { NetworkRegistry } from '../../chains/registry.ts';
import type { Config } from '../../config/schema.ts';
import type { KeyCache } from '../../keys/cache.ts';
import type { Meter } from '../../metering/meter.ts';
import type { UpstreamPools } from '../pools.ts';
import type { RpcProxy } from '../proxy.ts';

export interface WsDeps {
  config: Config;
  registry: NetworkRegistry;
  proxy: RpcProxy;
  keys: KeyCache;
  meter: Meter;
  pools: UpstreamPools;
  logger: Logger;
}

/**
 * JSON-RPC over WebSocket at `/ws` and `/ws/{network}` (C1), with shared `eth_subscribe`
 * subscriptions. TO BE BUILT: attaches to `app.server`'s upgrade event.
 */
export function installWebSocket(_app: FastifyInstance, _deps: WsDeps): void {}
