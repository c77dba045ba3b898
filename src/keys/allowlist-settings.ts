// A key's stored allowlist settings (origins, IPs, methods, contracts, JWT keys): their
// validation, normal form and limits.
import { createHash, createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';
import { HttpError } from '../errors/http.ts';
import { NotAPublicKeyError } from '../errors/domain.ts';

/** Most entries a key's list may hold (each list on its own). */
export const MAX_LIST_ENTRIES = 100;
/** Most JWT public keys one API key may register. */
export const MAX_JWT_KEYS = 5;

export type JwtAlg = 'ES256' | 'RS256' | 'EdDSA';

/** A public key the owner signs request JWTs with; `id` (a fingerprint of the key) is the JWT `kid`. */
export interface JwtPublicKey {
  id: string;
  name: string;
  alg: JwtAlg;
  /** SPKI PEM. */
  publicKey: string;
}

/**
 * A key's allowlists and JWT option, as stored (`api_keys.access`; null when nothing is set).
 * An empty list allows everything of its kind; lists are ANDed, entries of one list ORed.
 */
export interface KeyAccessSettings {
  allowedOrigins: string[];
  /** With allowedOrigins: a request without Origin (a server) is refused too. Default true. */
  requireOrigin: boolean;
  allowedIps: string[];
  allowedMethods: string[];
  /** 0x + 40 hex, lower case. */
  allowedContracts: string[];
  requireJwt: boolean;
  jwtPublicKeys: JwtPublicKey[];
}

/** What create and PATCH accept (each member optional; a list given replaces the stored one). */
export interface KeyAccessInput {
  allowedOrigins?: string[] | undefined;
  requireOrigin?: boolean | undefined;
  allowedIps?: string[] | undefined;
  allowedMethods?: string[] | undefined;
  allowedContracts?: string[] | undefined;
  requireJwt?: boolean | undefined;
  jwtPublicKeys?: Array<{ name: string; publicKey: string | Record<string, unknown> }> | undefined;
}

export const ACCESS_FIELDS = ['allowedOrigins', 'requireOrigin', 'allowedIps', 'allowedMethods', 'allowedContracts', 'requireJwt', 'jwtPublicKeys'] as const;

export const EMPTY_ACCESS: Readonly<KeyAccessSettings> = Object.freeze({
  allowedOrigins: [],
  requireOrigin: true,
  allowedIps: [],
  allowedMethods: [],
  allowedContracts: [],
  requireJwt: false,
  jwtPublicKeys: [],
});

/** Whether the input names any access setting. */
export function hasAccessInput(input: KeyAccessInput): boolean {
  return ACCESS_FIELDS.some((f) => input[f] !== undefined);
}

interface Problem {
  field: string;
  message: string;
}

/**
 * The settings after applying `input` to `current`, validated and normalised; null when nothing
 * is restricted any more (so the RPC path has nothing to check). Bad values are one 400
 * VALIDATION_ERROR naming each field (C7); nothing is changed then.
 *
 * @param knownMethods the method names the key's plan allows (allowedMethods must be among them).
 */
export function applyAccessInput(current: KeyAccessSettings | null, input: KeyAccessInput, knownMethods: ReadonlySet<string>): KeyAccessSettings | null {
  const next: KeyAccessSettings = { ...EMPTY_ACCESS, ...(current ?? {}) };
  const problems: Problem[] = [];
  if (input.allowedOrigins !== undefined) next.allowedOrigins = normaliseList('allowedOrigins', input.allowedOrigins, normaliseOrigin, problems);
  if (input.allowedIps !== undefined) next.allowedIps = normaliseList('allowedIps', input.allowedIps, normaliseIp, problems);
  if (input.allowedMethods !== undefined) {
    next.allowedMethods = normaliseList(
      'allowedMethods',
      input.allowedMethods,
      (m) => (!/^[A-Za-z][A-Za-z0-9_]{0,99}$/.test(m) ? 'must be an exact method name' : knownMethods.has(m) ? m : 'is not a method this key\'s plan allows'),
      problems,
    );
  }
  if (input.allowedContracts !== undefined) next.allowedContracts = normaliseList('allowedContracts', input.allowedContracts, normaliseAddressEntry, problems);
  if (input.requireOrigin !== undefined) next.requireOrigin = input.requireOrigin;
  if (input.requireJwt !== undefined) next.requireJwt = input.requireJwt;
  if (input.jwtPublicKeys !== undefined) next.jwtPublicKeys = parseJwtKeys(input.jwtPublicKeys, problems);
  if (next.requireJwt && next.jwtPublicKeys.length === 0 && problems.length === 0) {
    problems.push({ field: 'body.requireJwt', message: 'needs at least one entry in jwtPublicKeys' });
  }
  if (problems.length > 0) {
    throw new HttpError('VALIDATION_ERROR', `Invalid ${[...new Set(problems.map((p) => p.field.replace(/^body\.|\..*$/g, '')))].join(', ')}`, { details: problems });
  }
  const restricted =
    next.allowedOrigins.length > 0 || next.allowedIps.length > 0 || next.allowedMethods.length > 0 || next.allowedContracts.length > 0 || next.requireJwt;
  // Keys registered without requireJwt are kept (the owner may switch it on later).
  return restricted || next.jwtPublicKeys.length > 0 || !next.requireOrigin ? next : null;
}

/** The settings as the API shows them (every member present; defaults when none are stored). */
export function accessView(stored: KeyAccessSettings | null): KeyAccessSettings {
  return { ...EMPTY_ACCESS, ...(stored ?? {}) };
}

function normaliseList(name: string, values: string[], one: (v: string) => string, problems: Problem[]): string[] {
  if (values.length > MAX_LIST_ENTRIES) {
    problems.push({ field: `body.${name}`, message: `at most ${MAX_LIST_ENTRIES} entries` });
    return [];
  }
  const out = new Set<string>();
  values.forEach((raw, i) => {
    const field = `body.${name}.${i}`;
    // NUL and other control characters never belong in any of these.
    if (typeof raw !== 'string' || hasControl(raw)) {
      problems.push({ field, message: 'must not hold control characters' });
      return;
    }
    const v = raw.trim();
    if (v.length === 0 || v.length > 256) {
      problems.push({ field, message: 'must be 1 to 256 characters' });
      return;
    }
    const n = one(v);
    // The normalisers answer the normal form, or a sentence (which never looks like an entry).
    if (n.includes(' ')) problems.push({ field, message: n });
    else out.add(n);
  });
  return [...out];
}

function hasControl(v: string): boolean {
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return true;
  }
  return false;
}

