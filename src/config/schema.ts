import { type Static, Type as T } from '@sinclair/typebox';

/** A limit that may be absent: `null` means unlimited. */
const Limit = T.Union([T.Integer({ minimum: 1 }), T.Null()]);

const Plan = T.Object(
  {
    requestsPerMinute: Limit, // requests per sliding 60 s (C12)
    dailyLimit: Limit, // requests per UTC day (C11)
    monthlyComputeUnits: Limit, // compute units per UTC month (C10)
    maxKeys: Limit, // API keys per account (C15)
    maxNetworks: Limit, // distinct networks over all of an account's keys (C16); null = all
  },
  { additionalProperties: false },
);

const WsPlan = T.Object(
  {
    connectionsPerKey: Limit, // WebSocket connections open at once per API key, per instance
    subscriptionsPerConnection: Limit, // eth_subscribe subscriptions alive at once per connection
  },
  { additionalProperties: false },
);

// Method names are exact (no patterns). Names that need an account held by the node can never
// be listed (C24; the policy refuses them as well).
const StandardMethod = T.String({
  pattern: '^(?!eth_(accounts|sign|signTransaction|signTypedData|sendTransaction|sendTransactionSync|sendUnsignedTransaction)$)(eth|net|web3)_[A-Za-z0-9]+$',
});
const ExtraMethod = T.String({ pattern: '^(debug|trace|txpool)_[A-Za-z0-9]+$' });

const Upstream = T.Object(
  {
    http: T.String({ format: 'uri', pattern: '^https?://' }),
    ws: T.Optional(T.String({ format: 'uri', pattern: '^wss?://' })),
  },
  { additionalProperties: false },
);

// C28-C30: a decimal string in whole native units ("1", "0.5"); a faucet key is 32 bytes of hex.
const FaucetAmount = T.String({ pattern: '^[0-9]+(\\.[0-9]+)?$' });
const FaucetKey = T.String({ pattern: '^0x[0-9a-fA-F]{64}$' });

const FaucetNetwork = T.Object(
  {
    enabled: T.Optional(T.Boolean()), // false: no faucet on this testnet, even with faucet.privateKey
    privateKey: T.Optional(T.Union([FaucetKey, T.Null()])), // secret: prefer env FAUCET_PRIVATE_KEY_<SLUG>
    defaultAmount: T.Optional(FaucetAmount), // whole native units; overrides faucet.defaultAmount
    maxAmount: T.Optional(FaucetAmount), // whole native units; overrides faucet.maxAmount
    gasLimit: T.Optional(T.Integer({ minimum: 21000 })), // gas units per grant; overrides faucet.gasLimit
  },
  { additionalProperties: false },
);

const Network = T.Object(
  {
    slug: T.String({ pattern: '^[a-z0-9]+(-[a-z0-9]+)*$' }),
    name: T.String({ minLength: 1 }),
    chainId: T.Integer({ minimum: 1 }),
    type: T.Union([T.Literal('mainnet'), T.Literal('testnet')]),
    native: T.Optional(T.Boolean()),
    currency: T.Object(
      { name: T.String(), symbol: T.String(), decimals: T.Integer({ minimum: 0, maximum: 36 }) },
      { additionalProperties: false },
    ),
    explorerUrl: T.String({ format: 'uri' }),
    upstreams: T.Array(Upstream),
  },
  { additionalProperties: false },
);

