// The REST request validator: ajv with the formats, and dates and times the storage can hold.
import { Ajv, type Format, type Options } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance, FastifyRequest, preValidationHookHandler } from 'fastify';
import { HttpError } from '../errors/http.ts';

// ajv-formats is CommonJS; its default export arrives wrapped under ESM.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (a: Ajv) => Ajv;

/**
 * Years a value may have. A date column holds 0001–9999 as text (0000 is not a year there). A
 * timestamp is read back through `new Date(text)`, which takes years 0001–0099 for 1901–1999 and
 * prints years past 9999 as `+010000-…`, so timestamps keep to four-digit years.
 */
const DAY_YEARS = [1, 9999] as const;
const TIMESTAMP_YEARS = [1000, 9999] as const;

function inYears(t: number, [min, max]: readonly [number, number]): boolean {
  if (Number.isNaN(t)) return false;
  const y = new Date(t).getUTCFullYear();
  return y >= min && y <= max;
}

type FormatValidate = (s: string) => boolean;
function formatValidator(f: Format | undefined): FormatValidate {
  if (typeof f === 'function') return f;
  if (f instanceof RegExp) return (s) => f.test(s);
  if (f && typeof f === 'object' && 'validate' in f) {
    const v = f.validate;
    return typeof v === 'function' ? (v as FormatValidate) : (s) => (v as RegExp).test(s);
  }
  return () => true;
}

/**
 * RFC 3339 admits values the code behind it cannot use: a leap second (`23:59:60`, which
 * `Date` cannot parse), year 0000, and years storage cannot give back (above). They passed
 * `format: date-time` and failed at storage with a 500, or came back altered; here they fail
 * validation (400). `Date.parse` is the check because it turns the text into the stored value.
 */
function tightenDateFormats(ajv: Ajv): void {
  const dateTime = formatValidator(ajv.formats['date-time']);
  const date = formatValidator(ajv.formats.date);
  ajv.addFormat('date-time', { type: 'string', validate: (s: string) => dateTime(s) && inYears(Date.parse(s), TIMESTAMP_YEARS) });
  ajv.addFormat('date', { type: 'string', validate: (s: string) => date(s) && inYears(Date.parse(`${s}T00:00:00Z`), DAY_YEARS) });
}

function makeAjv(opts: Options): Ajv {
  const ajv = new Ajv({ allErrors: true, removeAdditional: false, useDefaults: true, strict: false, ...opts });
  addFormats(ajv);
  tightenDateFormats(ajv);
  return ajv;
}

// NUL cannot be stored in a PostgreSQL text value (the driver fails the whole query), and an
// unpaired surrogate cannot be encoded as UTF-8 (it would be stored as U+FFFD, altered).
// eslint-disable-next-line no-control-regex -- NUL is exactly what this looks for
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const UNSTORABLE_MESSAGE = 'must not contain a NUL character (\\u0000) or an unpaired surrogate';
const MAX_ISSUES = 20;

/** `[{field, message}]` for every string (value or property name) PostgreSQL text cannot hold. */
export function unstorableText(where: string, value: unknown): Array<{ field: string; message: string }> {
  const issues: Array<{ field: string; message: string }> = [];
  // Iterative: a deeply nested body must not exhaust the stack.
  const stack: Array<[string, unknown]> = [[where, value]];
  while (stack.length && issues.length < MAX_ISSUES) {
    const [field, v] = stack.pop() as [string, unknown];
    if (typeof v === 'string') {
      if (UNSTORABLE.test(v)) issues.push({ field, message: UNSTORABLE_MESSAGE });
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([`${field}.${i}`, v[i]]);
    } else if (v !== null && typeof v === 'object') {
      for (const [k, child] of Object.entries(v)) {
        if (UNSTORABLE.test(k)) {
          issues.push({ field: `${field}.${k.replace(new RegExp(UNSTORABLE.source, 'g'), '?')}`, message: `field name ${UNSTORABLE_MESSAGE}` });
        } else stack.push([`${field}.${k}`, child]);
      }
    }
  }
  return issues;
}

/** C7: refuses a REST request whose body, query or path holds text storage cannot take, naming the fields. */
const refuseUnstorableText: preValidationHookHandler = (req: FastifyRequest, _reply, done) => {
  const issues = [
    ...unstorableText('params', req.params),
    ...unstorableText('querystring', req.query),
    ...unstorableText('body', req.body),
  ];
  if (!issues.length) return done();
  const summary = issues.map((d) => `${d.field} ${d.message}`).join('; ');
  done(new HttpError('VALIDATION_ERROR', `Invalid request: ${summary}`, { details: issues }));
};

/** Where the REST API lives; JSON-RPC and WebSocket addresses keep their own error shapes. */
const REST_PREFIX = '/api/';

/**
 * Bodies are JSON: validated strictly, no type coercion ("10" is not an integer) and unknown
 * fields rejected, never stripped (C7). Query strings and path parameters arrive as text, so
 * they are coerced to the schema's types. Every REST route, with a schema or not, first refuses
 * text that PostgreSQL cannot store (NUL), so such input is a 400 and never a failed query.
 * Call before any route is registered.
 */
export function installValidators(app: FastifyInstance): void {
  const strict = makeAjv({ coerceTypes: false });
  const coercing = makeAjv({ coerceTypes: 'array' });
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === 'body' ? strict : coercing).compile(schema as object) as ReturnType<Ajv['compile']>,
  );
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith(REST_PREFIX)) return;
    const own = route.preValidation;
    route.preValidation = [refuseUnstorableText, ...(own === undefined ? [] : Array.isArray(own) ? own : [own])];
  });
}
