// What may leave the gateway in a message or a log line: secrets cut out, errors reduced to
// class, code and a short message. Below every other module (errors/ imports no feature), so the
// REST error handler, the RPC paths and the logger all use the same redaction.

// C19: a key is `<tag><8 hex>` (the prefix, safe to show) followed by 43 base64url characters
// (the secret). Any run of 43+ URL-safe characters may hold a secret: it is cut back to the
// shortest leading part shaped like a prefix, or hidden whole when there is none.
const LONG_TOKEN = /[A-Za-z0-9_-]{43,}/g;
const KEY_PREFIX = /^([A-Za-z0-9_-]*?[a-z0-9_]{2}[0-9a-f]{8})[A-Za-z0-9_-]{43,}$/;
// Query parameters that carry credentials, whatever their value looks like.
const SECRET_PARAM = /([?&;](?:api[_-]?key|key|token|access[_-]?token|auth|secret|password)=)[^&#;]*/gi;
// The key segment of the path form `/v1/{network}/{apiKey}`, also written `//v1`, `/V1` or `/v1//`.
const PATH_KEY = /^(\/+v1\/+[^/?#]+\/+)[^/?#]+/i;

/** Hides key-shaped secrets anywhere in a text, keeping each key's prefix (C19). */
export function redactSecrets(text: string): string {
  return text.replace(LONG_TOKEN, (run) => {
    const m = KEY_PREFIX.exec(run);
    return m ? `${m[1]}[redacted]` : '[redacted]';
  });
}

function redactRaw(url: string): string {
  return redactSecrets(url.replace(PATH_KEY, '$1[redacted]').replace(SECRET_PARAM, '$1[redacted]'));
}

/**
 * Removes secrets that can sit in a URL, however it is spelt: the key segment of
 * `/v1/{network}/{apiKey}`, credential query parameters (`apiKey`, `key`, `token`...) and any
 * key-shaped run of characters anywhere. A percent-encoded URL is redacted in its decoded form,
 * so encoding a key does not hide it from the redaction. Logs and messages only see the result.
 */
export function redactUrl(url: string): string {
  if (url.includes('%')) {
    try {
      const decoded = decodeURIComponent(url);
      if (decoded !== url) return redactRaw(decoded);
    } catch {
      // Malformed escapes: redact the raw text as it is.
    }
  }
  return redactRaw(url);
}

const MAX_MESSAGE = 300;
const SAFE_FIELDS = ['code', 'statusCode', 'errno', 'syscall', 'signal', 'severity'] as const;

interface SafeError {
  type: string;
  message: string;
  stack?: string;
  cause?: SafeError;
  [field: string]: unknown;
}

/**
 * Errors as they may be logged: class, code and a short message, never the values a query was
 * run with. Drizzle's query errors carry the SQL text and every parameter (password hashes, key
 * hashes and ciphertexts) in their message, stack and fields; the driver's own errors carry
 * row values in `detail`. Only a short allowlist of fields is kept, the message is cut, and the
 * stack keeps its frames but not the message lines above them.
 */
export function serializeError(err: unknown, depth = 0): SafeError {
  if (serialized.has(err as object)) return err as SafeError;
  const out = describe(err, depth);
  serialized.add(out);
  return out;
}

// Already made safe (a caller serialised it before logging): the logger's serializer keeps it.
const serialized = new WeakSet<object>();

function describe(err: unknown, depth: number): SafeError {
  if (!(err instanceof Error)) return { type: typeof err, message: redactSecrets(String(err)).slice(0, MAX_MESSAGE) };
  const e = err as Error & Record<string, unknown>;
  const type = e.constructor?.name && e.constructor.name !== 'Object' ? e.constructor.name : e.name;
  // Drizzle's message is `Failed query: <sql>\nparams: <values>`; the driver's own errors keep theirs.
  const carriesQuery = type === 'DrizzleQueryError' || e.message.startsWith('Failed query:');
  // A query error's own message is the SQL and its parameters: say only what failed, the cause says why.
  const raw = carriesQuery ? 'database query failed' : e.message;
  const message = redactSecrets(raw.split('\n', 1)[0] ?? '').slice(0, MAX_MESSAGE);
  const out: SafeError = { type, message };
  for (const f of SAFE_FIELDS) {
    const v = e[f];
    if (typeof v === 'string' || typeof v === 'number') out[f] = typeof v === 'string' ? v.slice(0, 64) : v;
  }
  if (typeof e.stack === 'string') {
    const frames = e.stack.split('\n').filter((l) => /^\s+at /.test(l));
    out.stack = [`${type}: ${message}`, ...frames].join('\n');
  }
  if (e.cause !== undefined && depth < 3) {
    out.cause = serializeError(e.cause, depth + 1);
    // A query error says why through its cause: the database's code (SQLSTATE) is shown beside the class.
    if (carriesQuery && out.code === undefined && out.cause.code !== undefined) out.code = out.cause.code;
  }
  return out;
}
