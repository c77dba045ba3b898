// A whale alert as GET /whale-alerts lists it and the `whale.alert` webhook event carries it
// (spec 2; C35): one schema, and the service's type read from it.
import { type Static, Type as T } from '@sinclair/typebox';
import { IsoDate } from '../http/schemas.ts';

const Address = (description: string) => T.String({ pattern: '^0x[0-9a-f]{40}$', description });

export const WhaleAlertSchema = T.Object(
  {
    id: T.String({ description: 'opaque and stable; pass it as `before` to page back' }),
    txHash: T.String({ pattern: '^0x[0-9a-f]{64}$', description: 'hash of the transfer' }),
    from: Address('sender, lower-case'),
    to: Address('recipient, lower-case'),
    value: T.String({ pattern: '^[0-9]+(\\.[0-9]+)?$', description: 'amount in whole native units, exact decimal string' }),
    valueUsd: T.Union([T.Number({ minimum: 0 }), T.Null()], {
      description: 'US dollars to the cent at the price when recorded; null when no price was known (C34)',
    }),
    timestamp: IsoDate,
    blockNumber: T.Integer({ minimum: 0 }),
    network: T.String({ description: 'network slug (beyond the spec)' }),
  },
  { title: 'WhaleAlert' },
);

export type WhaleAlert = Static<typeof WhaleAlertSchema>;
