/**
 * Reading JSON text without re-encoding it: the spans of a batch's elements, of an object's
 * top-level members and of its "id". The gateway answers with ids exactly as the client wrote
 * them (C23: 2^53+1 stays 2^53+1), passes node answers on byte for byte, and judges a call by the
 * member names as written (a node may read them differently from JSON.parse). Input is JSON that
 * JSON.parse accepted; these scanners only look at its structure.
 */

const isWs = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/** JSON text as characters (a string) or as UTF-8 bytes (a node's answer, never decoded): the structure is ASCII either way. */
type Text = string | Buffer;

/**
 * The scanner, written once and made for each kind of text: `code(t, i)` reads the character (or
 * byte) at `i`, `quote(t, from)` finds the next `"`. Each instance is specialised by V8 for its
 * kind, so the string path pays nothing for the byte path.
 */
function scanner<T extends Text>(code: (t: T, i: number) => number, quote: (t: T, from: number) => number) {
  function skipWs(t: T, i: number): number {
    while (i < t.length && isWs(code(t, i))) i++;
    return i;
  }

  /** Index just past the JSON value that starts at `i` (the text's length when it does not end). */
  function skipValue(t: T, i: number): number {
    const c = code(t, i);
    if (c === 0x22) {
      // A string ends at the first quote not escaped by an odd run of backslashes; indexOf jumps
      // over long hex payloads far faster than a loop over characters.
      let q = quote(t, i + 1);
      while (q !== -1) {
        let b = q - 1;
        while (code(t, b) === 0x5c) b--;
        if ((q - 1 - b) % 2 === 0) return q + 1;
        q = quote(t, q + 1);
      }
      return t.length;
    }
    if (c === 0x7b || c === 0x5b) {
      let depth = 0;
      for (let j = i; j < t.length; j++) {
        const d = code(t, j);
        if (d === 0x22) j = skipValue(t, j) - 1;
        else if (d === 0x7b || d === 0x5b) depth++;
        else if (d === 0x7d || d === 0x5d) {
          depth--;
          if (depth === 0) return j + 1;
        }
      }
      return t.length;
    }
    // number, true, false, null
    let j = i;
    while (j < t.length) {
      const d = code(t, j);
      if (d === 0x2c || d === 0x7d || d === 0x5d || isWs(d)) break;
      j++;
    }
    return j;
  }

  /** Whether the member name between `start` and `end` (inside its quotes) is `name`, as written. */
  function nameIs(t: T, start: number, end: number, name: string): boolean {
    if (end - start !== name.length) return false;
    for (let k = 0; k < name.length; k++) if (code(t, start + k) !== name.charCodeAt(k)) return false;
    return true;
  }

  /** The integer `code` member of the error object at `i`; NaN when it has none or another value. */
  function errorCodeAt(t: T, i: number): number {
    i = skipWs(t, i);
    if (code(t, i) !== 0x7b) return Number.NaN;
    i = skipWs(t, i + 1);
    while (code(t, i) === 0x22) {
      const nameEnd = skipValue(t, i);
      const colon = skipWs(t, nameEnd);
      if (code(t, colon) !== 0x3a) return Number.NaN;
      const valueAt = skipWs(t, colon + 1);
      const valueEnd = skipValue(t, valueAt);
      if (nameIs(t, i + 1, nameEnd - 1, 'code')) return integerAt(t, valueAt, valueEnd);
      const next = skipWs(t, valueEnd);
      if (code(t, next) !== 0x2c) return Number.NaN;
      i = skipWs(t, next + 1);
    }
    return Number.NaN;
  }

  /** The integer written between `start` and `end` (at most 10 digits, optionally negative); NaN otherwise. */
  function integerAt(t: T, start: number, end: number): number {
    const negative = code(t, start) === 0x2d;
    let i = negative ? start + 1 : start;
    if (i === end || end - i > 10) return Number.NaN;
    let n = 0;
    for (; i < end; i++) {
      const d = code(t, i) - 0x30;
      if (d < 0 || d > 9) return Number.NaN;
      n = n * 10 + d;
    }
    return negative ? -n : n;
  }

  /** See {@link answerErrorCode}. */
  function answerError(t: T): number | null {
    let i = skipWs(t, 0);
    if (code(t, i) !== 0x7b) return null;
    i = skipWs(t, i + 1);
    while (code(t, i) === 0x22) {
      const nameEnd = skipValue(t, i);
      const colon = skipWs(t, nameEnd);
      if (nameEnd >= t.length || code(t, colon) !== 0x3a) return null;
      const valueAt = skipWs(t, colon + 1);
      if (nameIs(t, i + 1, nameEnd - 1, 'result')) return null;
      if (nameIs(t, i + 1, nameEnd - 1, 'error')) return errorCodeAt(t, valueAt);
      const next = skipWs(t, skipValue(t, valueAt));
      if (code(t, next) !== 0x2c) return null;
      i = skipWs(t, next + 1);
    }
    return null;
  }

  /** See {@link answerIdIsNull}. */
  function answerIdNull(t: T): boolean {
    let i = skipWs(t, 0);
    if (code(t, i) !== 0x7b) return false;
    i = skipWs(t, i + 1);
    while (code(t, i) === 0x22) {
      const nameEnd = skipValue(t, i);
      const colon = skipWs(t, nameEnd);
      if (nameEnd >= t.length || code(t, colon) !== 0x3a) return false;
      const valueAt = skipWs(t, colon + 1);
      if (nameIs(t, i + 1, nameEnd - 1, 'result')) return false;
      if (nameIs(t, i + 1, nameEnd - 1, 'id')) return code(t, valueAt) === 0x6e;
      const next = skipWs(t, skipValue(t, valueAt));
      if (code(t, next) !== 0x2c) return false;
      i = skipWs(t, next + 1);
    }
    return false;
  }

  return { skipWs, skipValue, answerError, answerIdNull };
}

