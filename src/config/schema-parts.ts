// The building blocks of the config schema (schema.ts): plan limits, method names, upstreams,
// networks with their tokens, price sources and faucet wallets. Every setting has a `description`
// and, for a pattern, an `allowed` in words (see schema.ts).
import { Type as T } from '@sinclair/typebox';

/** A limit that may be absent: `null` means unlimited. */
export const Limit = (description: string) => T.Union([T.Integer({ minimum: 1 }), T.Null()], { description });

export const Plan = T.Object(
  {
    requestsPerMinute: Limit('requests per sliding 60 s; null = unlimited'), // C12
    dailyLimit: Limit('requests per UTC day; null = unlimited'), // C11
    monthlyComputeUnits: Limit('compute units per UTC month; null = unlimited'), // C10
    maxKeys: Limit('API keys per account; null = unlimited'), // C15
    maxNetworks: Limit("distinct networks over all of an account's keys; null = all"), // C16
  },
  { additionalProperties: false, description: 'the limits of one plan' },
);

export const WsPlan = T.Object(
  {
    connectionsPerKey: Limit('WebSocket connections open at once per API key, per instance; null = unlimited'),
    subscriptionsPerConnection: Limit('eth_subscribe subscriptions alive at once per connection; null = unlimited'),
  },
  { additionalProperties: false, description: 'WebSocket limits of one plan' },
);

// Method names are exact (no patterns). Names that need an account held by the node can never
// be listed (C24; the policy refuses them as well).
export const StandardMethod = T.String({
  pattern: '^(?!eth_(accounts|sign|signTransaction|signTypedData|sendTransaction|sendTransactionSync|sendUnsignedTransaction)$)(eth|net|web3)_[A-Za-z0-9]+$',
  allowed: 'an exact eth_*, net_* or web3_* method name, not one that needs an account held by the node (eth_accounts, eth_sign*, eth_sendTransaction)',
});
export const ExtraMethod = T.String({ pattern: '^(debug|trace|txpool)_[A-Za-z0-9]+$', allowed: 'an exact debug_*, trace_* or txpool_* method name' });

const HttpUrl = (description: string) =>
  T.String({ format: 'uri', pattern: '^https?://', allowed: 'an http:// or https:// URL', description });
export const Address = T.String({ pattern: '^0x[0-9a-fA-F]{40}$', allowed: 'a 0x-prefixed address of 40 hex digits' });

const Upstream = T.Object(
  {
    name: T.Optional(
      T.String({
        pattern: '^[A-Za-z0-9_.-]{1,64}$',
        allowed: 'up to 64 letters, digits, ".", "_" or "-"',
        description: 'a name for logs and metrics (never the URL, which may hold a provider key); default: the host',
      }),
    ),
    http: HttpUrl('JSON-RPC over HTTP; env UPSTREAM_<SLUG> replaces the list'),
    ws: T.Optional(
      T.String({
        format: 'uri',
        pattern: '^wss?://',
        allowed: 'a ws:// or wss:// URL',
        description: 'JSON-RPC over WebSocket (subscriptions); env UPSTREAM_WS_<SLUG> sets them by position',
      }),
    ),
    archive: T.Optional(T.Boolean({ description: 'true: keeps all state; reads of state older than pruneDepthBlocks go to archive nodes first' })),
    weight: T.Optional(
      T.Integer({
        minimum: 1,
        maximum: 1000,
        description: 'share of the calls among equally good upstreams (default 1); with no weight set in a network, the first listed takes all',
      }),
    ),
  },
  { additionalProperties: false, description: 'one node the gateway forwards to' },
);

// C28-C30: a decimal string in whole native units ("1", "0.5"); a faucet key is 32 bytes of hex.
export const Amount = (description: string) =>
  T.String({ pattern: '^[0-9]+(\\.[0-9]+)?$', allowed: 'a decimal number in quotes, e.g. "1" or "0.5"', description });
export const FaucetKey = T.String({ pattern: '^0x[0-9a-fA-F]{64}$', allowed: 'a 0x-prefixed private key of 64 hex digits' });

export const FaucetNetwork = T.Object(
  {
    enabled: T.Optional(T.Boolean({ description: 'false: no faucet on this testnet, even with faucet.privateKey' })),
    privateKey: T.Optional(
      T.Union([FaucetKey, T.Null()], { description: 'secret: the wallet of this testnet; prefer env FAUCET_PRIVATE_KEY_<SLUG>' }),
    ),
    defaultAmount: T.Optional(Amount('whole native units; overrides faucet.defaultAmount')),
    maxAmount: T.Optional(Amount('whole native units; overrides faucet.maxAmount')),
    gasLimit: T.Optional(T.Integer({ minimum: 21000, description: 'gas units per grant; overrides faucet.gasLimit' })),
  },
  { additionalProperties: false, description: 'faucet settings of one testnet' },
);

// C34: where a coin's USD price comes from.
export const PriceSource = T.Union(
  [
    T.Object(
      {
        type: T.Literal('chainlink'),
        network: T.String({ minLength: 1, description: 'slug of the network the feed lives on' }),
        address: Address,
      },
      { additionalProperties: false, description: 'a Chainlink price feed' },
    ),
    T.Object(
      {
        type: T.Literal('http'),
        url: T.String({ pattern: '^https?://', allowed: 'an http:// or https:// URL' }),
        path: T.String({ minLength: 1, description: 'dotted path of the number in the JSON answer' }),
      },
      { additionalProperties: false, description: 'a JSON document over HTTP' },
    ),
    T.Object({ type: T.Literal('fixed'), usd: T.Number({ minimum: 0 }) }, { additionalProperties: false, description: 'a fixed price' }),
  ],
  { description: 'where a USD price comes from: {"type":"chainlink",network,address}, {"type":"http",url,path} or {"type":"fixed",usd}' },
);

