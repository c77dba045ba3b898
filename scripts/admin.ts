#!/usr/bin/env node
// C52: `npm run admin -- <command>`: operators manage accounts without curl, through the running
// gateway's admin API (C8) with ADMIN_TOKEN. It never reads the database itself, so it works the
// same against one instance or many, embedded storage or PostgreSQL.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { adminTokenFile, adminUrlFile } from '../src/devnet/admin-token.ts';

const HELP = `Manage Junction accounts through a running gateway's admin API (C8, C52).

Usage: npm run admin -- <command> [arguments] [options]

Commands:
  users [--limit N] [--offset N]       list accounts, oldest first (default 50 at a time)
  find <email>                         one account: plan, overrides and the limits in force
  set-tier <email|id> <tier>           free, pro, max or enterprise; keys follow the new plan
  set-limits <email|id> [--rpm N] [--daily N] [--monthly N]
                                       per-account overrides; "none" clears one
  keys <email|id>                      the account's API keys (never their values)
  revoke-key <email|id> <keyId|prefix> revoke one key for good
  revoke-key <email|id> --all          revoke every key of the account

Options:
  --url URL      the gateway (default: env GATEWAY_URL, else PUBLIC_URL, else http://localhost:$PORT,
                 else the devnet's gateway recorded in $DATA_DIR/devnet/admin-url, else http://localhost:8080)
  --token TOKEN  the admin token (default: env ADMIN_TOKEN, else the devnet's own in
                 $DATA_DIR/devnet/admin-token, DATA_DIR default ./data, and only for the devnet's own
                 gateway; prefer these to --token: a command line shows in ps)
  --json         print the API's answers as JSON
  -h, --help     this text

The gateway serves the admin API only when it was started with ADMIN_TOKEN set
(npm start -- --devnet makes one into $DATA_DIR/devnet/admin-token, read from there). A redirect
is never followed: the token goes to the address given and nowhere else.
Exit status: 0 done, 1 refused or failed, 2 usage.
`;

const TIERS = ['free', 'pro', 'max', 'enterprise'] as const;

class UsageError extends Error {}
class Refused extends Error {}

interface AdminUser {
  id: string;
  email: string;
  name: string;
  tier: string;
  overrides: Record<'requestsPerMinute' | 'dailyLimit' | 'monthlyLimit', number | null>;
  effective: Record<'requestsPerMinute' | 'dailyLimit' | 'monthlyLimit' | 'maxKeys' | 'maxNetworks', number | null>;
  createdAt: string;
  keyChanges?: Record<string, string[]>;
}

interface AdminKey {
  id: string;
  name: string;
  prefix: string;
  status: string;
  networks: string[];
  allNetworks: boolean;
  rateLimit: number | null;
  expiresAt: string | null;
  createdAt: string;
  lastUsedAt: string | null;
}

interface DevnetAdmin {
  token: string;
  tokenFile: string;
  /** The address of the gateway the devnet runs, recorded once it listened; undefined for an older data folder. */
  url: string | undefined;
}

