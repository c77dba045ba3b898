// docs/config-reference.md, generated from the schema's descriptions and config/default.json
// (`npm run docs:config`); test/config/reference.test.ts fails when the file differs.
import { readFileSync } from 'node:fs';
import { Kind, type TSchema } from '@sinclair/typebox';
import { allowed, isSecretPath } from './describe.ts';
import { DEFAULT_CONFIG_FILE, ENV_PATTERNS, ENV_SETTINGS } from './load.ts';
import { ConfigSchema } from './schema.ts';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

interface Row {
  path: string;
  defaultText: string;
  env: string;
  allowedText: string;
  meaning: string;
}

const isObject = (v: unknown): v is Record<string, Json> => typeof v === 'object' && v !== null && !Array.isArray(v);
const scalarKinds = new Set(['Integer', 'Number', 'String', 'Boolean', 'Literal', 'Null']);

function isScalar(s: TSchema): boolean {
  if (scalarKinds.has(s[Kind])) return true;
  if (s[Kind] === 'Union') return (s.anyOf as TSchema[]).every((m) => isScalar(m));
  return false;
}

/** `<slug>`, `<method>` or `<symbol>`: what a record is keyed by, from its description. */
function keyName(s: TSchema): string {
  const d = String(s.description ?? '');
  if (/slug|testnet|network/.test(d)) return '<slug>';
  if (/method/.test(d)) return '<method>';
  if (/symbol/.test(d)) return '<symbol>';
  return '<name>';
}

function showDefault(v: unknown): string {
  if (v === undefined) return '';
  const text = JSON.stringify(v);
  if (text.length <= 60) return `\`${text}\``;
  if (Array.isArray(v)) return `${v.length} entries in config/default.json`;
  if (isObject(v)) return `${Object.keys(v).length} entries in config/default.json`;
  return `\`${text.slice(0, 57)}...\``;
}

const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

/** `inherited`: the parent's description, for keys that have none of their own (the plan tiers). */
function rows(schema: TSchema, path: string, defaults: unknown, out: Row[], inherited = ''): void {
  const envs = [...ENV_SETTINGS.filter((e) => e.path === path).map((e) => e.name), ...ENV_PATTERNS.filter((e) => e.path === path).map((e) => e.name)];
  const row = (allowedText: string) =>
    out.push({
      path,
      defaultText: path === 'networks' && Array.isArray(defaults) ? `the ${defaults.length} networks below` : showDefault(defaults),
      env: envs.map((e) => `\`${e}\``).join(', '),
      allowedText,
      meaning: `${String(schema.description ?? inherited)}${isSecretPath(path) || isSecretPath(`${path}.x`) ? ' (secret: never logged nor shown in errors)' : ''}`,
    });
  const kind = schema[Kind];
  if (isScalar(schema) || (kind === 'Union' && (schema.anyOf as TSchema[]).some((m) => m[Kind] === 'Object' && (m.properties as Record<string, TSchema>).type))) {
    row(allowed(schema));
    return;
  }
  if (kind === 'Union') {
    // A list or null (intents.routes): the row, then the items.
    row(allowed(schema));
    const list = (schema.anyOf as TSchema[]).find((m) => m[Kind] === 'Array');
    const items = list?.items as TSchema | undefined;
    if (items && items[Kind] === 'Object') children(items, `${path}[]`, undefined, out);
    return;
  }
  if (kind === 'Object') {
    children(schema, path, defaults, out, String(schema.description ?? inherited));
    return;
  }
  if (kind === 'Array') {
    const items = schema.items as TSchema;
    if (items[Kind] === 'Object') {
      row(`a list of objects${schema.minItems ? ` (at least ${String(schema.minItems)})` : ''}`);
      children(items, `${path}[]`, undefined, out);
    } else row(`a list; each: ${allowed(items)}`);
    return;
  }
  if (kind === 'Record') {
    const value = Object.values(schema.patternProperties as Record<string, TSchema>)[0] as TSchema;
    if (value[Kind] === 'Object') {
      row(`an object of objects by ${keyName(schema).slice(1, -1)}`);
      children(value, `${path}.${keyName(schema)}`, undefined, out);
    } else row(`an object: ${keyName(schema)} to ${allowed(value)}`);
    return;
  }
  row(allowed(schema));
}

