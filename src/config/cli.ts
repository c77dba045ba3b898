// The command line of `npm start -- ...`: its flags, their parsing and `--help`.
import { parseArgs } from 'node:util';
import { UsageError } from '../errors/config.ts';
import { ENV_SETTINGS } from './load.ts';

/** The command line of `npm start -- ...` (src/main.ts). */
export interface CommandLine {
  help: boolean;
  /** `--config FILE`. */
  config: string | undefined;
  devnet: boolean;
  /** With `--devnet`: the chains and the database start anew. */
  fresh: boolean;
}

// Re-exported for main.ts, which imports it with the parser.
export { UsageError } from '../errors/config.ts';

const OPTIONS = {
  config: { type: 'string' },
  devnet: { type: 'boolean', default: false },
  fresh: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

/** @throws UsageError for an unknown flag, a stray argument or a missing value. */
export function parseCommandLine(argv: string[]): CommandLine {
  try {
    const { values } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: false, strict: true });
    return { help: values.help, config: values.config, devnet: values.devnet, fresh: values.fresh };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    let what = e.message.split('\n')[0] ?? 'bad command line';
    const unknown = /Unknown option '([^']+)'/.exec(what);
    if (unknown) what = `unknown option ${unknown[1]}`;
    const positional = /Unexpected argument '([^']+)'/.exec(what);
    if (positional) what = `unexpected argument "${positional[1]}"`;
    if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && /--config/.test(what)) what = '--config needs a file: --config FILE';
    throw new UsageError(`${what.replace(/\.$/, '')}. See --help for the options.`);
  }
}

const ENV_HELP: Record<string, string> = {
  PORT: 'listen port (default 8080)',
  HOST: 'listen address (default 0.0.0.0)',
  PUBLIC_URL: 'the address users see (default http://localhost:$PORT)',
  DATABASE_URL: 'PostgreSQL URL (default: embedded PGlite under DATA_DIR)',
  DATA_DIR: 'folder of the embedded database and generated secrets (default ./data)',
  REDIS_URL: 'Redis for limits shared by several instances (default: in process)',
  WORKERS: 'processes serving the port, or auto: one per core (default 1)',
  JWT_SECRET: 'token signing secret, 32+ characters (required with DATABASE_URL)',
  KEY_ENCRYPTION_SECRET: 'encrypts stored API keys, 32+ characters (required with DATABASE_URL)',
  ADMIN_TOKEN: 'enables /api/v1/admin/* with header X-Admin-Token (16+ characters)',
  LOG_LEVEL: 'fatal, error, warn, info (default), debug, trace or silent',
  LOG_FORMAT: 'json, pretty, or auto (default: pretty in a terminal, else json)',
  METRICS_TOKEN: 'makes GET /metrics ask for Authorization: Bearer <token>',
  METRICS_PORT: 'serves /metrics on this port instead of the main one',
  FAUCET_PRIVATE_KEY: 'faucet wallet key for every testnet',
  OTEL_EXPORTER_OTLP_ENDPOINT: 'OTLP/HTTP collector for OpenTelemetry traces (default: tracing off)',
};

/** What `--help` prints. */
export function helpText(): string {
  const envLines = ENV_SETTINGS.filter((s) => ENV_HELP[s.name]).map((s) => `  ${s.name.padEnd(28)}${ENV_HELP[s.name]}`);
  return [
    'Junction: a multi-chain JSON-RPC gateway.',
    '',
    'Usage: npm start -- [options]      (or: node dist/main.js [options])',
    '',
    'Options:',
    '  --config FILE               a JSON config file merged over config/default.json (also GATEWAY_CONFIG)',
    '  --devnet                    run in front of local anvil chains, one per network (also DEVNET=1)',
    '  --fresh                     with --devnet: start the chains and the database anew',
    '  -h, --help                  print this help and exit',
    '',
    'Main environment variables:',
    ...envLines,
    `  ${'UPSTREAM_<SLUG>'.padEnd(28)}comma-separated HTTP upstreams of one network, e.g. UPSTREAM_NATIVE_TESTNET=http://a:8545`,
    `  ${'UPSTREAM_WS_<SLUG>'.padEnd(28)}its WebSocket upstreams, paired with UPSTREAM_<SLUG> by position`,
    `  ${'FAUCET_PRIVATE_KEY_<SLUG>'.padEnd(28)}faucet wallet key for one testnet`,
    `  ${'GATEWAY_CONFIG'.padEnd(28)}same as --config FILE`,
    '',
    'Every setting, its default and its variable: docs/config-reference.md. The API: /docs on the running gateway.',
    '',
  ].join('\n');
}
