import { Ajv, type Options } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance } from 'fastify';

// ajv-formats is CommonJS; its default export arrives wrapped under ESM.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (a: Ajv) => Ajv;

function makeAjv(opts: Options): Ajv {
  const ajv = new Ajv({ allErrors: true, removeAdditional: false, useDefaults: true, strict: false, ...opts });
  addFormats(ajv);
  return ajv;
}

/**
 * Bodies are JSON: validated strictly, no type coercion ("10" is not an integer) and unknown
 * fields rejected, never stripped (C7). Query strings and path parameters arrive as text, so
 * they are coerced to the schema's types.
 */
export function installValidators(app: FastifyInstance): void {
  const strict = makeAjv({ coerceTypes: false });
  const coercing = makeAjv({ coerceTypes: 'array' });
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === 'body' ? strict : coercing).compile(schema as object) as ReturnType<Ajv['compile']>,
  );
}
