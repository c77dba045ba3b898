// Every setting has a `description`: docs/config-reference.md is generated from them
// (`npm run docs:config`, src/config/reference.ts). `allowed` says in words what a pattern
// admits; start errors and the reference show it instead of the pattern.
import { type Static, type TSchema, Type as T } from '@sinclair/typebox';
import { Address, Amount, ExtraMethod, FaucetKey, FaucetNetwork, Limit, Network, Plan, type PriceSource, StandardMethod, type Token, WsPlan } from './schema-parts.ts';

const Tiers = <S extends TSchema>(s: () => S, description: string) =>
  T.Object({ free: s(), pro: s(), max: s(), enterprise: s() }, { additionalProperties: false, description });

export const ConfigSchema = T.Object(
  {
    server: T.Object(
      {
        port: T.Integer({ minimum: 0, maximum: 65535, description: 'listen port; 0 = any free port' }),
        host: T.String({ minLength: 1, description: 'listen address; 127.0.0.1 under --devnet' }), // C59
        publicUrl: T.Union([T.String({ format: 'uri', pattern: '^https?://', allowed: 'an http:// or https:// URL' }), T.Null()], {
          description: 'the address users see in rpcUrl and wsUrl; null: http://localhost:$PORT', // C2
        }),
        bodyLimitBytes: T.Integer({ minimum: 1024, description: 'bytes a request body may have; 1 MiB by default' }), // C23
        trustedProxies: T.Array(T.String(), { description: 'addresses or CIDRs whose X-Forwarded-For is believed' }),
        shutdownGraceMs: T.Integer({ minimum: 0, description: 'milliseconds a graceful stop may take' }),
        // C56: processes on one port (src/cluster/, docs/scaling.md "Workers").
        workers: T.Union([T.Integer({ minimum: 1, maximum: 1024 }), T.Literal('auto')], {
          description: 'gateway processes serving the port, each a full gateway; "auto": one per core (os.availableParallelism()); 1: a single process, no primary',
          allowed: 'a whole number from 1 to 1024, or "auto"',
        }),
        workerHangMs: T.Integer({
          minimum: 1000,
          description: "with workers: milliseconds a worker's event loop may leave the primary's ping unanswered before the worker is killed and replaced (it would keep being handed connections)",
        }),
        // Slow clients (src/http/server-timeouts.ts).
        headersTimeoutMs: T.Integer({ minimum: 0, description: "milliseconds for a request's headers to arrive; 0 = off" }),
        requestTimeoutMs: T.Integer({ minimum: 0, description: 'milliseconds for headers and body to arrive; 0 = off' }),
        keepAliveTimeoutMs: T.Integer({ minimum: 0, description: 'milliseconds an idle keep-alive connection stays open; 0 = off' }),
        // C60: clients that do not read (src/http/outbound.ts).
        writeTimeoutMs: T.Integer({ minimum: 0, description: 'milliseconds for the bytes of an answer (HTTP or WebSocket) to be taken by the client; past it the connection is cut; 0 = off' }),
        maxPendingBytesPerConnection: T.Integer({ minimum: 1024, description: 'bytes an HTTP connection may hold unsent: an answer that would go past it (with bytes still unsent) cuts the connection instead; 16 MiB by default' }),
        maxPendingBytes: T.Integer({ minimum: 1024, description: 'bytes of answers in memory for the whole instance: being read from nodes, and written to HTTP and WebSocket clients but unsent; past it the connections holding the most unsent are cut, then a node\'s large answer is refused (503, retry shortly); 256 MiB by default' }),
      },
      { additionalProperties: false, description: 'the HTTP listener' },
    ),
    storage: T.Object(
      {
        databaseUrl: T.Union([T.String({ format: 'uri', pattern: '^postgres(ql)?://', allowed: 'a postgres:// or postgresql:// URL' }), T.Null()], {
          description: 'PostgreSQL; null: embedded PGlite under dataDir',
        }),
        dataDir: T.String({ minLength: 1, description: 'folder of the embedded database and generated secrets; "memory": nothing on disk' }),
        queryTimeoutMs: T.Integer({
          minimum: 100,
          description: 'PostgreSQL: milliseconds before a query the server does not answer (hung, cut off) fails, so no request waits on it longer',
        }),
        embeddedSharedBuffersMb: T.Integer({
          minimum: 1,
          maximum: 4096,
          description: "MiB of the embedded database's page cache (PostgreSQL shared_buffers), held in memory for the whole run",
        }),
      },
      { additionalProperties: false, description: 'where accounts, keys and usage are kept' },
    ),
    redis: T.Object(
      {
        url: T.Union([T.String({ format: 'uri', pattern: '^rediss?://', allowed: 'a redis:// or rediss:// URL' }), T.Null()], {
          description: 'Redis for limits and key changes shared by several instances; null: in process',
        }),
        clusterNodes: T.Union([T.Array(T.String({ pattern: '^rediss?://', allowed: 'redis:// or rediss:// URLs' }), { minItems: 1 }), T.Null()], {
          description: 'a Redis Cluster instead of url: some of its nodes as redis:// URLs (the first one gives user, password and TLS); null: none',
        }),
        commandTimeoutMs: T.Integer({
          minimum: 10,
          maximum: 60_000,
          description: 'milliseconds a call waits for Redis before its limits are enforced in memory (C48); 250',
        }), // C48
      },
      { additionalProperties: false, description: 'shared state' },
    ),
    auth: T.Object(
      {
        jwtSecret: T.Union([T.String({ minLength: 32 }), T.Null()], {
          description: 'secret signing tokens; null: generated into dataDir (embedded storage only)',
        }),
        accessTokenTtlSeconds: T.Integer({ minimum: 1, description: 'seconds an access token lives; 900 = 15 min' }), // C5
        refreshTokenTtlSeconds: T.Integer({ minimum: 1, description: 'seconds a refresh token lives; 2592000 = 30 days' }), // C5
        passwordHashCost: T.Integer({
          minimum: 10,
          maximum: 15,
          description: "log2 of scrypt's N for new password hashes; lower only for tests",
        }),
        issuer: T.String({ minLength: 1, description: 'the iss claim of tokens' }),
        maxConcurrentHashes: T.Union([T.Integer({ minimum: 1 }), T.Null()], {
          description: 'password hashes at once per process; null: the cores, at most 3',
        }),
        hashWaitMs: T.Integer({ minimum: 1, description: 'milliseconds a request waits for a hash slot before 503' }),
      },
      { additionalProperties: false, description: 'accounts and tokens' },
    ),
    keys: T.Object(
      {
        encryptionSecret: T.Union([T.String({ minLength: 32 }), T.Null()], {
          description: 'secret encrypting stored API keys; null: generated into dataDir (embedded storage only)',
        }),
        prefix: T.String({
          pattern: '^[a-z0-9_]{2,16}$',
          allowed: '2 to 16 lower-case letters, digits or "_"',
          description: 'the start of every new API key',
        }),
      },
      { additionalProperties: false, description: 'API keys' },
    ),
    admin: T.Object(
      {
        token: T.Union([T.String({ minLength: 16 }), T.Null()], {
          description: 'secret for the X-Admin-Token header of /api/v1/admin/*; null: no admin routes',
        }),
      },
      { additionalProperties: false, description: 'the admin routes' },
    ),
    logLevel: T.Union(
      ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => T.Literal(l)),
      { description: 'the lowest level logged' },
    ),
    logFormat: T.Union([T.Literal('auto'), T.Literal('json'), T.Literal('pretty')], {
      description: 'log lines as JSON (json), readable (pretty), or readable only when stdout is a terminal (auto)',
    }),
    metrics: T.Object(
      {
        token: T.Union([T.String({ minLength: 16 }), T.Null()], {
          description: 'secret GET /metrics asks for as Authorization: Bearer <token> (16+ characters); null: open',
        }),
        port: T.Union([T.Integer({ minimum: 0, maximum: 65535 }), T.Null()], {
          description: 'serve /metrics on this port only (0: any free port), not on the main one; null: on the main port',
        }),
      },
      { additionalProperties: false, description: 'the Prometheus endpoint' },
    ),
    health: T.Object(
      {
        readyWhen: T.Union([T.Literal('storage'), T.Literal('any-network'), T.Literal('every-network')], {
          description:
            '/health/ready is 200 when storage answers and: storage = nothing more; any-network = not every network known down (a network not used or not probed yet counts as able to answer); every-network = no network known down',
        }),
      },
      { additionalProperties: false, description: 'what readiness waits for (C3)' },
    ),
    plans: Tiers(() => Plan, 'limits by plan'),
    methods: T.Object(
      {
        // C24: the exact, case-sensitive allowlist of standard methods, for every plan and network.
        // C53: absent from config/default.json; loadConfig fills in what the method catalogue passes.
        standard: T.Array(StandardMethod, { description: 'methods every key may call on every network (exact names); default: every standard method of the method catalogue (docs/rpc.md)' }),
        native: T.Record(T.String({ pattern: '^nat_[A-Za-z0-9]+$' }), T.String({ minLength: 1 }), {
          description: 'nat_* methods of the native networks and the node method each stands for',
        }),
        // C24: debug_*, trace_*, txpool_* methods a plan may call besides, each by its exact name.
        planExtras: Tiers(() => T.Array(ExtraMethod), 'debug_*, trace_*, txpool_* methods a plan may call besides (exact names)'),
        computeUnits: T.Record(T.String(), T.Integer({ minimum: 0 }), {
          description: "compute units by method for the monthly quota; a method not listed costs the method catalogue's weight for it (docs/plans.md), else `default`",
        }),
      },
      { additionalProperties: false, description: 'the JSON-RPC methods served' },
    ),
    limits: T.Object(
      {
        publicRpcPerMinute: T.Integer({ minimum: 1, description: 'requests per sliding minute per client IP on /public/main' }), // C18
        restPerMinute: T.Integer({ minimum: 1, description: 'REST requests per sliding minute per account, or per IP signed out' }), // C17
        failedLoginsPerMinute: T.Integer({ minimum: 1, description: 'failed logins per minute per (client IP, e-mail)' }), // C17
        failedAuthPerMinute: T.Integer({ minimum: 1, description: 'failed bearer authentications (401) per sliding minute per client IP' }),
        registrationsPerHour: T.Integer({ minimum: 1, description: 'registrations per hour per client IP' }), // C17
      },
      { additionalProperties: false, description: 'limits besides the plans' },
    ),
    usage: T.Object(
      {
        // C27: usage is visible within 5 s.
        flushIntervalMs: T.Integer({ minimum: 100, maximum: 2000, description: 'milliseconds between usage flushes to storage' }),
        // C48: bounds memory while the database is unreachable (rows merge: one per key, network, method and day).
        maxPendingRows: T.Integer({ minimum: 1, maximum: 10_000_000, description: 'usage rows (and as many analytics rows) held in memory while storage cannot take them; past it the oldest are dropped and counted' }),
        // For scale (docs/scaling.md): GET /usage/stats shows at most 366 days (C27) and the daily analytics keep 400 (C46).
        retentionDays: T.Integer({
          minimum: 32,
          maximum: 36_500,
          description: 'UTC days of usage rows kept (today counts as one); older rows are deleted by an hourly sweep in batches (at least 32: the month of the quotas)',
        }),
      },
      { additionalProperties: false, description: 'usage counting' },
    ),
    // C46: advanced analytics (latency, errors, refusals) recorded on the RPC path and flushed with usage.
    analytics: T.Object(
      {
        enabled: T.Boolean({ description: 'record analytics for GET /usage/analytics; false records nothing (the route then shows zeros)' }),
      },
      { additionalProperties: false, description: 'advanced analytics' },
    ),
    rpc: T.Object(
      {
        maxBatchSize: T.Integer({ minimum: 1, maximum: 10000, description: 'items per JSON-RPC batch' }), // C23
        requestTimeoutMs: T.Integer({ minimum: 1, description: 'milliseconds per upstream attempt' }),
        totalTimeoutMs: T.Integer({ minimum: 1, description: 'milliseconds per call, failover included' }),
        methodTimeoutsMs: T.Record(T.String(), T.Integer({ minimum: 1 }), { description: 'milliseconds per attempt, by method' }),
        maxLagBlocks: T.Integer({ minimum: 0, description: 'blocks behind the best head before an upstream is skipped' }), // C26
        healthIntervalMs: T.Integer({ minimum: 100, description: 'milliseconds between upstream health probes (each round up to a fifth early, at random, so the networks do not all probe at once)' }),
        connectionsPerUpstream: T.Integer({ minimum: 1, description: 'kept-alive connections per upstream' }),
        maxResponseBytes: T.Integer({ minimum: 1024, description: 'bytes an answer may have, from a node or to a client (a whole batch); past it the call is -32000 "Response too large"' }), // C60
        providerErrors: T.Array(
          T.Object(
            {
              code: T.Optional(T.Integer({ description: 'the JSON-RPC error code' })),
              message: T.Optional(T.String({ minLength: 1, description: 'text the error message contains, any letter case' })),
              kind: T.Union([T.Literal('busy'), T.Literal('missing'), T.Literal('answer')], {
                description: 'busy: throttled, the node cools down; missing: lacks the data, the node stays in use; answer: passed on as it is',
              }),
            },
            { additionalProperties: false, description: 'a code, a message fragment, or both' },
          ),
          { description: 'node errors that move a read to the next node; the first row that matches decides' },
        ),
        hedge: T.Object(
          {
            enabled: T.Boolean({ description: 'send a slow read to the next node as well; the first good answer wins' }),
            delayMs: T.Union([T.Integer({ minimum: 1 }), T.Null()], { description: "milliseconds before hedging; null: the p90 of the node's recent calls, within the bounds" }),
            minDelayMs: T.Integer({ minimum: 1, description: 'milliseconds, the shortest automatic hedge delay' }),
            maxDelayMs: T.Integer({ minimum: 1, description: 'milliseconds, the longest automatic hedge delay (also while a node has few samples)' }),
          },
          { additionalProperties: false, description: 'hedged reads; never for transactions or filters' },
        ),
        // C55: a share of the answers checked in the background against another node at the same block.
        sampling: T.Object(
          {
            rate: T.Number({ minimum: 0, maximum: 1, description: "share (0 to 1) of the answers to state reads at a block (eth_getBalance, eth_call, eth_getCode, eth_getStorageAt, eth_getTransactionCount...) checked against another node at the same block after the answer is sent; 0: off; networks[].sampling overrides it" }),
            maxInFlight: T.Integer({ minimum: 1, maximum: 64, description: 'checks under way at once per network; an answer picked beyond it is not checked' }),
            outAfter: T.Integer({ minimum: 1, description: 'disagreements within windowSeconds that take a node out of rotation (until a check finds it agreeing again)' }),
            windowSeconds: T.Integer({ minimum: 1, description: 'seconds a disagreement counts, and a node stays marked (read last) after its latest one' }),
          },
          { additionalProperties: false, description: 'answer sampling (C55), off on a network of one upstream' },
        ),
        broadcastTransactions: T.Boolean({ description: 'eth_sendRawTransaction goes to every healthy upstream at once' }),
        keyCacheTtlMs: T.Integer({ minimum: 0, description: 'milliseconds a key lookup is cached (changes invalidate it at once)' }),
        // For scale (docs/scaling.md): with a million keys, memory stays bounded; a key not cached costs one indexed lookup.
        keyCacheMaxEntries: T.Integer({ minimum: 1, maximum: 10_000_000, description: 'keys held in the in-process key cache; past it the least recently used is dropped' }),
        accessLog: T.Boolean({ description: 'log every RPC request at info (false: only failures)' }),
        corsOrigins: T.Array(T.String(), { description: 'browser origins allowed on the RPC addresses; "*" for any' }),
        // C26: wide eth_getLogs ranges are split into chunks a node accepts.
        maxLogsRange: T.Union([T.Integer({ minimum: 1 }), T.Null()], {
          description: 'blocks one eth_getLogs sent to a node may span; a wider range is split into chunks of this size and merged; null = never split',
        }),
        maxLogsResults: Limit('logs a split eth_getLogs may answer; more is -32602 naming the limit; null = no limit'),
        logsChunkConcurrency: T.Integer({ minimum: 1, maximum: 64, description: 'chunks of one split eth_getLogs sent at once' }),
        maxLogsChunks: T.Integer({ minimum: 1, description: 'chunks one eth_getLogs may be split into; a wider range is refused (-32602) before anything is sent' }),
      },
      { additionalProperties: false, description: 'JSON-RPC over HTTP' },
    ),
    ws: T.Object(
      {
        maxPayloadBytes: T.Integer({ minimum: 1024, description: 'bytes per incoming message' }), // C23
        pingIntervalMs: T.Integer({ minimum: 50, description: 'milliseconds between pings to each client and each upstream node' }),
        idleTimeoutMs: T.Integer({ minimum: 50, description: 'milliseconds without a pong before a client (or upstream socket) is dropped' }),
        maxBufferedBytes: T.Integer({ minimum: 1024, description: 'bytes queued for a client that does not read; a message past it (with bytes still queued) closes the connection with 1013 instead' }), // C60
        maxInFlight: T.Integer({ minimum: 1, description: 'messages of one connection handled at once; past it the connection is not read' }),
        upstreamTimeoutMs: T.Integer({ minimum: 1, description: 'milliseconds for an upstream node to connect or answer eth_subscribe' }),
        reconnectMinMs: T.Integer({ minimum: 1, description: 'milliseconds before the first reconnection to an upstream node' }),
        reconnectMaxMs: T.Integer({ minimum: 1, description: 'milliseconds, the longest wait between reconnections (doubling)' }),
        closeGraceMs: T.Integer({ minimum: 0, description: 'milliseconds clients get to answer the 1001 close on a graceful stop' }),
        // What a subscription missed while its upstream connection was down is sent first.
        gapFillMaxBlocks: T.Integer({ minimum: 0, description: 'blocks of newHeads and logs fetched after an upstream reconnect (the latest ones); 0 = none' }),
        plans: Tiers(() => WsPlan, 'WebSocket limits by plan'),
      },
      { additionalProperties: false, description: 'JSON-RPC over WebSocket' },
    ),
    // C44: answers that cannot change are served from memory; identical concurrent reads share one call.
    cache: T.Object(
      {
        enabled: T.Boolean({ description: 'false: nothing cached nor coalesced, every call goes to a node' }),
        maxBytesPerNetwork: T.Integer({ minimum: 0, description: "characters (key + result text) per network's cache; 33554432 = 32 MiB" }),
        safeDepth: T.Integer({ minimum: 0, description: "blocks below the head from which a block's answers are cached" }),
      },
      { additionalProperties: false, description: 'the response cache' },
    ),
    devnet: T.Object(
      {
        enabled: T.Boolean({ description: 'run on local anvil chains (same as --devnet or DEVNET=1)' }),
        nativeBlockTimeSeconds: T.Integer({ minimum: 1, maximum: 2, description: 'seconds between blocks on the native networks' }), // C31
        whaleEverySeconds: T.Integer({
          minimum: 0,
          description: "seconds between dev account 9's whale-sized transfers on each native chain; 0 = off",
        }), // C45
        nativeUsdPrice: T.Number({ minimum: 0, description: 'USD per native coin in the devnet price feed' }), // C45
        fixedUsdPrices: T.Record(T.String(), T.Number({ minimum: 0 }), {
          description: 'USD per coin by currency symbol on the other devnet mainnets',
        }), // C45
      },
      { additionalProperties: false, description: 'local chains for development' },
    ),
    faucet: T.Object(
      {
        privateKey: T.Union([FaucetKey, T.Null()], {
          description: 'secret: the wallet of every testnet; prefer env FAUCET_PRIVATE_KEY; null = no faucet',
        }),
        cooldownSeconds: T.Integer({ minimum: 0, description: 'seconds between grants per (network, address) and per (network, account)' }), // C29
        recheckIntervalSeconds: T.Integer({ minimum: 1, description: 'seconds between checks of grants not yet mined' }),
        recheckAfterSeconds: T.Integer({ minimum: 0, description: 'seconds a grant is left alone after it was sent, before it is checked' }),
        defaultAmount: Amount('whole native units granted when a request names none'), // C28
        maxAmount: Amount('whole native units, the most one request may ask for'), // C28
        gasLimit: T.Integer({ minimum: 21000, description: 'gas units per grant (a plain transfer: 21000)' }),
        networks: T.Record(T.String(), FaucetNetwork, { description: 'settings by testnet slug' }),
      },
      { additionalProperties: false, description: 'the testnet faucet' },
    ),
    // C33: the block follower.
    events: T.Object(
      {
        confirmations: T.Integer({ minimum: 0, description: 'blocks a block must be deep before it is read (1 under --devnet)' }),
        maxCatchUpBlocks: T.Integer({ minimum: 1, description: 'blocks caught up after a restart; an older gap is skipped and logged' }),
        batchBlocks: T.Integer({ minimum: 1, maximum: 1000, description: 'blocks asked in one JSON-RPC batch while catching up' }),
        leaseSeconds: T.Integer({ minimum: 2, maximum: 14, description: "seconds a follower's lease on a network lasts without renewal" }),
        pollIntervalMs: T.Integer({ minimum: 50, description: 'milliseconds between looks at the head when no new head was pushed' }),
      },
      { additionalProperties: false, description: 'the block follower feeding whale alerts and webhooks' },
    ),
    // C34: price cache and staleness.
    prices: T.Object(
      {
        cacheSeconds: T.Integer({ minimum: 0, description: 'seconds a price is reused before it is read again' }),
        maxAgeSeconds: T.Integer({ minimum: 1, description: 'seconds after which a price is stale and gives null' }),
        timeoutMs: T.Integer({ minimum: 1, description: 'milliseconds to read one price source' }),
      },
      { additionalProperties: false, description: 'USD prices' },
    ),
    // C35, C36: whale alerts.
    whaleAlerts: T.Object(
      {
        networks: T.Array(T.String(), { description: 'slugs followed for whale alerts' }),
        recordMinValue: Amount('whole native units a transfer needs to be recorded'),
        retentionDays: T.Integer({ minimum: 1, description: 'days an alert is kept' }),
      },
      { additionalProperties: false, description: 'whale alerts' },
    ),
    // C37-C39: webhooks.
    webhooks: T.Object(
      {
        allowPrivateTargets: T.Boolean({ description: 'true: loopback and private targets allowed (true under --devnet)' }),
        maxEndpoints: T.Object(
          { max: Limit('endpoints of a max account; null = unlimited'), enterprise: Limit('endpoints of an enterprise account; null = unlimited') },
          { additionalProperties: false, description: 'endpoints per account, by plan' },
        ),
        timeoutMs: T.Integer({ minimum: 1, description: 'milliseconds one delivery attempt may take' }),
        concurrency: T.Integer({ minimum: 1, description: 'attempts in flight at once per instance' }),
        pollIntervalMs: T.Integer({ minimum: 10, description: 'milliseconds between looks at the outbox when nothing woke the sender' }),
        leaseSeconds: T.Number({
          exclusiveMinimum: 0,
          description: 'seconds a claimed delivery stays with the instance that claimed it (at least timeoutMs + 1 s); past it, as after a crash, another instance sends it again with the same webhook-id',
        }),
        retryDelaysSeconds: T.Array(T.Number({ minimum: 0 }), { minItems: 1, description: 'seconds before each retry (fractions allowed: tests compress time); past the last: failed' }),
        disableAfterFailingDays: T.Integer({ minimum: 1, description: 'an endpoint failing this many days in a row is disabled' }),
        rotationOverlapSeconds: T.Integer({ minimum: 0, description: 'seconds the old secret still signs after a rotation' }),
        deliveryRetentionDays: T.Integer({ minimum: 1, description: 'days delivered and failed events are kept' }),
      },
      { additionalProperties: false, description: 'webhooks' },
    ),
    // C41, C42: cross-chain intents, their settler contracts and the solver.
    intents: T.Object(
      {
        feeBps: T.Integer({ minimum: 0, maximum: 10000, description: 'fee in basis points of the amount, on top of the destination gas of a fill' }),
        maxAwaitingOpen: T.Integer({
          minimum: 1,
          maximum: 1000,
          description: "intents one account may have waiting for their open at once (each reserves the solver's liquidity until its open deadline); one more is 409 CONFLICT",
        }),
        // C51: shares of a destination wallet's liquidity (its balance, reserved coins included), in percent.
        maxReservePerIntent: T.Number({
          minimum: 0.01,
          maximum: 100,
          description: "percent of the solver's liquidity on a network (its balance there) one intent may reserve; more is 409 INSUFFICIENT_LIQUIDITY",
        }),
        maxReservePerAccount: T.Number({
          minimum: 0.01,
          maximum: 100,
          description: "percent of the solver's liquidity on a network (its balance there) one account's intents not yet filled may reserve together; more is 409 INSUFFICIENT_LIQUIDITY",
        }),
        maxReserveAwaitingOpen: T.Number({
          minimum: 0.01,
          maximum: 100,
          description: "percent of the solver's liquidity on a network (its balance there) all intents waiting for their open may reserve together; more is 409 INSUFFICIENT_LIQUIDITY",
        }),
        fillGasLimit: T.Integer({ minimum: 21000, description: "gas units of a fill (quoted at the destination's gas price)" }),
        settleGasLimit: T.Integer({ minimum: 21000, description: 'gas units of a settle or a refund' }),
        fillMarginSeconds: T.Integer({ minimum: 0, description: 'seconds before the fill deadline after which the solver no longer fills' }),
        expiryGraceSeconds: T.Integer({ minimum: 0, description: 'seconds past the open deadline before an intent never opened is expired' }),
        checkIntervalMs: T.Integer({ minimum: 50, description: "milliseconds between the solver's looks at intents due for a step" }),
        resendAfterSeconds: T.Integer({ minimum: 0, description: "seconds before a solver transaction not yet mined is checked and sent again" }),
        solverPrivateKey: T.Union([FaucetKey, T.Null()], {
          description: 'secret: the solver wallet (and oracle) on every network; prefer env SOLVER_PRIVATE_KEY; null = none',
        }),
        solverPrivateKeys: T.Record(T.String(), FaucetKey, { description: 'secret: the solver wallet of one network by slug; prefer env SOLVER_PRIVATE_KEY_<SLUG>' }),
        routes: T.Union(
          [T.Array(T.Object({ from: T.String({ minLength: 1, description: 'slug of the origin network' }), to: T.String({ minLength: 1, description: 'slug of the destination network' }) }, { additionalProperties: false, description: 'one route: from and to slugs' })), T.Null()],
          { description: 'routes intents may take; null = every ordered pair of networks of one type with the same native coin' },
        ),
        settlers: T.Record(
          T.String(),
          T.Object(
            { origin: T.String({ ...Address, description: 'the origin settler contract' }), destination: T.String({ ...Address, description: 'the destination settler contract' }) },
            { additionalProperties: false, description: 'settler addresses on one network' },
          ),
          { description: 'settler contracts by slug (npm run deploy:settlers prints them); a route needs both ends' },
        ),
      },
      { additionalProperties: false, description: 'cross-chain intents' },
    ),
    // C58: OpenTelemetry traces, off unless an OTLP endpoint is given (src/ops/tracing.ts).
    tracing: T.Object(
      {
        endpoint: T.Union([T.String({ format: 'uri', pattern: '^https?://', allowed: 'an http:// or https:// URL' }), T.Null()], {
          description: 'OTLP/HTTP base address of a collector (Jaeger, Tempo, an OpenTelemetry Collector); traces go to <endpoint>/v1/traces; null (and tracesEndpoint null): tracing off, nothing of OpenTelemetry loaded',
        }),
        tracesEndpoint: T.Union([T.String({ format: 'uri', pattern: '^https?://', allowed: 'an http:// or https:// URL' }), T.Null()], {
          description: 'the whole OTLP/HTTP traces address, used as it is instead of <endpoint>/v1/traces; null: from endpoint',
        }),
        serviceName: T.String({ minLength: 1, description: 'service.name of the spans' }),
        sampler: T.Union(
          ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'].map((s) => T.Literal(s)),
          { description: 'which traces are recorded; parentbased_*: a request that arrives with a traceparent follows its sampled flag, one without follows the rest of the name' },
        ),
        samplerArg: T.Number({ minimum: 0, maximum: 1, description: 'the share of traces recorded by traceidratio and parentbased_traceidratio; 1 = all' }),
        batchDelayMs: T.Integer({ minimum: 1, description: 'milliseconds between exports of the finished spans (a batch also leaves when 512 are waiting; past 2048 waiting, new ones are dropped)' }),
      },
      { additionalProperties: false, description: 'OpenTelemetry traces of RPC calls and REST requests' },
    ),
    networks: T.Array(Network, {
      minItems: 1,
      description: 'the networks served; a config file merges its entries into these by slug',
    }),
  },
  { additionalProperties: false },
);