const ORIGIN = /^([a-z][a-z0-9+.-]*):\/\/(\*\.)?([a-z0-9-]+(?:\.[a-z0-9-]+)*|\[[0-9a-f:.]+\])(?::(\d{1,5}))?\/?$/;
const DEFAULT_PORT: Record<string, string> = { http: '80', https: '443' };

/** `scheme://host[:port]`, host optionally `*.` + a domain (any subdomain of it); lower case, no default port, no trailing slash. */
export function normaliseOrigin(v: string): string {
  const m = ORIGIN.exec(v.toLowerCase());
  if (!m) return 'must be an origin: scheme://host[:port], e.g. https://app.example.com or https://*.example.com';
  const [, scheme = '', wild = '', host = '', port] = m;
  if (wild && (host.startsWith('[') || !host.includes('.'))) return 'a wildcard must stand for subdomains of a domain, e.g. https://*.example.com';
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) return 'has a port out of range';
  // An IPv6 host as a browser writes it in Origin (compressed, lower case), or refused when it is none.
  let name = host;
  if (host.startsWith('[')) {
    if (isIP(host.slice(1, -1)) !== 6) return 'has a host in brackets that is not an IPv6 address';
    name = new URL(`http://${host}`).host;
  }
  const keepPort = port !== undefined && DEFAULT_PORT[scheme] !== port;
  return `${scheme}://${wild}${name}${keepPort ? `:${port}` : ''}`;
}

