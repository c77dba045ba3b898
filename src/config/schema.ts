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

const Upstream = T.Object(
  {
    http: T.String({ format: 'uri', pattern: '^https?://' }),
    ws: T.Optional(T.String({ format: 'uri', pattern: '^wss?://' })),
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
        issuer: T.String({ minLength: 1 }),
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
        standard: T.Array(T.String({ pattern: '^(eth|net|web3)_[A-Za-z0-9]+$' })),
        native: T.Record(T.String({ pattern: '^nat_[A-Za-z0-9]+$' }), T.String({ minLength: 1 })),
        // C24: methods refused by default that a plan may call, exact or as a `prefix_*` pattern.
        planExtras: T.Object(
          {
            free: T.Array(T.String({ pattern: '^[a-zA-Z0-9]+_(\\*|[A-Za-z0-9]+)$' })),
            pro: T.Array(T.String({ pattern: '^[a-zA-Z0-9]+_(\\*|[A-Za-z0-9]+)$' })),
            max: T.Array(T.String({ pattern: '^[a-zA-Z0-9]+_(\\*|[A-Za-z0-9]+)$' })),
            enterprise: T.Array(T.String({ pattern: '^[a-zA-Z0-9]+_(\\*|[A-Za-z0-9]+)$' })),
          },
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
        keyCacheTtlMs: T.Integer({ minimum: 0 }), // milliseconds a key lookup is cached (changes invalidate at once)
        accessLog: T.Boolean(), // log every RPC request at info (off: only failures)
        corsOrigins: T.Array(T.String()), // allowed browser origins on the RPC paths; "*" for any
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
    networks: T.Array(Network, { minItems: 1 }),
  },
  { additionalProperties: false },
);

export type Config = Static<typeof ConfigSchema>;
export type NetworkConfig = Static<typeof Network>;
export type PlanLimits = Static<typeof Plan>;
export type Tier = keyof Config['plans'];
export const TIERS = ['free', 'pro', 'max', 'enterprise'] as const satisfies readonly Tier[];
