// The shared REST schemas: the success and error envelopes (C7) and common fields.
import { type TSchema, Type as T } from '@sinclair/typebox';

/** `{success: true, data}` (spec 4.1). */
export const ok = <S extends TSchema>(data: S) => T.Object({ success: T.Literal(true), data });

/** `{success: true, message}` (spec 4.1, delete). */
export const OkMessage = T.Object({ success: T.Literal(true), message: T.String() });

/** The C7 error envelope, for the OpenAPI document. */
export const ErrorResponse = T.Object({
  success: T.Literal(false),
  error: T.Object({
    code: T.String({ pattern: '^[A-Z][A-Z0-9_]*$' }),
    message: T.String(),
    details: T.Optional(T.Unknown()),
  }),
});

export const Email = T.String({ format: 'email', maxLength: 254 });
export const IsoDate = T.String({ format: 'date-time' });

/**
 * A positive whole number the database keeps in a 4-byte integer column (plan limits, a key's
 * rateLimit): larger values are a 400 naming the field, not a failed write.
 */
export const StoredCount = (options: { description?: string } = {}) => T.Integer({ minimum: 1, maximum: 2_147_483_647, ...options });
