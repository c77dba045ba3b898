// Steady keep-alive traffic for the stop tests (C57): clients with one kept-alive connection each,
// sending one JSON-RPC call after another until one is not answered 200, every outcome kept.
import { Client } from 'undici';
import { waitFor } from './wait.ts';

/** What became of one call: its status and headers, or the error code of a connection that failed. */
export interface Outcome {
  status?: number;
  connection?: string | undefined;
  retryAfter?: string | undefined;
  body?: string;
  error?: string;
  /** For a connection that failed: the bytes it had received from the gateway, where undici tells (0: nothing came back on it). */
  bytesRead?: number;
}

/** One `eth_getBalance` of `address` on `client`'s kept-alive connection, with API key `key`. */
export async function keepAliveCall(client: Client, key: string, id: number, address: string): Promise<Outcome> {
  try {
    const res = await client.request({
      path: '/rpc/main/evm/50',
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ jsonrpc: '2.0', id, method: 'eth_getBalance', params: [address, 'latest'] }),
    });
    const body = await res.body.text();
    return { status: res.statusCode, connection: res.headers.connection as string | undefined, retryAfter: res.headers['retry-after'] as string | undefined, body };
  } catch (err) {
    const e = err as { code?: string; cause?: { code?: string }; socket?: { bytesRead?: number } };
    return { error: e.cause?.code ?? e.code ?? String(err), ...(e.socket?.bytesRead === undefined ? {} : { bytesRead: e.socket.bytesRead }) };
  }
}

export interface KeepAliveLoad {
  /** Each client's outcomes in order; its loop ends after its first call not answered 200. */
  readonly outcomes: Outcome[][];
  /** Resolves once every client has made `calls` calls or more. */
  steady(calls: number, timeoutMs: number): Promise<void>;
  /** Waits for every loop to end (a stop ends them), then closes the clients. */
  finish(): Promise<void>;
}

/** Starts `clients` loops against the gateway at `url`, each on its own connection and with its own address. */
export function keepAliveLoad(url: string, key: string, clients: number): KeepAliveLoad {
  const outcomes: Outcome[][] = Array.from({ length: clients }, () => []);
  const connections = Array.from({ length: clients }, () => new Client(url, { pipelining: 1 }));
  let id = 0;
  const loops = connections.map(async (client, c) => {
    const address = `0x${(c + 1).toString(16).padStart(40, '0')}`;
    for (;;) {
      const o = await keepAliveCall(client, key, id++, address);
      outcomes[c]?.push(o);
      if (o.status !== 200) return;
    }
  });
  return {
    outcomes,
    steady: async (calls, timeoutMs) => {
      await waitFor(() => outcomes.every((o) => o.length >= calls), { timeoutMs, what: 'steady keep-alive traffic from every client' });
    },
    finish: async () => {
      await Promise.all(loops);
      await Promise.all(connections.map((c) => c.close().catch(() => {})));
    },
  };
}
