// Loads the config: the shipped default, the operator's file and the environment, merged and
// checked against the schema.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FormatRegistry, Kind, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { allowed, isSecretPath, pointerSegments, schemaAt, settingPath, showValue, unwrapUnion, valueAt } from './describe.ts';
import { type Config, ConfigSchema } from './schema.ts';
import { ConfigError } from '../errors/config.ts';
import { checkableAtBlock, STANDARD_METHODS } from '../methods/catalogue.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
/** The shipped default config: all 16 networks with public upstreams (C32). */
export const DEFAULT_CONFIG_FILE = path.resolve(here, '../../config/default.json');

if (!FormatRegistry.Has('uri')) {
  FormatRegistry.Set('uri', (value) => {
    try {
      new URL(value);
      return true;
    } catch {
      return false;
    }
  });
}

// Re-exported for the callers that import it with the loader (main.ts).
export { ConfigError } from '../errors/config.ts';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function isObject(v: unknown): v is Record<string, Json> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Objects merge key by key; arrays and scalars from `over` replace. */
export function deepMerge(base: Json, over: Json): Json {
  if (!isObject(base) || !isObject(over)) return over;
  const out: Record<string, Json> = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = k in base ? deepMerge(base[k] as Json, v) : v;
  return out;
}

/**
 * A config file over the defaults: objects merge key by key, arrays replace, except `networks`,
 * which merges by slug: an entry whose slug is known changes that network only (its own arrays,
 * `upstreams` included, replace), a new slug adds a network, and `"enabled": false` leaves one out.
 */
export function mergeConfigFile(base: Json, file: Record<string, Json>, label: string): Json {
  const { networks, ...rest } = file;
  const merged = deepMerge(base, rest);
  if (networks === undefined || !isObject(merged)) return merged;
  if (!Array.isArray(networks)) throw new ConfigError(`networks (in ${label}): must be a list of networks, each with its "slug"`);
  const list = Array.isArray(merged.networks) ? [...merged.networks] : [];
  for (const [i, entry] of networks.entries()) {
    if (!isObject(entry) || typeof entry.slug !== 'string' || entry.slug === '') {
      throw new ConfigError(`networks[${i}] (in ${label}): each network needs its "slug" (a known one to change it, a new one to add it)`);
    }
    const at = list.findIndex((n) => isObject(n) && n.slug === entry.slug);
    if (at === -1) list.push(entry);
    else list[at] = deepMerge(list[at] as Json, entry);
  }
  merged.networks = list;
  return merged;
}

