// `npm run api:types`: writes web/src/api-types.ts, the dashboard's types of the REST API, from the
// gateway's own OpenAPI document (/docs/json of an in-memory app), so that the dashboard never
// copies the API by hand. `--check` only says whether the file is up to date (exit 1 when not);
// test/web/api-types.test.ts does the same in the test suite.
//
// The route schemas are JSON Schema (TypeBox), turned into TypeScript here: objects, arrays,
// records, enums and consts, unions (anyOf, oneOf, a list of types), null. A schema with a
// `title` (WhaleAlert, ApiKey, ...) becomes one named type, used wherever the API gives that
// object; each operation gets `<OperationId>Data` (what its answer's `data` holds) and, when it
// takes input, `<OperationId>Body` / `<OperationId>Query`; `ApiRoutes` maps method and path to
// them for web/src/api.ts.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startTestApp } from '../test/support/app.ts';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Schema = { [k: string]: Json };
type Doc = Schema;

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const API_TYPES_FILE = path.join(ROOT, 'web/src/api-types.ts');
/** The REST API the dashboard calls; the JSON-RPC, WebSocket and health addresses are not its business. */
const PREFIX = '/api/v1/';
const METHODS = ['get', 'post', 'patch', 'put', 'delete'] as const;

/** The OpenAPI document of the gateway with the default configuration (in memory, nothing listening). */
export async function apiDocument(): Promise<Doc> {
  const t = await startTestApp({});
  try {
    const res = await t.app.inject({ method: 'GET', url: '/docs/json' });
    if (res.statusCode !== 200) throw new Error(`GET /docs/json answered ${res.statusCode}`);
    return res.json<Doc>();
  } finally {
    await t.close();
  }
}

const isObj = (v: Json | undefined): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);
const pascal = (id: string) => id.charAt(0).toUpperCase() + id.slice(1);
const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const key = (name: string) => (IDENT.test(name) ? name : `'${name.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`);
const literal = (v: Json) => (typeof v === 'string' ? `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'` : JSON.stringify(v));

/** A TSDoc line (or block) for a description; `*\/` cannot end it early. */
function doc(text: Json | undefined, indent: string): string {
  if (typeof text !== 'string' || !text.trim()) return '';
  const lines = text.replace(/\*\//g, '*\\/').trim().split('\n');
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} * ${l}`.trimEnd()).join('\n')}\n${indent} */\n`;
}

/** Where a schema is used: in an answer every required property is there; in input one with a default may be left out. */
type Mode = 'output' | 'input';

class Generator {
  /** Named types (schemas with a title, components), in the order first met: name -> declaration. */
  readonly named = new Map<string, string>();
  private readonly seenFrom = new Map<string, string>();
  private readonly resolving = new Set<string>();

  constructor(private readonly document: Doc) {}

  /** The TypeScript type of `s`; nested lines are indented from `indent`. */
  type(s: Json | undefined, indent: string, mode: Mode, where: string): string {
    if (s === true || s === undefined || !isObj(s)) return 'unknown';
    if (typeof s.$ref === 'string') return this.ref(s.$ref, mode, where);
    if (typeof s.title === 'string') return this.name(s.title, s, mode, where);
    return this.bare(s, indent, mode, where);
  }

  private ref(ref: string, mode: Mode, where: string): string {
    const m = /^#\/components\/schemas\/(.+)$/.exec(ref);
    const target = m ? (this.document.components as Schema | undefined)?.schemas : undefined;
    const s = m && isObj(target) ? target[m[1]!] : undefined;
    if (!m || !isObj(s)) throw new Error(`${where}: cannot follow $ref ${ref}`);
    return this.name(m[1]!, s, mode, where);
  }