const readTrimmed = (file: string) => {
  try {
    return readFileSync(file, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
};

/** C52: the token `npm start -- --devnet` made for its data folder, and its gateway's address, when there is one. */
function devnetAdmin(): DevnetAdmin | undefined {
  const dataDir = process.env.DATA_DIR ?? './data';
  const tokenFile = adminTokenFile(dataDir);
  const token = readTrimmed(tokenFile);
  return token === undefined ? undefined : { token, tokenFile, url: readTrimmed(adminUrlFile(dataDir)) };
}

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/** Same scheme, host and port; the loopback names count as one host (the devnet records localhost). */
function sameGateway(a: string, b: string): boolean {
  try {
    const x = new URL(a);
    const y = new URL(b);
    if (x.origin === y.origin) return true;
    return x.protocol === y.protocol && x.port === y.port && LOOPBACK.has(x.hostname) && LOOPBACK.has(y.hostname);
  } catch {
    return false;
  }
}

function gatewayUrl(given: string | undefined, devnet: DevnetAdmin | undefined): string {
  const env = process.env;
  const url = given ?? env.GATEWAY_URL ?? env.PUBLIC_URL ?? (env.PORT ? `http://localhost:${env.PORT}` : (devnet?.url ?? 'http://localhost:8080'));
  try {
    return new URL(url).toString().replace(/\/$/, '');
  } catch {
    throw new UsageError(`--url: not a URL: ${url}`);
  }
}

function client(base: string, token: string, tokenFrom: string) {
  return async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
    let res: Response;
    try {
      res = await fetch(`${base}/api/v1/admin${path}`, {
        method,
        headers: { 'x-admin-token': token, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        // The token is for this address only: a redirect is reported, never followed with it.
        redirect: 'manual',
        signal: AbortSignal.timeout(15_000),
      });
    } catch (err) {
      const why = err instanceof Error ? ((err.cause as Error | undefined)?.message ?? err.message) : String(err);
      throw new Refused(`no answer from ${base} (${why}): is the gateway running there? (--url)`);
    }
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel();
      const to = res.headers.get('location');
      throw new Refused(`${base} answered ${res.status}, a redirect${to ? ` to ${to}` : ''}: the admin token is not sent on; if that is the gateway, pass its address with --url`);
    }
    const text = await res.text();
    let json: { success?: boolean; data?: T; error?: { code?: string; message?: string } } | undefined;
    try {
      json = JSON.parse(text) as typeof json;
    } catch {
      json = undefined;
    }
    if (res.ok && json?.success) return json.data as T;
    if (res.status === 404 && json?.error?.message?.startsWith('No route')) {
      throw new Refused(`${base} serves no admin API: start the gateway with ADMIN_TOKEN set`);
    }
    if (res.status === 401) throw new Refused(`the gateway at ${base} refused the admin token (${tokenFrom})`);
    throw new Refused(`${res.status} ${json?.error?.code ?? ''}: ${json?.error?.message ?? text.slice(0, 200)}`.replace(/ +:/, ':'));
  };
}

type Call = ReturnType<typeof client>;

async function account(call: Call, who: string | undefined): Promise<AdminUser> {
  if (!who) throw new UsageError('name the account: an e-mail address or an account id');
  if (who.includes('@')) {
    const [user] = await call<AdminUser[]>('GET', `/users?email=${encodeURIComponent(who)}`);
    if (!user) throw new Refused(`no account with the e-mail ${who}`);
    return user;
  }
  return call<AdminUser>('GET', `/users/${encodeURIComponent(who)}`);
}

const limit = (n: number | null) => (n === null ? 'unlimited' : n.toLocaleString('en-US'));

function describeUser(u: AdminUser): string {
  const o = u.overrides;
  const e = u.effective;
  const overridden = (Object.keys(o) as Array<keyof typeof o>).filter((k) => o[k] !== null).map((k) => `${k} ${o[k]}`);
  return [
    `${u.email}  (${u.name}, id ${u.id})`,
    `  plan ${u.tier}; since ${u.createdAt.slice(0, 10)}`,
    `  limits: ${limit(e.requestsPerMinute)} requests/min, ${limit(e.dailyLimit)} a day, ${limit(e.monthlyLimit)} compute units a month, ${limit(e.maxKeys)} keys, ${limit(e.maxNetworks)} networks`,
    `  overrides: ${overridden.length ? overridden.join(', ') : 'none'}`,
  ].join('\n');
}

function describeKeys(keys: AdminKey[]): string {
  if (keys.length === 0) return 'no keys';
  return keys
    .map((k) => `${k.prefix}  ${k.status.padEnd(8)} ${k.name}  (id ${k.id}; ${k.allNetworks ? 'every network of the plan: ' : ''}${k.networks.join(', ')}; rate ${k.rateLimit ?? 'plan'}; last used ${k.lastUsedAt ?? 'never'})`)
    .join('\n');
}

function parseLimit(flag: string, v: string | undefined): number | null | undefined {
  if (v === undefined) return undefined;
  if (v === 'none') return null;
  if (!/^[1-9][0-9]{0,9}$/.test(v) || Number(v) > 2_147_483_647) throw new UsageError(`--${flag}: a whole number from 1 to 2147483647, or "none"`);
  return Number(v);
}

async function run(argv: string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        url: { type: 'string' },
        token: { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
        limit: { type: 'string' },
        offset: { type: 'string' },
        rpm: { type: 'string' },
        daily: { type: 'string' },
        monthly: { type: 'string' },
        all: { type: 'boolean', default: false },
      },
    });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const { values, positionals } = parsed;
  const [command, ...args] = positionals;
  if (values.help || !command) {
    process.stdout.write(HELP);
    if (!command && !values.help) process.exitCode = 2;
    return;
  }
  const devnet = devnetAdmin();
  const base = gatewayUrl(values.url, devnet);
  // C52: the devnet's token goes only to the devnet's own gateway. Sent to another one it would be
  // refused (and told to a gateway it is not for): there, no token is a usage error.
  const fromDevnet = devnet?.url !== undefined && sameGateway(devnet.url, base) ? devnet.token : undefined;
  const token = values.token ?? process.env.ADMIN_TOKEN ?? fromDevnet;
  if (!token) {
    const why = devnet ? `; the devnet's token in ${devnet.tokenFile} is for ${devnet.url ? `its gateway at ${devnet.url}, not ${base}` : 'a devnet that recorded no address: start it again'}` : '';
    throw new UsageError(`no admin token: set ADMIN_TOKEN (the one the gateway was started with) or pass --token${why}`);
  }
  const tokenFrom = values.token !== undefined ? '--token' : process.env.ADMIN_TOKEN !== undefined ? 'ADMIN_TOKEN' : `the devnet's, from ${devnet?.tokenFile}`;
  const call = client(base, token, tokenFrom);
  const print = (json: unknown, text: string) => process.stdout.write(`${values.json ? JSON.stringify(json, null, 2) : text}\n`);

  switch (command) {
    case 'users': {
      const q = new URLSearchParams();
      if (values.limit !== undefined) q.set('limit', values.limit);
      if (values.offset !== undefined) q.set('offset', values.offset);
      const users = await call<AdminUser[]>('GET', `/users${q.size ? `?${q}` : ''}`);
      print(users, users.length ? users.map((u) => `${u.email.padEnd(32)} ${u.tier.padEnd(10)} ${u.id}`).join('\n') : 'no accounts');
      return;
    }
    case 'find': {
      const user = await account(call, args[0]);
      print(user, describeUser(user));
      return;
    }
    case 'set-tier': {
      const tier = args[1];
      if (!tier || !(TIERS as readonly string[]).includes(tier)) throw new UsageError(`set-tier <email|id> <tier>: the tier is one of ${TIERS.join(', ')}`);
      const user = await account(call, args[0]);
      const changed = await call<AdminUser>('PATCH', `/users/${encodeURIComponent(user.id)}`, { tier });
      const moved = Object.entries(changed.keyChanges ?? {}).filter(([, ids]) => ids.length > 0);
      print(changed, `${describeUser(changed)}${moved.length ? `\n  keys brought within the plan: ${moved.map(([what, ids]) => `${what} ${ids.length}`).join(', ')}` : ''}`);
      return;
    }
    case 'set-limits': {
      const limits: Record<string, number | null> = {};
      for (const [flag, field] of [['rpm', 'requestsPerMinute'], ['daily', 'dailyLimit'], ['monthly', 'monthlyLimit']] as const) {
        const v = parseLimit(flag, values[flag]);
        if (v !== undefined) limits[field] = v;
      }
      if (Object.keys(limits).length === 0) throw new UsageError('set-limits <email|id> needs at least one of --rpm, --daily, --monthly (a number, or "none" to clear)');
      const user = await account(call, args[0]);
      const changed = await call<AdminUser>('PATCH', `/users/${encodeURIComponent(user.id)}`, { limits });
      print(changed, describeUser(changed));
      return;
    }
    case 'keys': {
      const user = await account(call, args[0]);
      const keys = await call<AdminKey[]>('GET', `/users/${encodeURIComponent(user.id)}/keys`);
      print(keys, describeKeys(keys));
      return;
    }
    case 'revoke-key': {
      const which = args[1];
      if (!values.all && !which) throw new UsageError('revoke-key <email|id> <keyId|prefix>, or --all');
      const user = await account(call, args[0]);
      const keys = await call<AdminKey[]>('GET', `/users/${encodeURIComponent(user.id)}/keys`);
      const chosen = values.all ? keys.filter((k) => k.status !== 'revoked') : keys.filter((k) => k.id === which || k.prefix === which);
      if (!values.all && chosen.length === 0) throw new Refused(`${user.email} has no key ${which} (see: keys ${args[0]})`);
      const revoked: AdminKey[] = [];
      for (const k of chosen) revoked.push(await call<AdminKey>('POST', `/users/${encodeURIComponent(user.id)}/keys/${encodeURIComponent(k.id)}/revoke`));
      print(revoked, revoked.length ? `revoked:\n${describeKeys(revoked)}` : 'no key to revoke');
      return;
    }
    default:
      throw new UsageError(`unknown command "${command}" (see --help)`);
  }
}

try {
  await run(process.argv.slice(2));
} catch (err) {
  if (err instanceof UsageError) {
    process.stderr.write(`admin: ${err.message}\n`);
    process.exitCode = 2;
  } else if (err instanceof Refused) {
    process.stderr.write(`admin: ${err.message}\n`);
    process.exitCode = 1;
  } else {
    throw err;
  }
}