export const ConfigSchema = T.Object(
  {
    server: T.Object(
      {
        port: T.Integer({ minimum: 0, maximum: 65535 }),
        host: T.String({ minLength: 1 }),
        publicUrl: T.Union([T.String({ pattern: '^https?://' }), T.Null()]), // null: http://localhost:$PORT (C2)
        bodyLimitBytes: T.Integer({ minimum: 1024 }), // bytes; 1 MiB by default (C23)
        trustedProxies: T.Array(T.String()), // addresses or CIDRs whose X-Forwarded-For is believed
        shutdownGraceMs: T.Integer({ minimum: 0 }), // milliseconds a graceful stop may take
        // Slow clients (src/http/server-timeouts.ts): milliseconds; 0 turns one off.
        headersTimeoutMs: T.Integer({ minimum: 0 }), // a request's headers must arrive within 10 s
        requestTimeoutMs: T.Integer({ minimum: 0 }), // its headers and body within 30 s
        keepAliveTimeoutMs: T.Integer({ minimum: 0 }), // an idle keep-alive connection closes after 65 s
      },
      { additionalProperties: false },
    ),
    storage: T.Object(
      {
        databaseUrl: T.Union([T.String({ pattern: '^postgres(ql)?://' }), T.Null()]), // null: embedded PGlite
        dataDir: T.String({ minLength: 1 }),
      },
      { additionalProperties: false },
    ),
    redis: T.Object({ url: T.Union([T.String({ pattern: '^rediss?://' }), T.Null()]) }, { additionalProperties: false }),
    auth: T.Object(
      {
        jwtSecret: T.Union([T.String({ minLength: 32 }), T.Null()]),
        accessTokenTtlSeconds: T.Integer({ minimum: 1 }), // seconds; 900 = 15 min (C5)
        refreshTokenTtlSeconds: T.Integer({ minimum: 1 }), // seconds; 2592000 = 30 days (C5)
        passwordHashCost: T.Integer({ minimum: 10, maximum: 15 }), // log2 of scrypt's N for new password hashes; 15 (C5), lower only for tests
        issuer: T.String({ minLength: 1 }),
        maxConcurrentHashes: T.Union([T.Integer({ minimum: 1 }), T.Null()]), // password hashes at once per process; null: cores, at most 3
        hashWaitMs: T.Integer({ minimum: 1 }), // milliseconds a request waits for a hash slot before 503
      },
      { additionalProperties: false },
    ),
    keys: T.Object(
      {
        encryptionSecret: T.Union([T.String({ minLength: 32 }), T.Null()]),
        prefix: T.String({ pattern: '^[a-z0-9_]{2,16}$' }),
      },
      { additionalProperties: false },
    ),
    admin: T.Object({ token: T.Union([T.String({ minLength: 16 }), T.Null()]) }, { additionalProperties: false }),
    logLevel: T.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => T.Literal(l))),
    plans: T.Object(
      { free: Plan, pro: Plan, max: Plan, enterprise: Plan },
      { additionalProperties: false },
    ),
    methods: T.Object(
      {
        // C24: the exact, case-sensitive allowlist of standard methods, for every plan and network.
        standard: T.Array(StandardMethod),
        native: T.Record(T.String({ pattern: '^nat_[A-Za-z0-9]+$' }), T.String({ minLength: 1 })),
        // C24: debug_*, trace_*, txpool_* methods a plan may call besides, each by its exact name.
        planExtras: T.Object(
          { free: T.Array(ExtraMethod), pro: T.Array(ExtraMethod), max: T.Array(ExtraMethod), enterprise: T.Array(ExtraMethod) },
          { additionalProperties: false },
        ),
        computeUnits: T.Record(T.String(), T.Integer({ minimum: 0 })),
      },
      { additionalProperties: false },
    ),
    limits: T.Object(
      {
        publicRpcPerMinute: T.Integer({ minimum: 1 }), // requests per sliding minute per client IP on /public (C18)
        restPerMinute: T.Integer({ minimum: 1 }), // REST requests per sliding minute per account, or per IP unsigned (C17)
        failedLoginsPerMinute: T.Integer({ minimum: 1 }), // failed logins per minute per (client IP, e-mail) (C17)
        failedAuthPerMinute: T.Integer({ minimum: 1 }), // failed bearer authentications (401) per sliding minute per client IP (C17)
        registrationsPerHour: T.Integer({ minimum: 1 }), // registrations per hour per client IP (C17)
      },
      { additionalProperties: false },
    ),
    usage: T.Object(
      { flushIntervalMs: T.Integer({ minimum: 100, maximum: 2000 }) }, // ms between usage flushes to storage (C27: visible within 5 s)
      { additionalProperties: false },
    ),
    rpc: T.Object(
      {
        maxBatchSize: T.Integer({ minimum: 1, maximum: 10000 }), // items per JSON-RPC batch (C23)
        requestTimeoutMs: T.Integer({ minimum: 1 }), // milliseconds per upstream attempt
        totalTimeoutMs: T.Integer({ minimum: 1 }), // milliseconds per call, failover included
        methodTimeoutsMs: T.Record(T.String(), T.Integer({ minimum: 1 })), // milliseconds per attempt, by method
        maxLagBlocks: T.Integer({ minimum: 0 }), // blocks behind the best head before an upstream is skipped (C26)
        healthIntervalMs: T.Integer({ minimum: 100 }), // milliseconds between upstream health probes
        connectionsPerUpstream: T.Integer({ minimum: 1 }), // kept-alive connections per upstream
        maxResponseBytes: T.Integer({ minimum: 1024 }), // bytes an upstream answer may have; past it the call is -32000
        keyCacheTtlMs: T.Integer({ minimum: 0 }), // milliseconds a key lookup is cached (changes invalidate at once)
        accessLog: T.Boolean(), // log every RPC request at info (off: only failures)
        corsOrigins: T.Array(T.String()), // allowed browser origins on the RPC paths; "*" for any
      },
      { additionalProperties: false },
    ),
    ws: T.Object(
      {
        maxPayloadBytes: T.Integer({ minimum: 1024 }), // bytes per incoming message; 1 MiB = the HTTP body limit (C23)
        pingIntervalMs: T.Integer({ minimum: 50 }), // milliseconds between pings to each client and each upstream node
        idleTimeoutMs: T.Integer({ minimum: 50 }), // milliseconds without a pong before a client (or upstream socket) is dropped
        maxBufferedBytes: T.Integer({ minimum: 1024 }), // bytes queued for a client that does not read before it is cut off
        maxInFlight: T.Integer({ minimum: 1 }), // messages of one connection handled at once; past it the connection is not read
        upstreamTimeoutMs: T.Integer({ minimum: 1 }), // milliseconds for an upstream node to connect or answer eth_subscribe
        reconnectMinMs: T.Integer({ minimum: 1 }), // milliseconds before the first reconnection to an upstream node
        reconnectMaxMs: T.Integer({ minimum: 1 }), // milliseconds, the longest wait between reconnections (doubling)
        closeGraceMs: T.Integer({ minimum: 0 }), // milliseconds clients get to answer the 1001 close on a graceful stop
        // Per plan: open connections per API key (per instance) and subscriptions per connection; null = unlimited.
        plans: T.Object(
          { free: WsPlan, pro: WsPlan, max: WsPlan, enterprise: WsPlan },
          { additionalProperties: false },
        ),
      },
      { additionalProperties: false },
    ),
    // C44: answers that cannot change are served from memory; identical concurrent reads share one call.
    cache: T.Object(
      {
        enabled: T.Boolean(), // false: nothing cached nor coalesced, every call goes to a node
        maxBytesPerNetwork: T.Integer({ minimum: 0 }), // characters (key + result text) per network's LRU; 33554432 = 32 MiB
        safeDepth: T.Integer({ minimum: 0 }), // blocks below the head from which a block's answers are cached
      },
      { additionalProperties: false },
    ),
    devnet: T.Object(
      {
        enabled: T.Boolean(),
        nativeBlockTimeSeconds: T.Integer({ minimum: 1, maximum: 2 }), // seconds between blocks on the native networks (C31)
      },
      { additionalProperties: false },
    ),
    faucet: T.Object(
      {
        privateKey: T.Union([FaucetKey, T.Null()]), // secret, every testnet: prefer env FAUCET_PRIVATE_KEY; null = none
        cooldownSeconds: T.Integer({ minimum: 0 }), // seconds between grants per (network, address) and per (network, account) (C29)
        recheckIntervalSeconds: T.Integer({ minimum: 1 }), // seconds between checks of grants not yet mined (re-send pending or dropped ones)
        recheckAfterSeconds: T.Integer({ minimum: 0 }), // seconds a grant is left alone after it was recorded or sent, before it is checked
        defaultAmount: FaucetAmount, // whole native units granted when a request names none (C28)
        maxAmount: FaucetAmount, // whole native units, the most one request may ask for (C28)
        gasLimit: T.Integer({ minimum: 21000 }), // gas units per grant (a plain transfer: 21000)
        networks: T.Record(T.String(), FaucetNetwork), // per testnet slug
      },
      { additionalProperties: false },
    ),
    networks: T.Array(Network, { minItems: 1 }),
  },
  { additionalProperties: false },
);

export type Config = Static<typeof ConfigSchema>;
export type NetworkConfig = Static<typeof Network>;
export type PlanLimits = Static<typeof Plan>;
export type Tier = keyof Config['plans'];
export const TIERS = ['free', 'pro', 'max', 'enterprise'] as const satisfies readonly Tier[];