export type Config = Static<typeof ConfigSchema>;

// The sections by name. A module is handed the sections it reads (one, or a small interface
// naming several), never the whole Config: only the composition roots (app.ts, main.ts) and config
// loading here see that; eslint's no-restricted-imports holds it (eslint.config.js).
export type ServerConfig = Config['server'];
export type AuthConfig = Config['auth'];
export type KeysConfig = Config['keys'];
export type PlansConfig = Config['plans'];
export type MethodsConfig = Config['methods'];
export type LimitsConfig = Config['limits'];
export type UsageConfig = Config['usage'];
export type RpcConfig = Config['rpc'];
export type WsConfig = Config['ws'];
export type DevnetConfig = Config['devnet'];
export type FaucetConfig = Config['faucet'];
export type EventsConfig = Config['events'];
export type PricesConfig = Config['prices'];
export type WhaleAlertsConfig = Config['whaleAlerts'];
export type WebhooksConfig = Config['webhooks'];
export type IntentsConfig = Config['intents'];
export type TracingConfig = Config['tracing'];
export type NetworkConfig = Static<typeof Network>;
export type PriceSourceConfig = Static<typeof PriceSource>;
export type TokenConfig = Static<typeof Token>;
export type PlanLimits = Static<typeof Plan>;
export type Tier = keyof PlansConfig;
export const TIERS = ['free', 'pro', 'max', 'enterprise'] as const satisfies readonly Tier[];