/** An address or a CIDR, v4 or v6. */
export function normaliseIp(v: string): string {
  const [address = '', prefix, extra] = v.toLowerCase().split('/');
  const family = isIP(address);
  // A zone id (fe80::1%eth0) names an interface of the client's host, never the address a request comes from.
  if (family === 0 || extra !== undefined || address.includes('%')) return 'must be an IP address or a CIDR range, e.g. 203.0.113.7 or 2001:db8::/32';
  if (prefix === undefined) return address;
  const max = family === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > max) return `has a prefix length that is not 0 to ${max}`;
  return `${address}/${Number(prefix)}`;
}

const ADDRESS = /^(?:0x|xdc)([0-9a-f]{40})$/i;

/** `0x…` or `xdc…`, any case, to `0x` lower case; null when it is no address. */
export function normaliseAddress(v: string): string | null {
  const m = ADDRESS.exec(v);
  return m?.[1] === undefined ? null : `0x${m[1].toLowerCase()}`;
}

function normaliseAddressEntry(v: string): string {
  return normaliseAddress(v) ?? 'must be an address: 0x (or xdc) and 40 hex digits';
}

function parseJwtKeys(list: Array<{ name: string; publicKey: string | Record<string, unknown> }>, problems: Problem[]): JwtPublicKey[] {
  if (list.length > MAX_JWT_KEYS) {
    problems.push({ field: 'body.jwtPublicKeys', message: `at most ${MAX_JWT_KEYS} keys` });
    return [];
  }
  const out = new Map<string, JwtPublicKey>();
  list.forEach((entry, i) => {
    const field = `body.jwtPublicKeys.${i}.publicKey`;
    let key: KeyObject;
    try {
      const pk = entry.publicKey;
      // A private key would be turned into its public half by createPublicKey: refused, never stored.
      if (typeof pk === 'string' ? pk.includes('\u0000') || /PRIVATE KEY/.test(pk) : 'd' in pk) throw new NotAPublicKeyError('not a public key');
      key = typeof pk === 'string' ? createPublicKey(pk) : createPublicKey({ key: pk as JsonWebKey, format: 'jwk' });
      if (key.type !== 'public') throw new NotAPublicKeyError('not public');
    } catch {
      problems.push({ field, message: 'must be a public key: PEM (SPKI) or a JWK without private members' });
      return;
    }
    const alg = algOf(key);
    if (typeof alg !== 'string' || !['ES256', 'RS256', 'EdDSA'].includes(alg)) {
      problems.push({ field, message: alg ?? 'must be a P-256 (ES256), RSA of 2048 bits or more (RS256) or Ed25519 (EdDSA) key' });
      return;
    }
    const der = key.export({ type: 'spki', format: 'der' });
    const id = createHash('sha256').update(der).digest('hex').slice(0, 16);
    out.set(id, { id, name: entry.name.trim(), alg: alg as JwtAlg, publicKey: key.export({ type: 'spki', format: 'pem' }).toString() });
  });
  return [...out.values()];
}

/** The JWT algorithm of a public key, or why it cannot sign request JWTs. */
function algOf(key: KeyObject): string | undefined {
  const d = key.asymmetricKeyDetails;
  switch (key.asymmetricKeyType) {
    case 'ec':
      return d?.namedCurve === 'prime256v1' ? 'ES256' : 'an EC key must be on P-256 (ES256)';
    case 'rsa':
      return (d?.modulusLength ?? 0) >= 2048 ? 'RS256' : 'an RSA key must have at least 2048 bits';
    case 'ed25519':
      return 'EdDSA';
    default:
      return undefined;
  }
}
