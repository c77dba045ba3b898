// Every feature's tables in one object, for Drizzle's relational API and drizzle-kit.
export * from '../auth/schema.ts';
export * from '../keys/schema.ts';
export * from '../usage/schema.ts';
export * from '../faucet/schema.ts';
export * from '../events/schema.ts';
export * from '../whales/schema.ts';
export * from '../webhooks/schema.ts';
export * from '../intents/schema.ts';
export * from '../analytics/schema.ts';
