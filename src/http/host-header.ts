// Requests without a Host header, refused in the envelope of their address (C7, C22).
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { HttpError } from '../errors/http.ts';

/** What an HTTP/1.1 request without Host is told, at the RPC addresses and REST alike. */
export const MISSING_HOST = 'An HTTP/1.1 request needs a Host header';

/**
 * An HTTP/1.1 request without a Host header, which the server refuses with 400 (RFC 9112 §3.2).
 * Node would answer it itself with an empty 400; the server is made with `requireHostHeader: false`
 * so that it is answered in the envelope of its address instead: a JSON-RPC error at the RPC
 * addresses (C22), C7's elsewhere. HTTP/1.0 has no Host requirement.
 */
export function lacksHost(req: IncomingMessage): boolean {
  return req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1;
}

/** C7: REST, the docs and the dashboard refuse an HTTP/1.1 request without Host before any route runs. */
export function refuseMissingHost(app: FastifyInstance): void {
  app.addHook('onRequest', async (req) => {
    if (lacksHost(req.raw)) throw new HttpError('BAD_REQUEST', MISSING_HOST, { headers: { connection: 'close' } });
  });
}
