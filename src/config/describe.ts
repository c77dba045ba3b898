// Words for settings: what a schema admits, where a setting sits (networks by slug), and how a
// value may be shown without giving a secret away. Start errors and the generated reference
// (src/config/reference.ts) both speak through these.
import { Kind, type TSchema } from '@sinclair/typebox';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** Settings whose value is never shown: secrets. Paths as `settingPath` writes them. */
const SECRET_PATHS = [/^auth\.jwtSecret$/, /^keys\.encryptionSecret$/, /^admin\.token$/, /^metrics\.token$/, /^faucet\.privateKey$/, /^faucet\.networks\.[^.]+\.privateKey$/, /^intents\.solverPrivateKey$/, /^intents\.solverPrivateKeys\.[^.]+$/];

export function isSecretPath(path: string): boolean {
  return SECRET_PATHS.some((re) => re.test(path));
}

/** A URL's password as `***` (DATABASE_URL, REDIS_URL, an upstream with credentials); anything else as is. */
export function maskUrl(text: string): string {
  return text.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/:@\s]*:)([^@/\s]+)@/i, '$1***@');
}

/** A value as a message may show it: JSON, URL passwords masked, long ones shortened. */
export function showValue(value: unknown, secret = false): string {
  if (secret) return typeof value === 'string' ? `(hidden, ${value.length} characters)` : '(hidden)';
  if (value === undefined) return '(missing)';
  let text = typeof value === 'string' ? JSON.stringify(maskUrl(value)) : (JSON.stringify(value) ?? typeof value);
  if (text.length > 100) text = `${text.slice(0, 97)}...`;
  return text;
}

const isObject = (v: unknown): v is Record<string, Json> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A JSON pointer into the config (`/networks/0/upstreams/1/http`) as the user would write it:
 * `networks.native-mainnet.upstreams[1].http`. A network is named by its slug, never its index.
 */
export function settingPath(pointer: string | string[], root: unknown): string {
  const segments = typeof pointer === 'string' ? pointerSegments(pointer) : pointer;
  let out = '';
  let node: unknown = root;
  let parentKey = '';
  for (const seg of segments) {
    if (Array.isArray(node) && /^\d+$/.test(seg)) {
      const item: unknown = node[Number(seg)];
      const slug = parentKey === 'networks' && isObject(item) && typeof item.slug === 'string' && item.slug ? item.slug : undefined;
      out += slug ? `.${slug}` : `[${seg}]`;
      node = item;
    } else {
      out += out ? `.${seg}` : seg;
      node = isObject(node) ? node[seg] : undefined;
    }
    parentKey = seg;
  }
  return out || '(the whole config)';
}

export function pointerSegments(pointer: string): string[] {
  return pointer
    .split('/')
    .slice(1)
    .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'));
}

export function valueAt(root: unknown, segments: string[]): unknown {
  let node = root;
  for (const seg of segments) {
    if (Array.isArray(node)) node = node[Number(seg)];
    else if (isObject(node)) node = node[seg];
    else return undefined;
  }
  return node;
}

/** The sub-schema at `segments`, following the value through unions of objects. */
export function schemaAt(schema: TSchema, segments: string[], value?: unknown): TSchema | undefined {
  let s: TSchema | undefined = schema;
  let v = value;
  for (const seg of segments) {
    if (!s) return undefined;
    s = unwrapUnion(s, v);
    s = child(s, seg);
    v = Array.isArray(v) ? v[Number(seg)] : isObject(v) ? v[seg] : undefined;
  }
  return s;
}

/** A union of objects narrowed to the member the value names by its `type` (or that has the keys). */
export function unwrapUnion(s: TSchema, value: unknown): TSchema {
  if (s[Kind] !== 'Union') return s;
  const objects = (s.anyOf as TSchema[]).filter((m) => m[Kind] === 'Object');
  if (objects.length === 0) return s;
  if (isObject(value)) {
    const typed = objects.find((m) => {
      const t = (m.properties as Record<string, TSchema>).type;
      return t?.const !== undefined && t.const === value.type;
    });
    if (typed) return typed;
  }
  return objects[0] as TSchema;
}

function child(s: TSchema, seg: string): TSchema | undefined {
  switch (s[Kind]) {
    case 'Object':
      return (s.properties as Record<string, TSchema>)[seg];
    case 'Array':
      return s.items as TSchema;
    case 'Record':
      return Object.values(s.patternProperties as Record<string, TSchema>)[0];
    default:
      return undefined;
  }
}

function range(s: TSchema): string {
  const min = s.minimum as number | undefined;
  const max = s.maximum as number | undefined;
  if (min !== undefined && max !== undefined) return ` from ${min} to ${max}`;
  if (min !== undefined) return min === 0 ? ' (0 or more)' : ` of at least ${min}`;
  if (max !== undefined) return ` of at most ${max}`;
  return '';
}

/** What a schema admits, in words: "one of fatal, error, ...", "a whole number from 0 to 65535". */
export function allowed(s: TSchema): string {
  if (typeof s.allowed === 'string') return s.allowed;
  switch (s[Kind]) {
    case 'Union': {
      const members = s.anyOf as TSchema[];
      if (members.every((m) => m[Kind] === 'Literal')) return `one of ${members.map((m) => String(m.const)).join(', ')}`;
      if (members.every((m) => m[Kind] === 'Object')) return members.map((m) => objectShape(m)).join(' or ');
      return members.map((m) => allowed(m)).join(' or ');
    }
    case 'Literal':
      return JSON.stringify(s.const);
    case 'Null':
      return 'null';
    case 'Boolean':
      return 'true or false';
    case 'Integer':
      return `a whole number${range(s)}`;
    case 'Number':
      return `a number${range(s)}`;
    case 'String': {
      const min = s.minLength as number | undefined;
      const max = s.maxLength as number | undefined;
      if (s.pattern) return `text matching ${String(s.pattern)}`;
      if (s.format === 'uri') return 'a URL';
      if (min !== undefined && max !== undefined) return `text of ${min} to ${max} characters`;
      if (min !== undefined && min > 1) return `text of at least ${min} characters`;
      if (min === 1) return 'text (not empty)';
      return 'text';
    }
    case 'Array': {
      const min = s.minItems as number | undefined;
      return `a list${min ? ` of at least ${min}` : ''} of ${plural(allowed(s.items as TSchema))}`;
    }
    case 'Record':
      return `an object of ${allowed(Object.values(s.patternProperties as Record<string, TSchema>)[0] as TSchema)} by name`;
    case 'Object':
      return objectShape(s);
    default:
      return 'a valid value';
  }
}

function objectShape(s: TSchema): string {
  const props = s.properties as Record<string, TSchema>;
  const required = new Set((s.required as string[] | undefined) ?? []);
  const keys = Object.entries(props).map(([k, p]) => (p[Kind] === 'Literal' ? `"${k}": ${JSON.stringify(p.const)}` : required.has(k) ? k : `${k}?`));
  return `an object {${keys.join(', ')}}`;
}

function plural(text: string): string {
  return text.replace(/^an? /, '').replace(/^(whole number|number|object|URL)/, '$1s');
}
