// Binds the port before anything else starts, answering live but not ready until the app takes over.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';

/** The port, bound before anything else starts, until the app takes it over. */
export interface EarlyListener {
  /** The port bound (the one asked for, or the one given for port 0). */
  port: number;
  /** Stops answering and frees the port, for the app to listen on it at once (once; later calls wait for that one). */
  handOver(): Promise<void>;
}

const RPC_PATHS = /^\/(v1|rpc|public)\//;

/** While the start goes on: live, not ready; every other request is told to come back. */
function starting(req: IncomingMessage, res: ServerResponse): void {
  const path = (req.url ?? '/').split('?')[0] ?? '/';
  const send = (status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'retry-after': '1', connection: 'close' });
    res.end(JSON.stringify(body));
  };
  if (path === '/health/live') return send(200, { status: 'ok' });
  const message = 'Junction is starting; try again in a moment';
  // C7 and C22: a JSON-RPC address answers in JSON-RPC, every other in the REST envelope.
  if (RPC_PATHS.test(path)) return send(503, { jsonrpc: '2.0', id: null, error: { code: -32000, message } });
  send(503, { success: false, error: { code: 'SERVICE_UNAVAILABLE', message } });
}

/**
 * Binds the server's port first, before storage opens and the chains start, so that a port in
 * use stops the start at once instead of after them. Until the app is ready it answers
 * `/health/live` 200 and everything else 503 with `Retry-After: 1`; then {@link EarlyListener.handOver}
 * closes it and the app listens on the same port straight after.
 * Rejects with the listen error (EADDRINUSE, EACCES, EADDRNOTAVAIL).
 */
export async function bindEarly(port: number, host: string): Promise<EarlyListener> {
  const server = createServer({ requireHostHeader: false }, starting);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  let handedOver: Promise<void> | undefined;
  return {
    port: address && typeof address === 'object' ? address.port : port,
    handOver: () =>
      (handedOver ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}
