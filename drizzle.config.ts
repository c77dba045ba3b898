import { defineConfig } from 'drizzle-kit';

// `npm run db:generate` writes a new SQL migration after a change to a feature's schema.ts.
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/storage/schema.ts',
  out: './src/storage/migrations',
});