const chars = scanner<string>(
  (t, i) => t.charCodeAt(i),
  (t, from) => t.indexOf('"', from),
);
const bytes = scanner<Buffer>(
  (t, i) => t[i] ?? -1,
  (t, from) => t.indexOf(0x22, from),
);
export const skipWs = chars.skipWs;

/** Index just past the JSON value that starts at `i`. */
export const skipValue = chars.skipValue;

/**
 * The JSON-RPC error code of a node's answer to one call, read from its text or its bytes as
 * they came: null when it holds a `result` (or cannot be read), NaN for an error without an
 * integer code. Reads the answer only up to its `result` or `error` member (nodes write `jsonrpc`
 * and `id` first): a large result is never walked through, and nothing is allocated.
 */
export function answerErrorCode(t: Text): number | null {
  return typeof t === 'string' ? chars.answerError(t) : bytes.answerError(t);
}

/**
 * Whether a node's answer to one call has `"id": null`: what a node writes when it could not read
 * the call at all (anvil for a lone surrogate escape, which JSON.parse accepts). Reads only up to
 * the `id`, and never through a `result` (a node that answers one has read the call).
 */
export function answerIdIsNull(t: Text): boolean {
  return typeof t === 'string' ? chars.answerIdNull(t) : bytes.answerIdNull(t);
}

/**
 * Whether the JSON text `t` nests arrays and objects more than `max` levels deep (strings are
 * jumped over). A text shorter than 2 * max + 2 characters cannot, and is not scanned.
 */
export function nestsDeeperThan(t: string, max: number): boolean {
  if (t.length < 2 * max + 2) return false;
  let depth = 0;
  for (let j = 0; j < t.length; j++) {
    const d = t.charCodeAt(j);
    if (d === 0x22) j = skipValue(t, j) - 1;
    else if (d === 0x7b || d === 0x5b) {
      if (++depth > max) return true;
    } else if (d === 0x7d || d === 0x5d) depth--;
  }
  return false;
}

/** The text of each element of the top-level array in `t`. */
export function arrayElements(t: string): string[] {
  const out: string[] = [];
  let i = skipWs(t, 0);
  if (t.charCodeAt(i) !== 0x5b) return out;
  i = skipWs(t, i + 1);
  if (t.charCodeAt(i) === 0x5d) return out;
  while (i < t.length) {
    const end = skipValue(t, i);
    out.push(t.slice(i, end));
    i = skipWs(t, end);
    if (t.charCodeAt(i) !== 0x2c) break;
    i = skipWs(t, i + 1);
  }
  return out;
}

