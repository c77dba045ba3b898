// Upgrades the WebSocket server does not take: refused with a JSON-RPC error, or served as plain HTTP.
import { IncomingMessage, type Server, ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { InvalidRequestError, type RpcError } from '../../errors/rpc.ts';
import { errorText } from '../jsonrpc.ts';

/** Answers an upgrade with an HTTP error and a JSON-RPC error body, then closes the socket. */
export function refuse(socket: Duplex, status: number, err: RpcError, headers: Record<string, string> = {}): void {
  if (socket.destroyed) return;
  const body = errorText('null', err);
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
    'Connection: close',
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  socket.once('finish', () => socket.destroy());
  socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`);
}

/**
 * Serves an HTTP request that offered an upgrade nobody takes (`Upgrade: h2c`) as plain
 * HTTP/1.1 through the server's normal request handling, as Node does when no 'upgrade' listener
 * exists. The connection closes after the answer.
 */
export function serveAsHttp(server: Server, req: IncomingMessage, socket: Socket, head: Buffer): void {
  if (req.headers['transfer-encoding']) return refuse(socket, 411, new InvalidRequestError('Length required: send a Content-Length with an upgrade request'));
  const length = Number(req.headers['content-length'] ?? 0);
  if (!Number.isSafeInteger(length) || length < 0) return refuse(socket, 400, new InvalidRequestError('Bad Content-Length'));

  // Node handed the socket over with the body unread (as `head` and what follows) and the
  // request already ended: a fresh request carries the same head and the body to Fastify.
  const request = new IncomingMessage(socket);
  Object.assign(request, {
    method: req.method,
    url: req.url,
    headers: req.headers,
    rawHeaders: req.rawHeaders,
    httpVersion: req.httpVersion,
    httpVersionMajor: req.httpVersionMajor,
    httpVersionMinor: req.httpVersionMinor,
  });
  let remaining = length;
  const end = () => {
    request.complete = true;
    request.push(null);
  };
  const feed = (chunk: Buffer) => {
    const part = chunk.subarray(0, remaining);
    remaining -= part.length;
    request.push(part);
    if (remaining === 0) {
      socket.off('data', feed);
      end();
    }
  };
  if (remaining === 0) end();
  else {
    if (head.length > 0) feed(head);
    if (remaining > 0) socket.on('data', feed);
  }
  const res = new ServerResponse(request);
  res.shouldKeepAlive = false;
  res.assignSocket(socket);
  res.once('finish', () => {
    socket.off('data', feed);
    socket.destroySoon();
  });
  server.emit('request', request, res);
}