function children(schema: TSchema, path: string, defaults: unknown, out: Row[], inherited = ''): void {
  const required = new Set((schema.required as string[] | undefined) ?? []);
  for (const [key, child] of Object.entries(schema.properties as Record<string, TSchema>)) {
    const before = out.length;
    rows(child, path ? `${path}.${key}` : key, isObject(defaults) ? defaults[key] : undefined, out, inherited);
    // Keys that may be left out are marked so where they appear first.
    const first = out[before];
    if (!required.has(key) && first && !first.path.endsWith(' (optional)')) first.path = `${first.path} (optional)`;
  }
}

/** The whole reference as Markdown. */
export function configReference(): string {
  const defaults = JSON.parse(readFileSync(DEFAULT_CONFIG_FILE, 'utf8')) as Record<string, Json>;
  const lines: string[] = [
    '# Configuration reference',
    '',
    '<!-- Generated by `npm run docs:config` from src/config/schema.ts and config/default.json; do not edit by hand. -->',
    '',
    'Settings come from `config/default.json`, then the file of `--config FILE` (or `GATEWAY_CONFIG`),',
    'then the environment variables named below, then (under `--devnet`) the local chains. In a config',
    'file objects merge key by key and lists replace, except `networks`: its entries merge into the',
    'shipped networks by `slug` (a known slug changes that network only, its `upstreams` replaced as a',
    'whole; a new slug adds a network; `"enabled": false` leaves one out). For example:',
    '',
    '```json',
    '{',
    '  "server": { "publicUrl": "https://rpc.example.com" },',
    '  "networks": [',
    '    { "slug": "ethereum", "upstreams": [{ "http": "https://my-node.example", "ws": "wss://my-node.example", "name": "mine" }] },',
    '    { "slug": "bsc-testnet", "enabled": false }',
    '  ]',
    '}',
    '```',
    '',
    '`UPSTREAM_<SLUG>` (comma-separated) replaces a network\'s HTTP upstreams; `UPSTREAM_WS_<SLUG>` gives',
    'their WebSocket addresses by position (the first to the first; an empty place, as in',
    '`ws://a:8546,,ws://c:8546`, leaves that upstream without one). `<SLUG>` is the slug in capitals with',
    '`_` for `-`: `UPSTREAM_NATIVE_TESTNET`. A bad setting stops the start with one line naming the',
    'variable or the setting (a network by its slug), the value (never a secret\'s) and what is allowed.',
    '',
    '`[]` in a path stands for every item of a list, `<slug>` and the like for every key of an object.',
    '',
  ];
  for (const [key, schema] of Object.entries(ConfigSchema.properties as Record<string, TSchema>)) {
    const out: Row[] = [];
    rows(schema, key, defaults[key], out);
    lines.push(`## ${key}`, '');
    if (schema[Kind] === 'Object' && schema.description) lines.push(`${String(schema.description)[0]?.toUpperCase()}${String(schema.description).slice(1)}.`, '');
    lines.push('| Setting | Default | Environment | Allowed | Meaning |', '|---|---|---|---|---|');
    for (const r of out) lines.push(`| \`${r.path.replace(' (optional)', '`&nbsp;(optional)')}${r.path.endsWith(' (optional)') ? '' : '`'} | ${cell(r.defaultText)} | ${r.env} | ${cell(r.allowedText)} | ${cell(r.meaning)} |`);
    lines.push('');
  }
  const nets = (defaults.networks as Array<{ slug: string; name: string; chainId: number; type: string; upstreams: Array<Record<string, string>> }> | undefined) ?? [];
  lines.push('## The shipped networks', '', '| slug | name | chain id | type | upstreams |', '|---|---|---|---|---|');
  for (const n of nets) {
    const ups = n.upstreams.map((u) => `${u.http}${u.ws ? ` (ws ${u.ws})` : ''}`).join(', ');
    lines.push(`| \`${n.slug}\` | ${n.name} | ${n.chainId} | ${n.type} | ${cell(ups)} |`);
  }
  lines.push('');
  return lines.join('\n');
}
