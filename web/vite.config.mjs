// The dashboard's build (C43): `npm install` / `npm start` run it through scripts/build.mjs, which
// imports this file; `npx vite web` serves the sources with reloads, the API proxied to a gateway
// on :8080 (`npm start` in another terminal).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const WEB = path.dirname(fileURLToPath(import.meta.url));

/**
 * Writes routes.json: the paths of the page registry (src/registry.ts), so that the gateway
 * answers a reload of /keys with the dashboard and every other unknown path with its usual 404.
 */
function routesJson() {
  return {
    name: 'junction-routes',
    generateBundle() {
      const source = readFileSync(path.join(WEB, 'src/registry.ts'), 'utf8');
      const paths = [...source.matchAll(/\bpath:\s*'(\/[a-z0-9/-]*)'/g)].map((m) => m[1]);
      this.emitFile({ type: 'asset', fileName: 'routes.json', source: `${JSON.stringify(paths)}\n` });
    },
  };
}

const gateway = process.env.GATEWAY_URL ?? 'http://localhost:8080';

/** @type {import('vite').UserConfig} */
export default {
  root: WEB,
  base: '/',
  logLevel: 'warn',
  clearScreen: false,
  publicDir: path.join(WEB, 'public'),
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  plugins: [routesJson()],
  build: {
    outDir: path.join(WEB, 'dist'),
    emptyOutDir: true,
    assetsDir: 'assets',
    // No inline script or style anywhere: the CSP allows 'self' only.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    target: 'es2022',
    sourcemap: false,
    reportCompressedSize: false,
    chunkSizeWarningLimit: 400,
  },
  server: {
    proxy: Object.fromEntries(['/api', '/v1', '/rpc', '/ws', '/docs', '/health'].map((p) => [p, { target: gateway, ws: p === '/ws' }])),
  },
};