  /** A named type: declared once; the same name met again must give the same declaration. */
  private name(title: string, s: Schema, mode: Mode, where: string): string {
    if (!IDENT.test(title)) throw new Error(`${where}: the title ${JSON.stringify(title)} is not a type name`);
    if (this.resolving.has(title)) return title; // recursive: the declaration is being written
    this.resolving.add(title);
    let body: string;
    try {
      body = this.bare(s, '', mode, where);
    } finally {
      this.resolving.delete(title);
    }
    const declaration = `${doc(s.description, '')}${body.startsWith('{') ? `export interface ${title} ${body}` : `export type ${title} = ${body};`}`;
    const earlier = this.named.get(title);
    if (earlier !== undefined && earlier !== declaration) {
      throw new Error(`two different schemas are titled ${title} (${this.seenFrom.get(title)} and ${where}): give one another title`);
    }
    if (earlier === undefined) {
      this.named.set(title, declaration);
      this.seenFrom.set(title, where);
    }
    return title;
  }

  /** The type of `s` itself (its title, if any, is the caller's business). */
  bare(s: Schema, indent: string, mode: Mode, where: string): string {
    if ('const' in s) return literal(s.const ?? null);
    if (Array.isArray(s.enum)) return union(s.enum.map(literal));
    const alternatives = Array.isArray(s.anyOf) ? s.anyOf : Array.isArray(s.oneOf) ? s.oneOf : undefined;
    if (alternatives) return union(alternatives.map((a) => this.type(a, indent, mode, where)));
    if (Array.isArray(s.allOf)) return s.allOf.map((a) => wrap(this.type(a, indent, mode, where))).join(' & ') || 'unknown';
    if (Array.isArray(s.type)) return union(s.type.map((t) => this.bare({ ...s, type: t }, indent, mode, where)));
    switch (s.type) {
      case 'string':
        return 'string';
      case 'integer':
      case 'number':
        return 'number';
      case 'boolean':
        return 'boolean';
      case 'null':
        return 'null';
      case 'array': {
        const item = this.type(s.items, indent, mode, where);
        return /^[A-Za-z0-9_$]+$/.test(item) ? `${item}[]` : `Array<${item}>`;
      }
      case 'object':
        return this.object(s, indent, mode, where);
      default:
        return 'unknown';
    }
  }

  private object(s: Schema, indent: string, mode: Mode, where: string): string {
    const props = isObj(s.properties) ? s.properties : {};
    const names = Object.keys(props);
    const extra = s.additionalProperties;
    const patterns = isObj(s.patternProperties) ? Object.values(s.patternProperties) : [];
    if (!names.length) {
      if (patterns.length) return `Record<string, ${union(patterns.map((p) => this.type(p, indent, mode, where)))}>`;
      if (extra === false) return 'Record<string, never>';
      return `Record<string, ${isObj(extra) ? this.type(extra, indent, mode, where) : 'unknown'}>`;
    }
    const required = new Set(Array.isArray(s.required) ? s.required : []);
    const inner = `${indent}  `;
    const lines = names.map((n) => {
      const p = props[n];
      const optional = !required.has(n) || (mode === 'input' && isObj(p) && 'default' in p);
      return `${doc(isObj(p) && typeof p.title !== 'string' ? p.description : undefined, inner)}${inner}${key(n)}${optional ? '?' : ''}: ${this.type(p, inner, mode, where)};`;
    });
    if (extra === true || isObj(extra) || patterns.length) lines.push(`${inner}[key: string]: unknown;`);
    return `{\n${lines.join('\n')}\n${indent}}`;
  }
}

function union(parts: string[]): string {
  const unique = [...new Set(parts)];
  return unique.length ? unique.join(' | ') : 'never';
}

const wrap = (t: string) => (t.includes(' | ') ? `(${t})` : t);

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  schema?: Schema;
}