// C40: an ERC-20 token of a network, counted in the unified balance.
export const Token = T.Object(
  {
    symbol: T.String({ minLength: 1, maxLength: 16, description: 'ticker shown in balances' }),
    address: T.String({ ...Address, description: 'the token contract' }),
    decimals: T.Integer({ minimum: 0, maximum: 36, description: 'decimals of its amounts' }),
    price: T.Optional(PriceSource),
  },
  { additionalProperties: false, description: 'an ERC-20 token' },
);

export const Network = T.Object(
  {
    slug: T.String({
      pattern: '^[a-z0-9]+(-[a-z0-9]+)*$',
      allowed: 'lower-case letters and digits in words joined by "-"',
      description: 'the name in addresses (/v1/{slug}) and the key a config file merges by',
    }),
    enabled: T.Optional(T.Boolean({ description: 'false in a config file leaves this network out' })),
    name: T.String({ minLength: 1, description: 'display name' }),
    chainId: T.Integer({ minimum: 1, description: 'EIP-155 chain id' }),
    type: T.Union([T.Literal('mainnet'), T.Literal('testnet')], { description: 'testnets get the faucet' }),
    native: T.Optional(T.Boolean({ description: 'true on the native chains (nat_* methods)' })),
    currency: T.Object(
      {
        name: T.String({ description: "the coin's name" }),
        symbol: T.String({ description: "the coin's ticker" }),
        decimals: T.Integer({ minimum: 0, maximum: 36, description: 'decimals of its amounts (18 on EVM chains)' }),
      },
      { additionalProperties: false, description: 'the native coin' },
    ),
    explorerUrl: T.Union([T.String({ format: 'uri' }), T.Null()], { allowed: 'a URL, or null for none', description: 'block explorer; null: none (the devnet\'s local chains)' }),
    upstreams: T.Array(Upstream, { description: 'nodes, tried in order of health; env UPSTREAM_<SLUG> replaces them' }),
    pruneDepthBlocks: T.Optional(T.Integer({ minimum: 1, description: 'blocks of state a full node keeps (default 128); older state reads go to archive upstreams first' })),
    hedgeDelayMs: T.Optional(T.Integer({ minimum: 1, description: "milliseconds before a read is also sent to the next node on this network; default: rpc.hedge's" })),
    // C26: how far the network's head may move between two readings (4 times this pace, plus 32 blocks).
    blockTimeMs: T.Optional(T.Integer({ minimum: 1, description: 'milliseconds between blocks, the chain\'s real pace (the shipped networks set theirs: 12000 Ethereum, 2000 Polygon, 750 BNB, 250 Arbitrum...; 250 when not set; 250 on the devnet); a head climbing faster than 4 times this pace (plus 32 blocks) is not believed' })),
    // C49: consensus reads, off when absent.
    consensus: T.Optional(
      T.Object(
        {
          methods: T.Array(T.Union([StandardMethod, ExtraMethod]), { minItems: 1, description: 'the methods answered only when nodes agree (single calls; batch items are forwarded as usual)' }),
          nodes: T.Optional(T.Integer({ minimum: 2, maximum: 16, description: 'upstreams asked at once per consensus read (default 2), all of which must agree; on disagreement one more is asked and the majority answered; fewer agreeing (nodes failed or late): -32000 too_few_nodes; the network needs at least this many upstreams' })),
          penaltySeconds: T.Optional(T.Integer({ minimum: 1, description: 'seconds a node that disagreed with the majority is left out (default 300)' })),
        },
        { additionalProperties: false, description: 'consensus reads (C49): these methods go to several upstreams and only an answer they agree on is passed on; absent: off' },
      ),
    ),
    // C55: this network's answer sampling, over rpc.sampling.
    sampling: T.Optional(
      T.Object(
        {
          rate: T.Optional(T.Number({ minimum: 0, maximum: 1, description: "share (0 to 1) of the answers to state reads at a block checked on this network; default: rpc.sampling's" })),
          methods: T.Optional(
            T.Record(T.String(), T.Number({ minimum: 0, maximum: 1 }), {
              description: 'a share per method (0: never); a read with a block parameter not sampled by default (eth_getBlockByNumber, eth_estimateGas...) may be listed',
            }),
          ),
        },
        { additionalProperties: false, description: 'answer sampling of this network (C55)' },
      ),
    ),
    price: T.Optional(T.Union(PriceSource.anyOf, { description: "the native coin's USD price; absent: none (testnets: 0)" })), // C34
    tokens: T.Optional(T.Array(Token, { description: 'ERC-20 tokens counted in the unified balance' })), // C40
    // C26: a network's own eth_getLogs limits (its nodes' caps), else those of `rpc`.
    maxLogsRange: T.Optional(
      T.Union([T.Integer({ minimum: 1 }), T.Null()], { description: 'blocks one eth_getLogs sent to a node may span (wider ranges are split); null = never split; absent: rpc.maxLogsRange' }),
    ),
    maxLogsResults: T.Optional(
      T.Union([T.Integer({ minimum: 1 }), T.Null()], { description: 'logs a split eth_getLogs may answer; null = no limit; absent: rpc.maxLogsResults' }),
    ),
  },
  { additionalProperties: false, description: 'one network' },
);