/** Start and end of the value of the top-level member `name` of the object text `t`, or null. */
export function memberSpan(t: string, name: string, from = 0, to = t.length): [number, number] | null {
  const quoted = `"${name}"`;
  let i = skipWs(t, from);
  if (t.charCodeAt(i) !== 0x7b) return null;
  i = skipWs(t, i + 1);
  while (i < to && t.charCodeAt(i) === 0x22) {
    const keyEnd = skipValue(t, i);
    const match = keyEnd - i === quoted.length && t.startsWith(quoted, i);
    i = skipWs(t, keyEnd);
    if (t.charCodeAt(i) !== 0x3a) return null;
    const valStart = skipWs(t, i + 1);
    const valEnd = skipValue(t, valStart);
    if (match) return [valStart, valEnd];
    i = skipWs(t, valEnd);
    if (t.charCodeAt(i) !== 0x2c) return null;
    i = skipWs(t, i + 1);
  }
  return null;
}

/**
 * Visits the top-level member names of the object text `t` in order: `visit(start, end)` gets the
 * span of each name as written between its quotes (escapes not decoded, a repeated name each
 * time); returning false stops the walk. Returns false when `t` is not an object. `from`: where
 * the object starts (its `{`, or blanks before it), for an object inside a larger text. One pass over
 * the object text, nothing allocated.
 */
export function eachMemberName(t: string, visit: (start: number, end: number) => boolean | undefined, from = 0): boolean {
  if (t.charCodeAt(skipWs(t, from)) !== 0x7b) return false;
  for (let i = firstMemberAt(t, from); i !== -1; ) {
    const keyEnd = skipValue(t, i);
    if (visit(i + 1, keyEnd - 1) === false) return true;
    i = nextMemberAt(t, keyEnd);
  }
  return true;
}

/**
 * Where the first top-level member name of the object text `t` starts (its opening quote), or -1
 * when `t` is not an object or has no member. With {@link nextMemberAt}, the walk of
 * {@link eachMemberName} for a caller that runs per call and should make no closure.
 */
export function firstMemberAt(t: string, from = 0): number {
  let i = skipWs(t, from);
  if (t.charCodeAt(i) !== 0x7b) return -1;
  i = skipWs(t, i + 1);
  return t.charCodeAt(i) === 0x22 ? i : -1;
}

/** Where the member name after the one that ends at `nameEnd` (just past its closing quote) starts, or -1 after the last. */
export function nextMemberAt(t: string, nameEnd: number): number {
  let i = skipWs(t, nameEnd);
  if (t.charCodeAt(i) !== 0x3a) return -1;
  i = skipWs(t, skipValue(t, skipWs(t, i + 1)));
  if (t.charCodeAt(i) !== 0x2c) return -1;
  i = skipWs(t, i + 1);
  return t.charCodeAt(i) === 0x22 ? i : -1;
}

/** The top-level member names of the object text `t` exactly as written (escapes kept, repeats kept), or null when it is not an object. */
export function memberNames(t: string): string[] | null {
  const names: string[] = [];
  return eachMemberName(t, (start, end) => {
    names.push(t.slice(start, end));
    return true;
  })
    ? names
    : null;
}

/** Start and end of the value of the top-level `"id"` of the object text `t`, or null. */
export function idSpan(t: string): [number, number] | null {
  return memberSpan(t, 'id');
}

/** The `id` of an object text exactly as written, or `null` when it has none. */
export function idText(t: string): string {
  const span = idSpan(t);
  return span ? t.slice(span[0], span[1]) : 'null';
}

/** The object text with its top-level id replaced by `id` (text); unchanged when it has none. */
export function withId(t: string, id: string): string {
  const span = idSpan(t);
  return span ? t.slice(0, span[0]) + id + t.slice(span[1]) : t;
}

const ANSWER_MEMBERS: ReadonlySet<string> = new Set(['jsonrpc', 'id', 'result', 'error']);

/**
 * C54: whether a node's answer to one call names each of its members once and plainly, so that
 * every JSON reader sees the same answer. An answer object whose top-level member names repeat,
 * or spell `jsonrpc`, `id`, `result` or `error` with an escape or in another case, reads
 * differently to different parsers (JSON.parse keeps the last of a repeated member, a scanner
 * the first, a Go client folds case): the gateway cannot decide on it. True for text that is not
 * an object (other checks judge that).
 */
export function answerMembersPlain(t: string): boolean {
  let plain = true;
  // An answer has a handful of members: a list is cheaper than a set.
  const names: string[] = [];
  eachMemberName(t, (start, end) => {
    const written = t.slice(start, end);
    const lower = written.toLowerCase();
    if (written.includes('\\') || (ANSWER_MEMBERS.has(lower) && written !== lower) || names.includes(lower)) {
      plain = false;
      return false;
    }
    names.push(lower);
    return true;
  });
  return plain;
}
