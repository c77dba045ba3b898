/**
 * Answers that mean "this node cannot serve this now" (C26): a provider throttling
 * with HTTP 200 and a JSON-RPC error, a node out of capacity, a pruned node missing old state.
 * Such an answer to a read moves the call to the next node (C26) instead of reaching the user.
 */

/**
 * `busy`: the node is throttling or overloaded; it is cooled down like after an HTTP 429.
 * `missing`: the node lacks the data (pruned state, a block it has not seen yet); the call moves
 * on but the node stays in use for other calls.
 * `answer`: a real answer about the request (e.g. a result-size limit), passed on to the user;
 * listed before a broader row to exempt it.
 */
export type ProviderErrorKind = 'busy' | 'missing' | 'answer';

/** One row of the table in config (`rpc.providerErrors`): a code, a message fragment, or both; the first row that matches decides. */
export interface ProviderErrorRule {
  /** The JSON-RPC error code. */
  readonly code?: number;
  /** Text the error message contains, in any letter case. */
  readonly message?: string;
  readonly kind: ProviderErrorKind;
}

/** The table as shipped; `config/default.json` carries the same rows, so an operator can edit them. */
export const DEFAULT_PROVIDER_ERRORS: readonly ProviderErrorRule[] = [
  { message: 'query returned more than', kind: 'answer' },
  { message: 'block range', kind: 'answer' },
  { code: -32005, kind: 'busy' },
  { code: -32016, kind: 'busy' },
  { message: 'rate limit', kind: 'busy' },
  { message: 'too many requests', kind: 'busy' },
  { message: 'capacity', kind: 'busy' },
  { message: 'request timed out', kind: 'busy' },
  { message: 'try again later', kind: 'busy' },
  { message: 'header not found', kind: 'missing' },
  { message: 'missing trie node', kind: 'missing' },
  { message: 'state is not available', kind: 'missing' },
  { message: 'state histories haven', kind: 'missing' },
  // C26: a block this node has not reached, or a hash it does not know, as each client words it:
  // another node may have it (docs/rpc.md lists each client's answers). anvil: -32602
  // "BlockOutOfRangeError: ...", -32001 "Resource not found", -32000 "unknown block" (geth's words
  // too); Hardhat: -32000 "Received invalid block tag ...", -32602 "blockHash cannot be found".
  { message: 'BlockOutOfRangeError', kind: 'missing' },
  { message: 'resource not found', kind: 'missing' },
  { message: 'unknown block', kind: 'missing' },
  { message: 'received invalid block tag', kind: 'missing' },
  { message: 'blockHash cannot be found', kind: 'missing' },
  // C26: a method this node does not serve, which another client may (Hardhat has no
  // eth_getBlockReceipts): -32601 "Method not found" (anvil, geth), -32004 "Method ... is not
  // supported" (Hardhat). The gateway's own refusals are made before any node is asked.
  { code: -32601, kind: 'missing' },
  { code: -32004, kind: 'missing' },
];

export interface ProviderVerdict {
  kind: Exclude<ProviderErrorKind, 'answer'>;
  /** The node's error, short, for logs and the failed-attempt list (no URL can be in it). */
  reason: string;
}

const ERROR_MEMBER = Buffer.from('"error"');

/** Compiled once per pool: codes in a set, message fragments lower-cased. */
export class ProviderErrors {
  readonly #rules: ReadonlyArray<{ code: number | undefined; text: string | undefined; kind: ProviderErrorKind }>;
  /** False when no row can make an answer a provider error: the check is skipped. */
  readonly active: boolean;

  constructor(rules: readonly ProviderErrorRule[]) {
    this.#rules = rules
      .filter((r) => r.code !== undefined || (r.message !== undefined && r.message !== ''))
      .map((r) => ({ code: r.code, text: r.message?.toLowerCase(), kind: r.kind }));
    this.active = this.#rules.some((r) => r.kind !== 'answer');
  }

  /**
   * The verdict on a node's answer (a single object or a batch array), or null when nothing in it
   * is a provider error. A successful answer costs one byte search: only an answer holding
   * `"error"` is parsed. A batch counts as failed when any of its items is (the whole batch then
   * moves to the next node; see docs/decisions.md C26).
   */
  judge(body: Buffer): ProviderVerdict | null {
    if (!this.active || body.indexOf(ERROR_MEMBER) === -1) return null;
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      return null;
    }
    if (!Array.isArray(parsed)) return this.#item(parsed);
    let verdict: ProviderVerdict | null = null;
    for (const item of parsed) {
      const v = this.#item(item);
      // `busy` wins: the node as a whole is the trouble, not one item's data.
      if (v && (verdict === null || v.kind === 'busy')) verdict = v;
      if (verdict?.kind === 'busy') break;
    }
    return verdict;
  }

  /** The kind of one JSON-RPC error object, or null. */
  classify(code: unknown, message: unknown): ProviderErrorKind | null {
    const text = typeof message === 'string' ? message.toLowerCase() : '';
    for (const r of this.#rules) {
      if (r.code !== undefined && r.code !== code) continue;
      if (r.text !== undefined && !text.includes(r.text)) continue;
      return r.kind;
    }
    return null;
  }

  #item(item: unknown): ProviderVerdict | null {
    if (typeof item !== 'object' || item === null) return null;
    const error = (item as { error?: unknown }).error;
    if (typeof error !== 'object' || error === null) return null;
    const { code, message } = error as { code?: unknown; message?: unknown };
    const kind = this.classify(code, message);
    if (kind === null || kind === 'answer') return null;
    // A provider's message may point to its own site; addresses are left out of logs all the same.
    const words = typeof message === 'string' ? message.slice(0, 120).replace(/[a-z][a-z0-9+.-]*:\/\/\S*/gi, '<url>') : '';
    return { kind, reason: `node error ${typeof code === 'number' ? code : '?'}${words ? `: ${words}` : ''}` };
  }
}