/** web/src/api-types.ts for this OpenAPI document. */
export function apiTypes(document: Doc): string {
  const g = new Generator(document);
  const operations: string[] = [];
  const routes = new Map<string, string[]>(METHODS.map((m) => [m, []]));
  const paths = isObj(document.paths) ? document.paths : {};
  for (const [url, item] of Object.entries(paths)) {
    if (!url.startsWith(PREFIX) || !isObj(item)) continue;
    for (const method of METHODS) {
      const op = item[method];
      if (!isObj(op)) continue;
      const where = `${method.toUpperCase()} ${url}`;
      if (typeof op.operationId !== 'string') throw new Error(`${where} has no operationId`);
      const name = pascal(op.operationId);
      const summary = typeof op.summary === 'string' ? op.summary : '';
      const members: string[] = [];

      const parameters = (Array.isArray(op.parameters) ? op.parameters : []) as unknown as Parameter[];
      const inPath = parameters.filter((p) => p.in === 'path');
      const inQuery = parameters.filter((p) => p.in === 'query');
      if (inPath.length) {
        members.push(`params: { ${inPath.map((p) => `${key(p.name)}: ${g.type(p.schema, '      ', 'input', where)}`).join('; ')} }`);
      }
      if (inQuery.length) {
        const query: Schema = {
          type: 'object',
          properties: Object.fromEntries(inQuery.map((p) => [p.name, { ...(p.schema ?? {}), ...(p.description ? { description: p.description } : {}) }])),
          required: inQuery.filter((p) => p.required).map((p) => p.name),
        };
        operations.push(`${doc(`The query of ${where}.`, '')}export interface ${name}Query ${g.bare(query, '', 'input', where)}`);
        const optional = inQuery.every((p) => !p.required || (isObj(p.schema) && 'default' in p.schema));
        members.push(`query${optional ? '?' : ''}: ${name}Query`);
      }
      const body = isObj(op.requestBody) ? op.requestBody : undefined;
      const bodySchema = body && isObj(body.content) && isObj(body.content['application/json']) ? body.content['application/json'].schema : undefined;
      if (body && isObj(bodySchema)) {
        const t = g.type(bodySchema, '', 'input', where);
        operations.push(`${doc(`The body of ${where}.`, '')}${t.startsWith('{') ? `export interface ${name}Body ${t}` : `export type ${name}Body = ${t};`}`);
        members.push(`body${body.required === true ? '' : '?'}: ${name}Body`);
      }

      const responses = isObj(op.responses) ? op.responses : {};
      const ok = responses['200'] ?? responses['201'];
      const okSchema = isObj(ok) && isObj(ok.content) && isObj(ok.content['application/json']) ? ok.content['application/json'].schema : undefined;
      const envelope = isObj(okSchema) && isObj(okSchema.properties) ? okSchema.properties : {};
      // api.ts resolves with the envelope's `data`, or its `message` (delete, sign out).
      const data = 'data' in envelope ? g.type(envelope.data, '', 'output', where) : 'message' in envelope ? 'string' : 'unknown';
      operations.push(`${doc(`${where}: ${summary}`, '')}export type ${name}Data = ${data};`);
      members.push(`data: ${name}Data`);
      routes.get(method)!.push(`    ${key(url)}: { ${members.join('; ')} };`);
    }
  }
  const table = METHODS.filter((m) => routes.get(m)!.length)
    .map((m) => `  ${m}: {\n${routes.get(m)!.join('\n')}\n  };`)
    .join('\n');
  return [
    '// Generated by scripts/api-types.ts from the gateway\'s OpenAPI document (/docs/json): do not edit.',
    '// Regenerate with `npm run api:types` after changing a route\'s schema; test/web/api-types.test.ts',
    '// fails while this file differs from what the routes say.',
    '',
    '// ---- objects of the API (schemas with a title) ----',
    '',
    [...g.named.values()].join('\n\n'),
    '',
    '// ---- each operation: its data, body and query ----',
    '',
    operations.join('\n\n'),
    '',
    '/** Every operation under /api/v1 by method and path: what it takes (params, query, body) and its data. */',
    `export interface ApiRoutes {\n${table}\n}`,
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  const text = apiTypes(await apiDocument());
  const file = path.relative(process.cwd(), API_TYPES_FILE);
  if (process.argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(API_TYPES_FILE, 'utf8');
    } catch {}
    if (current !== text) {
      process.stderr.write(`${file} is out of date: run npm run api:types\n`);
      process.exitCode = 1;
    }
    return;
  }
  writeFileSync(API_TYPES_FILE, text);
  process.stdout.write(`wrote ${file}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) await main();
