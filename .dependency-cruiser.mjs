// Import rules (npm run lint): imports point down the layers and never in a circle.
//   main -> app -> features -> (upstreams, metering, onchain, devnet, jobs) -> (storage, config, errors, json, methods, time, ids, collections)
// A lower layer never imports a higher one; a feature uses another feature through its service,
// never its routes. Run alone: npx depcruise src web/src --config .dependency-cruiser.mjs

const BOTTOM = '^src/(storage|config|errors|json|methods|time|ids|collections)/';
const MIDDLE = '^src/(upstreams|metering|onchain|devnet|jobs)/';

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'no-circular',
      comment:
        'A cycle makes two modules one: neither can be read, tested or moved without the other, and the ' +
        'load order decides which sees the other half-initialised. Type-only imports count too.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-circular-folders',
      comment:
        'The same between folders: when two features need each other, the shared part moves down ' +
        '(a types file, a helper in a lower layer) or one hands the other an interface.',
      severity: 'error',
      scope: 'folder',
      from: {},
      to: { circular: true },
    },
    {
      name: 'bottom-imports-no-higher-layer',
      comment:
        'storage, config, errors, json, methods (the method catalogue) and time (the clock) are what everything stands on: they import only each other, ' +
        'so any feature, upstream or tool can use them without pulling the rest of the gateway in.',
      severity: 'error',
      from: { path: BOTTOM },
      to: { path: '^src/', pathNot: BOTTOM },
    },
    {
      name: 'upstreams-not-to-rpc',
      comment:
        'Upstreams serve rpc and the background features alike (faucet, followers, webhooks, intents); ' +
        'a helper both need moves below upstreams (the JSON scanner is in src/json/).',
      severity: 'error',
      from: { path: '^src/upstreams/' },
      to: { path: '^src/rpc/' },
    },
    {
      name: 'keys-and-metering-not-to-rpc',
      comment:
        'Keys and metering are used by the RPC pipeline, the WebSocket server and REST: what they ' +
        'share (key access, admission) lives with keys, so they never reach back into rpc/.',
      severity: 'error',
      from: { path: '^src/(keys|metering)/' },
      to: { path: '^src/rpc/' },
    },
    {
      name: 'middle-imports-no-feature',
      comment:
        'upstreams, metering, onchain (wallets, sending transactions, amounts, addresses and contract ' +
        'artifacts, shared by the faucet, balance, intents and devnet), devnet and jobs sit under the ' +
        'features: they may use storage, config, errors, json, methods, time, ids and collections and each other, never a feature, app or main.',
      severity: 'error',
      from: { path: MIDDLE },
      to: { path: '^src/', pathNot: [BOTTOM, MIDDLE] },
    },
    {
      name: 'only-main-imports-devnet',
      comment:
        'The devnet (local anvil chains) is started by main.ts for --devnet only; what production code ' +
        'shares with it (the contract artifacts) lives in src/onchain/.',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/devnet/', '^src/main\\.ts$'] },
      to: { path: '^src/devnet/' },
    },
    {
      name: 'only-main-imports-app',
      comment: 'app.ts wires every feature together; only main.ts starts it, and nothing imports main.ts.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/main\\.ts$' },
      to: { path: '^src/(app|main)\\.ts$' },
    },
    {
      name: 'no-other-feature-routes',
      comment:
        'Routes are a feature\'s HTTP face, registered by app.ts; another feature uses the service ' +
        'behind them, so a change of routes never breaks a neighbour.',
      severity: 'error',
      from: { path: '^src/([^/]+)/' },
      to: { path: '^src/[^/]+/.*routes\\.ts$', pathNot: '^src/$1/' },
    },
    {
      name: 'server-and-dashboard-apart',
      comment:
        'The dashboard (web/) is built by Vite for the browser and talks to the server over HTTP only; ' +
        'server code never imports browser code.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^web/' },
    },
    {
      name: 'dashboard-not-to-server',
      comment: 'The reverse: server modules in the browser bundle would pull Node-only code in.',
      severity: 'error',
      from: { path: '^web/' },
      to: { path: '^src/' },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import that resolves to nothing is a typo or a package missing from package.json.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: 'not-to-dev-dep',
      comment:
        'The gateway and the dashboard run from `npm ci --omit=dev` installs too: they may not need a ' +
        'devDependency at run time (type-only imports are erased and allowed).',
      severity: 'error',
      from: { path: '^(src|web/src)/' },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only'] },
    },
  ],
  options: {
    // The dashboard's styles and assets are Vite's business, and packages are not followed.
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '\\.css$' },
    // Type-only imports are kept in the graph: a cycle through types is still a cycle to read.
    tsPreCompilationDeps: true,
    enhancedResolveOptions: {
      // .ts imports carry their extension (allowImportingTsExtensions); the dashboard has .tsx too.
      extensions: ['.ts', '.tsx', '.js', '.mjs', '.json'],
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
  },
};
