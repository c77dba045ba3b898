import { defineConfig } from 'drizzle-kit';

// `npm run db:generate` writes a new SQL migration after a change to a feature's schema.ts.
// Every feature's tables are read from its own schema.ts: storage imports no feature.
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/*/schema.ts',
  out: './src/storage/migrations',
});
