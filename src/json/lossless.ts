/**
 * Reading JSON text without re-encoding it: the spans of a batch's elements, of an object's
 * top-level members and of its "id". The gateway answers with ids exactly as the client wrote
 * them (C23: 2^53+1 stays 2^53+1), passes node answers on byte for byte, and judges a call by the
 * member names as written (a node may read them differently from JSON.parse). Input is JSON that
 * JSON.parse accepted; these scanners only look at its structure.
 */

const isWs = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

function skipWs(t: string, i: number): number {
  while (i < t.length && isWs(t.charCodeAt(i))) i++;
  return i;
}

/** Index just past the JSON value that starts at `i`. */
export function skipValue(t: string, i: number): number {
  const c = t.charCodeAt(i);
  if (c === 0x22) {
    // A string ends at the first quote not escaped by an odd run of backslashes; indexOf jumps
    // over long hex payloads far faster than a loop over characters.
    let q = t.indexOf('"', i + 1);
    while (q !== -1) {
      let b = q - 1;
      while (t.charCodeAt(b) === 0x5c) b--;
      if ((q - 1 - b) % 2 === 0) return q + 1;
      q = t.indexOf('"', q + 1);
    }
    return t.length;
  }
  if (c === 0x7b || c === 0x5b) {
    let depth = 0;
    for (let j = i; j < t.length; j++) {
      const d = t.charCodeAt(j);
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
    const d = t.charCodeAt(j);
    if (d === 0x2c || d === 0x7d || d === 0x5d || isWs(d)) break;
    j++;
  }
  return j;
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
 * time); returning false stops the walk. Returns false when `t` is not an object. One pass over
 * the object text, nothing allocated.
 */
export function eachMemberName(t: string, visit: (start: number, end: number) => boolean | undefined): boolean {
  let i = skipWs(t, 0);
  if (t.charCodeAt(i) !== 0x7b) return false;
  i = skipWs(t, i + 1);
  while (i < t.length && t.charCodeAt(i) === 0x22) {
    const keyEnd = skipValue(t, i);
    if (visit(i + 1, keyEnd - 1) === false) return true;
    i = skipWs(t, keyEnd);
    if (t.charCodeAt(i) !== 0x3a) return true;
    i = skipWs(t, skipValue(t, skipWs(t, i + 1)));
    if (t.charCodeAt(i) !== 0x2c) return true;
    i = skipWs(t, i + 1);
  }
  return true;
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
