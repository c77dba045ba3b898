// The dashboard's API types (web/src/api-types.ts) are generated from the gateway's OpenAPI
// document (scripts/api-types.ts): generated again here, in memory, they must equal the file, so a
// route schema changed without `npm run api:types` fails the suite. No browser: the document comes
// from an in-memory app.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { before, describe, test } from 'node:test';
import { API_TYPES_FILE, apiDocument, apiTypes } from '../../scripts/api-types.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON document changed freely
type Doc = Record<string, any>;

/** The first line where two texts differ, for a message that says where. */
function firstDifference(a: string, b: string): string {
  const x = a.split('\n');
  const y = b.split('\n');
  const i = x.findIndex((line, n) => line !== y[n]);
  const at = i === -1 ? x.length : i;
  return `line ${at + 1}: file has ${JSON.stringify(x[at] ?? '(end)')}, the routes give ${JSON.stringify(y[at] ?? '(end)')}`;
}

describe('dashboard API types generated from /docs/json', () => {
  let doc: Doc;
  let file: string;
  before(async () => {
    doc = await apiDocument();
    file = readFileSync(API_TYPES_FILE, 'utf8');
  });

  test('web/src/api-types.ts is what the routes say now', () => {
    const fresh = apiTypes(doc);
    assert.ok(fresh === file, `web/src/api-types.ts is out of date (${firstDifference(file, fresh)}): run npm run api:types`);
  });

  test('a route schema that changes without regenerating is caught', () => {
    const changed = structuredClone(doc);
    const alerts = changed.paths['/api/v1/whale-alerts'].get.responses['200'].content['application/json'].schema.properties.data.items;
    assert.equal(alerts.title, 'WhaleAlert');
    alerts.properties.memo = { type: 'string' };
    alerts.required.push('memo');
    const fresh = apiTypes(changed);
    assert.notEqual(fresh, file);
    assert.match(fresh, /export interface WhaleAlert \{[^}]*\n {2}memo: string;\n\}/);
  });

  test('each API object has one named type, used by every route that answers it', () => {
    for (const name of ['WhaleAlert', 'ApiKey', 'ApiKeyListItem', 'NetworkSummary', 'Intent', 'WebhookEndpoint', 'UsageStats', 'Me', 'Plan']) {
      assert.equal(file.split(`export interface ${name} {`).length - 1, 1, `one declaration of ${name}`);
    }
    assert.match(file, /export type ListWhaleAlertsData = WhaleAlert\[\];/);
    assert.match(file, /export type GetIntentData = Intent;/);
    assert.match(file, /export type CreateIntentData = Intent;/);
    assert.match(file, /'\/api\/v1\/whale-alerts': \{ query\?: ListWhaleAlertsQuery; data: ListWhaleAlertsData \};/);
    assert.match(file, /'\/api\/v1\/webhooks\/\{id\}\/deliveries': \{ params: \{ id: string \}; query\?: ListWebhookDeliveriesQuery; data: ListWebhookDeliveriesData \};/);
  });

  test('JSON Schema becomes TypeScript: nullable, enums, records, optional input with defaults, a DELETE answers its message', () => {
    assert.match(file, /export interface WhaleAlert \{[^}]*\n {2}valueUsd: number \| null;/, 'a union with null');
    assert.match(file, /status: 'active' \| 'inactive' \| 'revoked' \| 'expired';/, 'literal unions');
    assert.match(file, /requestsByNetwork: Record<string, number>;/, 'a record');
    assert.match(file, /export type GetFaucetBalancesData = Record<string, FaucetBalance>;/);
    // The whale query's parameters have defaults: the dashboard may leave them out.
    assert.match(file, /export interface ListWhaleAlertsQuery \{[^}]*\n {2}limit\?: number;/);
    assert.match(file, /export type DeleteWebhookData = string;/);
  });

  test('two different schemas with one title are refused, naming both routes', () => {
    const changed = structuredClone(doc);
    const intent = changed.paths['/api/v1/chain-abstraction/intents/{id}'].get.responses['200'].content['application/json'].schema.properties.data;
    assert.equal(intent.title, 'Intent');
    intent.properties.extra = { type: 'boolean' };
    assert.throws(() => apiTypes(changed), /two different schemas are titled Intent \(.+ and GET \/api\/v1\/chain-abstraction\/intents\/\{id\}\)/);
  });
});
