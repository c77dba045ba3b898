/**
 * The WebSocket frames of subscription notifications, made once per notification and topic
 * (memory per connection, C60/docs/scaling.md): every client of a topic gets the same bytes but for its subscription id, so the frame
 * is built once, in two parts around the id, and each client's copy is the two shared parts with
 * its id between them (RFC 6455 text frame, FIN, unmasked as a server's frames are).
 */

const PREFIX = '{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"';
/** Subscription ids as newSubscriptionId makes them: `0x` and 32 hex digits. */
export const SUBSCRIPTION_ID_BYTES = 34;

/** One notification's frame, but for the subscription id. */
export interface NotificationFrame {
  /** Frame header and the JSON up to the id's first character. */
  head: Buffer;
  /** The JSON after the id: `","result":` and the node's result. */
  tail: Buffer;
  /** Whole frame length with an id of {@link SUBSCRIPTION_ID_BYTES}. */
  length: number;
}

/** The frame of a notification whose result is `resultText`, for ids of {@link SUBSCRIPTION_ID_BYTES} bytes. */
export function notificationFrame(resultText: string): NotificationFrame {
  const tail = Buffer.from(`","result":${resultText}}}`);
  const payload = Buffer.byteLength(PREFIX) + SUBSCRIPTION_ID_BYTES + tail.length;
  const header = payload < 126 ? 2 : payload < 65_536 ? 4 : 10;
  const head = Buffer.allocUnsafe(header + Buffer.byteLength(PREFIX));
  head[0] = 0x81; // FIN, text
  if (payload < 126) head[1] = payload;
  else if (payload < 65_536) {
    head[1] = 126;
    head.writeUInt16BE(payload, 2);
  } else {
    head[1] = 127;
    head.writeBigUInt64BE(BigInt(payload), 2);
  }
  head.write(PREFIX, header, 'latin1');
  return { head, tail, length: header + payload };
}

/**
 * A copy of `s` in one flat piece. Strings made by concatenation (a UUID, a template) are kept by
 * V8 as a tree of their parts, and a slice of a longer string keeps the whole of it: held per
 * connection, either costs hundreds of bytes.
 */
export function flat(s: string): string {
  return Buffer.from(s, 'utf8').toString('utf8');
}
