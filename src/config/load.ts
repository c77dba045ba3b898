import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FormatRegistry } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { type Config, ConfigSchema } from './schema.ts';

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

/** A setting that stops the start, naming what is wrong. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

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

function intEnv(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  return Number(raw);
}

function str(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const raw = env[name];
  return raw === undefined || raw === '' ? undefined : raw;
}

export interface LoadOptions {
  /** `--config FILE`; falls back to env GATEWAY_CONFIG. */
  configFile?: string | undefined;
  env?: NodeJS.ProcessEnv;
  /** `--devnet` on the command line. */
  devnet?: boolean;
  /** Last-word overrides (tests). */
  overrides?: Record<string, unknown>;
}

/**
 * Loads the one config (C32): shipped defaults, then the config file, then env overrides,
 * validated against the schema and frozen. Throws ConfigError naming the bad setting.
 */
export function loadConfig(opts: LoadOptions = {}): Config {
  const env = opts.env ?? process.env;
  let merged = readJson(DEFAULT_CONFIG_FILE, 'default config');
  const file = opts.configFile ?? str(env, 'GATEWAY_CONFIG');
  if (file) {
    const user = readJson(path.resolve(file), 'GATEWAY_CONFIG / --config');
    if (!isObject(user)) throw new ConfigError(`config file ${file} must hold a JSON object`);
    merged = deepMerge(merged, user);
  }
  const cfg = merged as unknown as Config;
  if (!isObject(merged)) throw new ConfigError('config must be a JSON object');

  const e = {
    port: intEnv(env, 'PORT'),
    host: str(env, 'HOST'),
    publicUrl: str(env, 'PUBLIC_URL'),
    databaseUrl: str(env, 'DATABASE_URL'),
    dataDir: str(env, 'DATA_DIR'),
    redisUrl: str(env, 'REDIS_URL'),
    jwtSecret: str(env, 'JWT_SECRET'),
    keySecret: str(env, 'KEY_ENCRYPTION_SECRET'),
    adminToken: str(env, 'ADMIN_TOKEN'),
    logLevel: str(env, 'LOG_LEVEL'),
    bodyLimit: intEnv(env, 'BODY_LIMIT_BYTES'),
    trusted: str(env, 'TRUSTED_PROXIES'),
    headersTimeout: intEnv(env, 'HEADERS_TIMEOUT_MS'),
    requestTimeout: intEnv(env, 'REQUEST_TIMEOUT_MS'),
    keepAliveTimeout: intEnv(env, 'KEEP_ALIVE_TIMEOUT_MS'),
  };
  if (e.port !== undefined) cfg.server.port = e.port;
  if (e.host) cfg.server.host = e.host;
  if (e.publicUrl) cfg.server.publicUrl = e.publicUrl;
  if (e.bodyLimit !== undefined) cfg.server.bodyLimitBytes = e.bodyLimit;
  if (e.headersTimeout !== undefined) cfg.server.headersTimeoutMs = e.headersTimeout;
  if (e.requestTimeout !== undefined) cfg.server.requestTimeoutMs = e.requestTimeout;
  if (e.keepAliveTimeout !== undefined) cfg.server.keepAliveTimeoutMs = e.keepAliveTimeout;
  if (e.trusted) cfg.server.trustedProxies = e.trusted.split(',').map((s) => s.trim()).filter(Boolean);
  if (e.databaseUrl) cfg.storage.databaseUrl = e.databaseUrl;
  if (e.dataDir) cfg.storage.dataDir = e.dataDir;
  if (e.redisUrl) cfg.redis.url = e.redisUrl;
  if (e.jwtSecret) cfg.auth.jwtSecret = e.jwtSecret;
  if (e.keySecret) cfg.keys.encryptionSecret = e.keySecret;
  if (e.adminToken) cfg.admin.token = e.adminToken;
  if (e.logLevel) cfg.logLevel = e.logLevel;
  if (opts.devnet || env.DEVNET === '1' || env.DEVNET === 'true') cfg.devnet.enabled = true;

  // UPSTREAM_<SLUG>=http://a,http://b replaces that network's HTTP upstreams (C32).
  const slugs = new Set((cfg.networks ?? []).map((n) => n.slug));
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('UPSTREAM_') || !value) continue;
    const slug = name.slice('UPSTREAM_'.length).toLowerCase().replaceAll('_', '-');
    const net = cfg.networks.find((n) => n.slug === slug);
    if (!net) throw new ConfigError(`${name}: no network with slug "${slug}" (known: ${[...slugs].join(', ')})`);
    net.upstreams = value
      .split(',')
      .map((u) => u.trim())
      .filter(Boolean)
      .map((http) => ({ http }));
  }

  // Faucet keys (C30): FAUCET_PRIVATE_KEY for every testnet, FAUCET_PRIVATE_KEY_<SLUG> for one.
  const faucetKey = str(env, 'FAUCET_PRIVATE_KEY');
  if (faucetKey) cfg.faucet.privateKey = faucetKey;
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('FAUCET_PRIVATE_KEY_') || !value) continue;
    const slug = name.slice('FAUCET_PRIVATE_KEY_'.length).toLowerCase().replaceAll('_', '-');
    if (!slugs.has(slug)) throw new ConfigError(`${name}: no network with slug "${slug}" (known: ${[...slugs].join(', ')})`);
    cfg.faucet.networks = { ...cfg.faucet.networks, [slug]: { ...cfg.faucet.networks[slug], privateKey: value } };
  }

  merged = deepMerge(merged, (opts.overrides ?? {}) as Json);
  return validateConfig(merged);
}

/** Validates a whole config object; the first error names the setting by its path. */
export function validateConfig(raw: unknown): Config {
  if (!Value.Check(ConfigSchema, raw)) {
    const first = Value.Errors(ConfigSchema, raw).First();
    const where = first?.path ? first.path.slice(1).replaceAll('/', '.') : '(root)';
    throw new ConfigError(`invalid setting ${where}: ${first?.message ?? 'does not match the schema'}`);
  }
  const cfg = raw;
  const { headersTimeoutMs, requestTimeoutMs } = cfg.server;
  if (requestTimeoutMs > 0 && headersTimeoutMs > requestTimeoutMs)
    throw new ConfigError(`server.headersTimeoutMs (${headersTimeoutMs}) must not exceed server.requestTimeoutMs (${requestTimeoutMs})`);
  const seen = new Map<string, string>();
  for (const n of cfg.networks) {
    if (seen.has(n.slug)) throw new ConfigError(`networks: slug "${n.slug}" is listed twice`);
    if (seen.has(`id:${n.chainId}`)) throw new ConfigError(`networks: chainId ${n.chainId} is listed twice`);
    seen.set(n.slug, n.slug);
    seen.set(`id:${n.chainId}`, n.slug);
    if (n.upstreams.length === 0 && !cfg.devnet.enabled)
      throw new ConfigError(`networks.${n.slug}.upstreams: at least one upstream is needed`);
  }
  return deepFreeze(cfg);
}

function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object') {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}

/** The address users see (C2). */
export function publicUrl(cfg: Config, listeningPort?: number): string {
  return (cfg.server.publicUrl ?? `http://localhost:${listeningPort ?? cfg.server.port}`).replace(/\/+$/, '');
}
