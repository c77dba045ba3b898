// Endpoints (C43, C1): each network of the chosen key with its HTTP and WebSocket address (the key
// in the path and in the query), copy buttons, a curl line and a viem snippet.
import { useMemo } from 'preact/hooks';
import { api, useApi } from '../api.ts';
import type { NetworkSummary } from '../api-types.ts';
import { Copyable, EmptyState, ErrorBanner, Link, Loading, Page } from '../components/page.tsx';
import { setQuery, useLocation } from '../router.ts';

const curlLine = (http: string) =>
  `curl -s ${http} -H 'content-type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'`;

const viemSnippet = (n: NetworkSummary, http: string) => `import { createPublicClient, http } from 'viem';

const client = createPublicClient({
  transport: http('${http}'),
});
console.log('chain', await client.getChainId()); // ${n.chainId}
console.log('block', await client.getBlockNumber());`;

export default function Endpoints() {
  const { query } = useLocation();
  const keys = useApi(() => api.get('/api/v1/api-keys'));
  const networks = useApi(() => api.get('/api/v1/networks'));
  const usable = (keys.data ?? []).filter((k) => k.status === 'active' || k.status === 'inactive');
  const chosen = usable.find((k) => k.id === query.get('key')) ?? usable[0];
  const keyNets = useMemo(() => {
    const all = networks.data ?? [];
    if (!chosen) return [];
    return chosen.networks.length ? all.filter((n) => chosen.networks.includes(n.slug)) : all;
  }, [chosen, networks.data]);
  const tryNet = keyNets.find((n) => n.slug === query.get('network')) ?? keyNets[0];

  return (
    <Page title="Endpoints" intro="Paste these into your app, wallet or tool. Each address carries the key, so keep them as private as the key.">
      <ErrorBanner error={keys.error ?? networks.error} />
      {(keys.loading && !keys.data) || (networks.loading && !networks.data) ? <Loading what="endpoints" /> : null}
      {keys.data && usable.length === 0 ? (
        <EmptyState title="No key to show endpoints for">
          <p>
            <Link href="/keys">Create a key</Link> first; its addresses appear here.
          </p>
        </EmptyState>
      ) : null}
      {chosen && networks.data ? (
        <>
          <div class="row">
            <label for="endpoint-key">
              Key
              <select id="endpoint-key" value={chosen.id} onChange={(e) => setQuery({ key: e.currentTarget.value, network: undefined })}>
                {usable.map((k) => (
                  <option key={k.id} value={k.id}>
                    {k.name} ({k.prefix}…){k.status === 'inactive' ? ', disabled' : ''}
                  </option>
                ))}
              </select>
            </label>
          </div>
          {chosen.status === 'inactive' ? (
            <div class="banner info" role="status">
              This key is disabled: its calls are refused until you enable it on the keys page.
            </div>
          ) : null}
          {tryNet ? (
            <section aria-labelledby="try-title">
              <h2 id="try-title">Try it</h2>
              <div class="row">
                <label for="try-network">
                  Network
                  <select id="try-network" value={tryNet.slug} onChange={(e) => setQuery({ network: e.currentTarget.value })}>
                    {keyNets.map((n) => (
                      <option key={n.slug} value={n.slug}>
                        {n.name}
                      </option>
                    ))}
                  </select>
                </label>
              </div>
              <h3>curl</h3>
              <Copyable text={curlLine(`${tryNet.rpcUrl}/${chosen.key}`)} label={`curl line for ${tryNet.name}`} />
              <h3>viem</h3>
              <Copyable text={viemSnippet(tryNet, `${tryNet.rpcUrl}/${chosen.key}`)} label={`viem snippet for ${tryNet.name}`} multiline />
            </section>
          ) : null}
          <h2>Addresses</h2>
          {keyNets.length === 0 ? <EmptyState title="This key has no network" /> : null}
          <ul class="network-list">
            {keyNets.map((n) => (
              <li key={n.slug}>
                <article aria-labelledby={`net-${n.slug}`}>
                  <h3 id={`net-${n.slug}`}>
                    {n.name} <small class="muted">chain id {n.chainId}</small>
                  </h3>
                  <p class="muted small-label">HTTPS / HTTP</p>
                  <Copyable text={`${n.rpcUrl}/${chosen.key}`} label={`${n.name} HTTP address`} />
                  <p class="muted small-label">WebSocket</p>
                  <Copyable text={`${n.wsUrl}?apiKey=${chosen.key}`} label={`${n.name} WebSocket address`} />
                </article>
              </li>
            ))}
          </ul>
        </>
      ) : null}
    </Page>
  );
}