function readJson(file: string, label: string): Json {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`${label}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  try {
    return JSON.parse(text) as Json;
  } catch (err) {
    throw new ConfigError(`${label}: ${file} is not valid JSON (${(err as Error).message})`);
  }
}

/** One environment variable that sets one setting. */
export interface EnvSetting {
  name: string;
  /** The setting it replaces, dotted. */
  path: string;
  /** How the text becomes the value. */
  kind: 'string' | 'int' | 'number' | 'list' | 'intOrAuto';
  /** A secret: its value is never shown. */
  secret?: boolean;
}

/**
 * The environment variables that set one setting each, applied over the config file. Besides
 * these: GATEWAY_CONFIG, DEVNET, UPSTREAM_<SLUG>, UPSTREAM_WS_<SLUG>, FAUCET_PRIVATE_KEY_<SLUG>,
 * SOLVER_PRIVATE_KEY_<SLUG>.
 */
export const ENV_SETTINGS: readonly EnvSetting[] = [
  { name: 'PORT', path: 'server.port', kind: 'int' },
  { name: 'HOST', path: 'server.host', kind: 'string' },
  { name: 'PUBLIC_URL', path: 'server.publicUrl', kind: 'string' },
  { name: 'DATABASE_URL', path: 'storage.databaseUrl', kind: 'string' },
  { name: 'DATA_DIR', path: 'storage.dataDir', kind: 'string' },
  { name: 'REDIS_URL', path: 'redis.url', kind: 'string' },
  { name: 'REDIS_CLUSTER_NODES', path: 'redis.clusterNodes', kind: 'list', secret: true },
  { name: 'REDIS_COMMAND_TIMEOUT_MS', path: 'redis.commandTimeoutMs', kind: 'int' },
  { name: 'JWT_SECRET', path: 'auth.jwtSecret', kind: 'string', secret: true },
  { name: 'KEY_ENCRYPTION_SECRET', path: 'keys.encryptionSecret', kind: 'string', secret: true },
  { name: 'ADMIN_TOKEN', path: 'admin.token', kind: 'string', secret: true },
  { name: 'LOG_LEVEL', path: 'logLevel', kind: 'string' },
  { name: 'LOG_FORMAT', path: 'logFormat', kind: 'string' },
  { name: 'METRICS_TOKEN', path: 'metrics.token', kind: 'string', secret: true },
  { name: 'METRICS_PORT', path: 'metrics.port', kind: 'int' },
  { name: 'READY_WHEN', path: 'health.readyWhen', kind: 'string' },
  { name: 'BODY_LIMIT_BYTES', path: 'server.bodyLimitBytes', kind: 'int' },
  { name: 'TRUSTED_PROXIES', path: 'server.trustedProxies', kind: 'list' },
  { name: 'HEADERS_TIMEOUT_MS', path: 'server.headersTimeoutMs', kind: 'int' },
  { name: 'REQUEST_TIMEOUT_MS', path: 'server.requestTimeoutMs', kind: 'int' },
  { name: 'KEEP_ALIVE_TIMEOUT_MS', path: 'server.keepAliveTimeoutMs', kind: 'int' },
  { name: 'WRITE_TIMEOUT_MS', path: 'server.writeTimeoutMs', kind: 'int' },
  { name: 'WORKERS', path: 'server.workers', kind: 'intOrAuto' },
  { name: 'WORKER_HANG_MS', path: 'server.workerHangMs', kind: 'int' },
  { name: 'FAUCET_PRIVATE_KEY', path: 'faucet.privateKey', kind: 'string', secret: true },
  { name: 'SOLVER_PRIVATE_KEY', path: 'intents.solverPrivateKey', kind: 'string', secret: true },
  // C58: OpenTelemetry's own variable names.
  { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', path: 'tracing.endpoint', kind: 'string' },
  { name: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', path: 'tracing.tracesEndpoint', kind: 'string' },
  { name: 'OTEL_SERVICE_NAME', path: 'tracing.serviceName', kind: 'string' },
  { name: 'OTEL_TRACES_SAMPLER', path: 'tracing.sampler', kind: 'string' },
  { name: 'OTEL_TRACES_SAMPLER_ARG', path: 'tracing.samplerArg', kind: 'number' },
  { name: 'OTEL_BSP_SCHEDULE_DELAY', path: 'tracing.batchDelayMs', kind: 'int' },
];

/** The other environment variables, for --help and the reference (setting paths as the reference writes them). */
export const ENV_PATTERNS: ReadonlyArray<{ name: string; path: string }> = [
  { name: 'DEVNET', path: 'devnet.enabled' },
  { name: 'UPSTREAM_<SLUG>', path: 'networks[].upstreams' },
  { name: 'UPSTREAM_WS_<SLUG>', path: 'networks[].upstreams[].ws' },
  { name: 'FAUCET_PRIVATE_KEY_<SLUG>', path: 'faucet.networks.<slug>.privateKey' },
  { name: 'SOLVER_PRIVATE_KEY_<SLUG>', path: 'intents.solverPrivateKeys' },
];

/** `native-testnet` -> `NATIVE_TESTNET`, the suffix of UPSTREAM_<SLUG> and the like. */
export const envSuffix = (slug: string) => slug.toUpperCase().replaceAll('-', '_');
const slugOf = (suffix: string) => suffix.toLowerCase().replaceAll('_', '-');

export interface LoadOptions {
  /** `--config FILE`; falls back to env GATEWAY_CONFIG. */
  configFile?: string | undefined;
  env?: NodeJS.ProcessEnv;
  /** `--devnet` on the command line. */
  devnet?: boolean;
  /** Last-word overrides (tests); merged as plain objects, arrays (`networks` too) replace. */
  overrides?: Record<string, unknown>;
}

/** Where settings came from, so that an error names what the user wrote. */
export interface ConfigSources {
  /** Setting path (as `settingPath` writes it) -> the environment variable that set it. */
  env: Map<string, string>;
  /** The config file and its content. */
  file?: { name: string; json: Record<string, Json> };
}

/** Defaults that differ under `--devnet`. */
const DEVNET_DEFAULTS: Json = {
  // C59: a devnet (an admin API on, its token printed, webhooks to private addresses) stays on
  // this machine unless HOST or the config file says otherwise.
  server: { host: '127.0.0.1' },
  events: { confirmations: 1 },
  webhooks: { allowPrivateTargets: true },
};

function flag(env: NodeJS.ProcessEnv, name: string): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '' || raw === '0' || raw === 'false') return false;
  if (raw === '1' || raw === 'true') return true;
  throw new ConfigError(`${name} = ${showValue(raw)}: must be 1, true, 0 or false`);
}

function setAt(root: Record<string, Json>, dotted: string, value: Json): void {
  const keys = dotted.split('.');
  let node = root;
  for (const k of keys.slice(0, -1)) {
    if (!isObject(node[k])) node[k] = {};
    node = node[k];
  }
  node[keys.at(-1) as string] = value;
}

/**
 * Loads the one config (C32): shipped defaults, then the config file, then env overrides,
 * validated against the schema and frozen. Throws ConfigError naming the environment variable
 * or the setting the user wrote, the value (never a secret's) and what is allowed.
 */
export function loadConfig(opts: LoadOptions = {}): Config {
  const env = opts.env ?? process.env;
  const sources: ConfigSources = { env: new Map() };
  let merged = withCatalogue(readJson(DEFAULT_CONFIG_FILE, 'default config'));
  const file = opts.configFile ?? (env.GATEWAY_CONFIG || undefined);
  const fileLabel = opts.configFile ? '--config' : 'GATEWAY_CONFIG';
  const user = file ? readJson(path.resolve(file), fileLabel) : undefined;
  if (file && !isObject(user)) throw new ConfigError(`${fileLabel}: the config file ${file} must hold a JSON object`);
  const devnetOn = opts.devnet === true || flag(env, 'DEVNET');
  // Under the devnet some defaults differ (C33: 1 confirmation; C39: local webhook receivers);
  // a config file still has the last word over them.
  const userDevnet = isObject(user) && isObject(user.devnet) && user.devnet.enabled === true;
  if (devnetOn || userDevnet) merged = deepMerge(merged, DEVNET_DEFAULTS);
  if (isObject(user) && file) {
    merged = mergeConfigFile(merged, user, file);
    sources.file = { name: file, json: user };
  }
  if (!isObject(merged)) throw new ConfigError('config must be a JSON object');
  const cfg = merged;

  for (const s of ENV_SETTINGS) {
    const raw = env[s.name];
    if (raw === undefined || raw === '') continue;
    let value: Json = raw;
    if (s.kind === 'intOrAuto' && raw.trim() === 'auto') {
      value = 'auto';
    } else if (s.kind === 'int' || s.kind === 'intOrAuto') {
      if (!/^\d+$/.test(raw.trim())) {
        const schema = schemaAt(ConfigSchema, s.path.split('.'));
        throw new ConfigError(`${s.name}: ${s.path} = ${showValue(raw, s.secret)}: must be ${schema ? allowed(schema) : 'a whole number'}`);
      }
      value = Number(raw.trim());
    } else if (s.kind === 'number') {
      if (!/^\d+(\.\d+)?$/.test(raw.trim())) {
        const schema = schemaAt(ConfigSchema, s.path.split('.'));
        throw new ConfigError(`${s.name}: ${s.path} = ${showValue(raw, s.secret)}: must be ${schema ? allowed(schema) : 'a number'}`);
      }
      value = Number(raw.trim());
    } else if (s.kind === 'list') {
      value = raw
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean);
    }
    setAt(cfg, s.path, value);
    sources.env.set(s.path, s.name);
  }
  if (devnetOn) setAt(cfg, 'devnet.enabled', true);

  const networks = Array.isArray(cfg.networks) ? cfg.networks.filter(isObject) : [];
  const known = () => networks.filter((n) => n.enabled !== false).map((n) => (typeof n.slug === 'string' ? n.slug : '?'));
  const networkOf = (name: string, suffix: string) => {
    const slug = slugOf(suffix);
    const net = networks.find((n) => n.slug === slug && n.enabled !== false);
    if (!net) throw new ConfigError(`${name}: no network with slug "${slug}" (known: ${known().join(', ')})`);
    return { net, slug };
  };
  const entries = Object.entries(env).filter((e): e is [string, string] => typeof e[1] === 'string' && e[1] !== '');
  // UPSTREAM_<SLUG>=http://a,http://b replaces that network's HTTP upstreams (C32).
  for (const [name, value] of entries) {
    if (!name.startsWith('UPSTREAM_') || name.startsWith('UPSTREAM_WS_')) continue;
    const { net, slug } = networkOf(name, name.slice('UPSTREAM_'.length));
    net.upstreams = value
      .split(',')
      .map((u) => u.trim())
      .filter(Boolean)
      .map((http) => ({ http }));
    sources.env.set(`networks.${slug}.upstreams`, name);
  }
  // UPSTREAM_WS_<SLUG>=wss://a,,wss://c gives the WebSocket address of the network's upstreams by
  // position (the first to the first); an empty place leaves that upstream without one.
  for (const [name, value] of entries) {
    if (!name.startsWith('UPSTREAM_WS_')) continue;
    const { net, slug } = networkOf(name, name.slice('UPSTREAM_WS_'.length));
    const list = Array.isArray(net.upstreams) ? net.upstreams.filter(isObject) : [];
    const ws = value.split(',').map((u) => u.trim());
    if (ws.length > list.length) {
      throw new ConfigError(
        `${name}: ${ws.length} WebSocket addresses for the ${list.length} upstream(s) of ${slug}; they pair by position with UPSTREAM_${envSuffix(slug)} (or the configured upstreams)`,
      );
    }
    net.upstreams = list.map((u, i) => {
      if (i >= ws.length) return u;
      sources.env.set(`networks.${slug}.upstreams[${i}].ws`, name);
      const out = { ...u };
      delete out.ws;
      return ws[i] ? { ...out, ws: ws[i] } : out;
    });
  }

  // Faucet keys (C30): FAUCET_PRIVATE_KEY for every testnet, FAUCET_PRIVATE_KEY_<SLUG> for one.
  for (const [name, value] of entries) {
    if (!name.startsWith('FAUCET_PRIVATE_KEY_')) continue;
    const { slug } = networkOf(name, name.slice('FAUCET_PRIVATE_KEY_'.length));
    const faucet = isObject(cfg.faucet) ? cfg.faucet : (cfg.faucet = {});
    const per = isObject(faucet.networks) ? faucet.networks : (faucet.networks = {});
    per[slug] = { ...(isObject(per[slug]) ? per[slug] : {}), privateKey: value };
    sources.env.set(`faucet.networks.${slug}.privateKey`, name);
  }
  // Solver keys (C42): SOLVER_PRIVATE_KEY for every network, SOLVER_PRIVATE_KEY_<SLUG> for one.
  for (const [name, value] of entries) {
    if (!name.startsWith('SOLVER_PRIVATE_KEY_')) continue;
    const { slug } = networkOf(name, name.slice('SOLVER_PRIVATE_KEY_'.length));
    const intents = isObject(cfg.intents) ? cfg.intents : (cfg.intents = {});
    const keys = isObject(intents.solverPrivateKeys) ? intents.solverPrivateKeys : (intents.solverPrivateKeys = {});
    keys[slug] = value;
    sources.env.set(`intents.solverPrivateKeys.${slug}`, name);
  }

  // `"enabled": false` in a config file leaves a network out.
  if (Array.isArray(cfg.networks)) cfg.networks = cfg.networks.filter((n) => !(isObject(n) && n.enabled === false));

  const final = deepMerge(cfg, (opts.overrides ?? {}) as Json);
  // C35: the shipped whale-alert networks are the native ones this config keeps, so a config that
  // leaves one out need not restate the list; a list written in a file, env or overrides is checked
  // as written (C32: an unknown slug stops the start).
  const written = [user, opts.overrides as Json | undefined].some((o) => isObject(o) && isObject(o.whaleAlerts) && o.whaleAlerts.networks !== undefined) || sources.env.has('whaleAlerts.networks');
  if (!written && isObject(final) && isObject(final.whaleAlerts) && Array.isArray(final.whaleAlerts.networks) && Array.isArray(final.networks)) {
    const slugs = new Set(final.networks.filter(isObject).map((n) => n.slug));
    final.whaleAlerts.networks = final.whaleAlerts.networks.filter((slug) => slugs.has(slug));
  }
  return validateConfig(final, sources);
}

/**
 * Validates a whole config object; the first error names the setting as the user wrote it
 * (`networks.ethereum.upstreams[0].http`, or the environment variable that set it), its value
 * unless it is a secret, and what is allowed.
 */
export function validateConfig(raw: unknown, sources?: ConfigSources): Config {
  if (!Value.Check(ConfigSchema, raw)) throw new ConfigError(describeError(raw, sources));
  const cfg = raw;
  const { headersTimeoutMs, requestTimeoutMs } = cfg.server;
  if (requestTimeoutMs > 0 && headersTimeoutMs > requestTimeoutMs) {
    const envNames = ['server.headersTimeoutMs', 'server.requestTimeoutMs'].flatMap((p) => sources?.env.get(p) ?? []);
    throw new ConfigError(
      `${envNames.length ? `${envNames.join(', ')}: ` : ''}server.headersTimeoutMs = ${headersTimeoutMs} must not exceed server.requestTimeoutMs = ${requestTimeoutMs}`,
    );
  }
  const seen = new Map<string, string>();
  for (const n of cfg.networks) {
    if (seen.has(n.slug)) throw new ConfigError(`networks: slug "${n.slug}" is listed twice`);
    if (seen.has(`id:${n.chainId}`)) throw new ConfigError(`networks.${n.slug}.chainId = ${n.chainId}: already the chain id of ${seen.get(`id:${n.chainId}`)}`);
    seen.set(n.slug, n.slug);
    seen.set(`id:${n.chainId}`, n.slug);
    if (n.upstreams.length === 0 && !cfg.devnet.enabled) {
      const env = sources?.env.get(`networks.${n.slug}.upstreams`);
      throw new ConfigError(`${env ? `${env}: ` : ''}networks.${n.slug}.upstreams: at least one upstream is needed`);
    }
    // C49: a consensus read is answered only when `consensus.nodes` (default 2) nodes agree; with
    // fewer upstreams every one would be refused (too_few_nodes), so the start refuses instead.
    // The devnet points each network at its one local chain (main.ts `onDevnet`).
    if (n.consensus !== undefined) {
      const nodes = n.consensus.nodes ?? 2;
      const have = cfg.devnet.enabled ? 1 : n.upstreams.length;
      if (have < nodes) {
        const env = sources?.env.get(`networks.${n.slug}.upstreams`);
        const setting = n.consensus.nodes === undefined ? `networks.${n.slug}.consensus` : `networks.${n.slug}.consensus.nodes = ${nodes}`;
        const where = cfg.devnet.enabled ? 'the devnet gives each network one node' : `the network has ${have}${env ? ` (${env})` : ''}`;
        throw new ConfigError(`${setting}: consensus reads need ${nodes} upstreams that agree, ${where}; add upstreams, lower consensus.nodes (at least 2) or leave consensus out`);
      }
    }
    // C55: only a read at a block can be checked at the same block on another node.
    for (const m of Object.keys(n.sampling?.methods ?? {})) {
      if (!checkableAtBlock(m)) {
        throw new ConfigError(`networks.${n.slug}.sampling.methods.${m}: cannot be sampled; must be a read with a block parameter (eth_getBalance, eth_call, eth_getBlockByNumber...)`);
      }
    }
  }
  checkNetworkReferences(cfg, sources);
  return deepFreeze(cfg);
}

/**
 * C32: a setting that names a network by slug names one of `networks`, or the start stops naming
 * it: a typo would otherwise leave a feature quietly idle (no whale alerts, a price always null).
 */
function checkNetworkReferences(cfg: Config, sources: ConfigSources | undefined): void {
  const slugs = new Set(cfg.networks.map((n) => n.slug));
  const refs: Array<[path: string, slug: string]> = [
    ...cfg.whaleAlerts.networks.map((slug, i): [string, string] => [`whaleAlerts.networks.${i}`, slug]),
    ...Object.keys(cfg.faucet.networks).map((slug): [string, string] => [`faucet.networks.${slug}`, slug]),
    ...Object.keys(cfg.intents.solverPrivateKeys).map((slug): [string, string] => [`intents.solverPrivateKeys.${slug}`, slug]),
    ...Object.keys(cfg.intents.settlers).map((slug): [string, string] => [`intents.settlers.${slug}`, slug]),
    ...(cfg.intents.routes ?? []).flatMap((r, i): Array<[string, string]> => [
      [`intents.routes.${i}.from`, r.from],
      [`intents.routes.${i}.to`, r.to],
    ]),
  ];
  for (const n of cfg.networks) {
    if (n.price?.type === 'chainlink') refs.push([`networks.${n.slug}.price.network`, n.price.network]);
    for (const [i, t] of (n.tokens ?? []).entries()) if (t.price?.type === 'chainlink') refs.push([`networks.${n.slug}.tokens.${i}.price.network`, t.price.network]);
  }
  for (const [at, slug] of refs) {
    if (slugs.has(slug)) continue;
    const env = sources?.env.get(at);
    throw new ConfigError(`${env ? `${env}: ` : ''}${at} = "${slug}": no such network; known: ${[...slugs].join(', ')}`);
  }
}

/** The first schema error of `raw` in words. */
function describeError(raw: unknown, sources: ConfigSources | undefined, schema: TSchema = ConfigSchema, base: string[] = []): string {
  const first = Value.Errors(schema, valueAt(raw, base)).First();
  if (!first) return 'the config does not match the schema';
  const segments = [...base, ...pointerSegments(first.path)];
  const value = valueAt(raw, segments);
  const at = schemaAt(ConfigSchema, segments, raw);
  // A union of objects with a `type` (a price source): the error of the member it names.
  if (at && at[Kind] === 'Union' && isObject(value)) {
    const member = unwrapUnion(at, value);
    if (member !== at && !Value.Check(member, value)) return describeError(raw, sources, member, segments);
  }
  const where = settingPath(segments, raw);
  const envName = envFor(where, sources);
  // A missing setting is not in the file; the object that lacks it is.
  const held = value === undefined ? segments.slice(0, -1) : segments;
  const lead = `${envName ? `${envName}: ` : ''}${where}${!envName ? inFile(held, raw, sources) : ''}`;
  const secret = isSecretPath(where);

  if (first.message === 'Unexpected property') {
    const parent = schemaAt(ConfigSchema, segments.slice(0, -1), raw);
    const keys = parent?.properties ? Object.keys(parent.properties as object) : [];
    const name = segments.at(-1) as string;
    const near = keys.find((k) => closeTo(k, name));
    return `${lead}: unknown setting${near ? ` (did you mean ${near}?)` : ''}${keys.length ? `; known here: ${keys.join(', ')}` : ''}`;
  }
  const what = at ? allowed(envName ? withoutNull(at) : at) : first.message;
  if (value === undefined) return `${lead}: missing; must be ${what}`;
  return `${lead} = ${showValue(value, secret)}: must be ${what}`;
}

/** The environment variable that set `where` or a setting around it (longest match). */
function envFor(where: string, sources: ConfigSources | undefined): string | undefined {
  let best: [string, string] | undefined;
  for (const [p, name] of sources?.env ?? []) {
    if (where === p || where.startsWith(`${p}.`) || where.startsWith(`${p}[`)) {
      if (!best || p.length > best[0].length) best = [p, name];
    }
  }
  return best?.[1];
}

/** ` (in FILE)` when the config file holds that setting (networks found by slug). */
function inFile(segments: string[], raw: unknown, sources: ConfigSources | undefined): string {
  if (!sources?.file) return '';
  let node: unknown = sources.file.json;
  let merged: unknown = raw;
  for (const seg of segments) {
    const next: unknown = Array.isArray(merged) ? merged[Number(seg)] : isObject(merged) ? merged[seg] : undefined;
    if (Array.isArray(node) && Array.isArray(merged)) {
      const slug = isObject(next) ? next.slug : undefined;
      node = slug !== undefined ? node.find((n) => isObject(n) && n.slug === slug) : node[Number(seg)];
    } else node = isObject(node) ? node[seg] : undefined;
    merged = next;
    if (node === undefined) return '';
  }
  return ` (in ${sources.file.name})`;
}

function withoutNull(s: TSchema): TSchema {
  if (s[Kind] !== 'Union') return s;
  const rest = (s.anyOf as TSchema[]).filter((m) => m[Kind] !== 'Null');
  return rest.length === 1 ? (rest[0] as TSchema) : s;
}

/** One letter added, dropped, changed, or two swapped; or the same but for case. */
function closeTo(a: string, b: string): boolean {
  if (a.toLowerCase() === b.toLowerCase()) return true;
  if (Math.abs(a.length - b.length) > 1) return false;
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  const swapped = a[i] === b[i + 1] && a[i + 1] === b[i] && a.slice(i + 2) === b.slice(i + 2);
  return swapped || a.slice(i + 1) === b.slice(i + 1) || a.slice(i) === b.slice(i + 1) || a.slice(i + 1) === b.slice(i);
}

function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object') {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}

/**
 * Whether users reach the gateway over https: the public address (C2) says so, whatever the
 * connection in front of it (a TLS-terminating proxy talks plain http to the gateway).
 */
export function publicUrlIsHttps(cfg: Config): boolean {
  return cfg.server.publicUrl?.toLowerCase().startsWith('https:') ?? false;
}

/** The address users see (C2). */
export function publicUrl(cfg: Config, listeningPort?: number): string {
  return (cfg.server.publicUrl ?? `http://localhost:${listeningPort ?? cfg.server.port}`).replace(/\/+$/, '');
}

/**
 * C24, C53: the methods every plan may call default to those the method catalogue passes
 * (src/methods/catalogue.ts); a config file that names `methods.standard` replaces the list.
 */
function withCatalogue(defaults: Json): Json {
  if (!isObject(defaults) || !isObject(defaults.methods) || defaults.methods.standard !== undefined) return defaults;
  return { ...defaults, methods: { ...defaults.methods, standard: [...STANDARD_METHODS] } };
}
