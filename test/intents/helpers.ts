// Two devnet chains (ethereum and arbitrum) with the settlers deployed by a solver wallet made for
// the run, and a test app pointed at them with the intents config injected (C41, C42).
import { type Address, createPublicClient, createWalletClient, defineChain, type Hex, http, type PublicClient, type WalletClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { type Devnet, startDevnet } from '../../src/devnet/devnet.ts';
import { deployDevnetSettlers, devnetSolver } from '../../src/intents/deploy.ts';
import { startTestApp, type TestApp, type TestAppOptions } from '../support/app.ts';

export const ORIGIN = { slug: 'ethereum', chainId: 1 } as const;
export const DESTINATION = { slug: 'arbitrum', chainId: 42161 } as const;
export const ADMIN_TOKEN = 'intents-test-admin-token-0123456789';

export interface IntentChains {
  devnet: Devnet;
  solver: { privateKey: Hex; address: Address };
  settlers: Record<string, { origin: Address; destination: Address }>;
  pub: Record<'origin' | 'destination', PublicClient>;
  /** A wallet of dev account `i` (1..8 are the tests') on a chain. */
  wallet(chain: 'origin' | 'destination', i: number): WalletClient & { account: ReturnType<typeof privateKeyToAccount> };
  rpc(chain: 'origin' | 'destination', method: string, params: unknown[]): Promise<unknown>;
  url(chain: 'origin' | 'destination'): string;
  stop(): Promise<void>;
}

function chainOf(id: number, url: string) {
  return defineChain({ id, name: `chain-${id}`, nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [url] } } });
}

/** Starts the two chains, funds a fresh solver wallet on both and deploys the settlers with it. */
export async function startIntentChains(): Promise<IntentChains> {
  const solver = devnetSolver();
  const devnet = await startDevnet({ networks: [ORIGIN, DESTINATION], nativeBlockTimeSeconds: 1, fund: [solver.address] });
  const url = (c: 'origin' | 'destination') => devnet.upstreams[c === 'origin' ? ORIGIN.slug : DESTINATION.slug]?.http ?? '';
  const { settlers } = await deployDevnetSettlers({
    chains: [
      { ...ORIGIN, rpcUrl: url('origin') },
      { ...DESTINATION, rpcUrl: url('destination') },
    ],
    solver,
  });
  const chain = (c: 'origin' | 'destination') => chainOf(c === 'origin' ? ORIGIN.chainId : DESTINATION.chainId, url(c));
  const pub = {
    origin: createPublicClient({ chain: chain('origin'), transport: http(url('origin')) }) as PublicClient,
    destination: createPublicClient({ chain: chain('destination'), transport: http(url('destination')) }) as PublicClient,
  };
  return {
    devnet,
    solver,
    settlers,
    pub,
    wallet: (c, i) => {
      const account = privateKeyToAccount(devnet.accounts[i]?.privateKey as Hex);
      return createWalletClient({ chain: chain(c), transport: http(url(c)), account });
    },
    rpc: async (c, method, params) => {
      const res = await fetch(url(c), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
      const body = (await res.json()) as { result?: unknown; error?: { message: string } };
      if (body.error) throw new Error(body.error.message);
      return body.result;
    },
    url,
    stop: () => devnet.stop(),
  };
}

/** The two chains as the gateway's ethereum (origin) and arbitrum (destination) upstreams. */
export const intentChainsEnv = (chains: IntentChains): Record<string, string> => ({
  UPSTREAM_ETHEREUM: chains.url('origin'),
  UPSTREAM_ARBITRUM: chains.url('destination'),
});

/** Settings for intents on the two chains: the settlers and the solver key injected (as the devnet wiring does), quick checks. */
export const intentOverrides = (chains: IntentChains, intents: Record<string, unknown> = {}): Record<string, unknown> => ({
  events: { confirmations: 1, pollIntervalMs: 100 },
  whaleAlerts: { networks: [] },
  intents: {
    settlers: chains.settlers,
    solverPrivateKey: chains.solver.privateKey,
    checkIntervalMs: 200,
    resendAfterSeconds: 1,
    expiryGraceSeconds: 0,
    fillMarginSeconds: 5,
    ...intents,
  },
});

/** A test app on the two chains, with the settlers and the solver key injected (as the devnet wiring does). */
export function startIntentApp(chains: IntentChains, opts: TestAppOptions & { intents?: Record<string, unknown> } = {}): Promise<TestApp> {
  return startTestApp({
    ...opts,
    env: { ...intentChainsEnv(chains), ADMIN_TOKEN, ...opts.env },
    overrides: {
      ...opts.overrides,
      ...intentOverrides(chains, opts.intents),
      webhooks: { allowPrivateTargets: true, retryDelaysSeconds: [1] },
    },
  });
}
