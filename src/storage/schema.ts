// Every feature's tables in one object, for Drizzle's relational API and drizzle-kit.
export * from '../auth/schema.ts';
export * from '../keys/schema.ts';
export * from '../usage/schema.ts';
export * from '../faucet/schema.ts';
