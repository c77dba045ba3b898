// C34: the `http` price source: a GET whose JSON answer holds the price at a dotted path
// ("ethereum.usd" in CoinGecko's simple/price answer; "data.0.price" indexes an array).
import { PriceSourceError } from '../errors/node.ts';

/** Bytes of an answer read at most: a price answer is small, anything larger is refused. */
const MAX_BODY_BYTES = 1024 * 1024;

/**
 * GETs `url` and returns the number at `path` in its JSON answer: a finite, non-negative JSON
 * number, or a plain decimal string ("3012.5", as some exchanges send prices). Anything else
 * (an HTTP error, a body that is not JSON, a missing path, another type) throws.
 */
export async function readJsonPrice(url: string, path: string, signal: AbortSignal): Promise<number> {
  const res = await fetch(url, { headers: { accept: 'application/json' }, signal, redirect: 'follow' });
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    throw new PriceSourceError(`HTTP ${res.status}`);
  }
  const text = await readCapped(res, MAX_BODY_BYTES);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new PriceSourceError('the answer is not JSON');
  }
  const value = at(json, path);
  const usd = typeof value === 'number' ? value : typeof value === 'string' && /^[0-9]+(\.[0-9]+)?$/.test(value) ? Number(value) : NaN;
  if (!Number.isFinite(usd) || usd < 0) {
    throw new PriceSourceError(value === undefined ? `no value at "${path}"` : `the value at "${path}" is not a price`);
  }
  return usd;
}

/** The value at a dotted path; own properties only, array items by index. */
export function at(json: unknown, path: string): unknown {
  let cur: unknown = json;
  for (const part of path.split('.')) {
    if (Array.isArray(cur)) {
      if (!/^(0|[1-9][0-9]*)$/.test(part)) return undefined;
      cur = cur[Number(part)];
    } else if (cur !== null && typeof cur === 'object' && Object.hasOwn(cur, part)) {
      cur = (cur as Record<string, unknown>)[part];
    } else {
      return undefined;
    }
  }
  return cur;
}

async function readCapped(res: Response, max: number): Promise<string> {
  const declared = Number(res.headers.get('content-length') ?? '0');
  if (declared > max) {
    await res.body?.cancel().catch(() => {});
    throw new PriceSourceError(`the answer is larger than ${max} bytes`);
  }
  if (!res.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > max) throw new PriceSourceError(`the answer is larger than ${max} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
