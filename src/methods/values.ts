/**
 * Values inside params read the way nodes read them (C54), and written back in one canonical
 * form: quantities with any `0x`/`0X` case or as decimals of any length, block references in every
 * form the standard allows (C53: number, tag, 32-byte hash, EIP-1898 `{blockNumber}` and
 * `{blockHash, requireCanonical}`), member names as a Go node matches them (escapes decoded, case
 * folded). What the gateway judges is read here, and what it forwards is written here.
 */

export const MAX_UINT64 = 0xffff_ffff_ffff_ffffn;

/** A quantity as a node reads it: its value, `null` when the value is not a quantity, `NaN`-like `false` when it is too long to hold 256 bits. */
export type Quantity = bigint | null;

const HEX_QUANTITY = /^0[xX]([0-9a-fA-F]+)$/;
const DECIMAL = /^[0-9]+$/;

/**
 * A quantity as nodes read it, string or number: hex with `0x` or `0X` and digits of either case
 * (leading zeros allowed), or decimal digits of any length; a JSON number when it is a safe
 * non-negative integer. Null when it is none of these (a tag, a malformed text, a fraction). A
 * value of more than 256 bits reads as 2^256 (anything that large is refused the same way).
 */
export function readQuantity(v: unknown): Quantity {
  if (typeof v === 'number') return Number.isSafeInteger(v) && v >= 0 ? BigInt(v) : null;
  if (typeof v !== 'string') return null;
  const hex = HEX_QUANTITY.exec(v);
  if (hex) {
    const digits = stripZeros(hex[1] as string);
    return digits.length > 64 ? 1n << 256n : BigInt(`0x${digits || '0'}`);
  }
  if (DECIMAL.test(v)) {
    const digits = stripZeros(v);
    return digits.length > 78 ? 1n << 256n : BigInt(digits || '0');
  }
  return null;
}

function stripZeros(digits: string): string {
  let i = 0;
  while (i < digits.length && digits.charCodeAt(i) === 0x30) i++;
  return i === 0 ? digits : digits.slice(i);
}

/** The canonical text of a quantity: `0x`, lower-case digits, no leading zero. */
export const quantityText = (n: bigint): string => `0x${n.toString(16)}`;

export type BlockTag = 'latest' | 'pending' | 'safe' | 'finalized' | 'earliest';
const TAGS: ReadonlySet<string> = new Set<BlockTag>(['latest', 'pending', 'safe', 'finalized', 'earliest']);

/** A block parameter as the gateway judged it. */
export type BlockRef =
  | { readonly kind: 'number'; readonly number: bigint }
  | { readonly kind: 'tag'; readonly tag: BlockTag }
  | { readonly kind: 'hash'; readonly hash: string; readonly requireCanonical: boolean }
  /** No block given: the node reads `latest`. */
  | { readonly kind: 'absent' }
  | { readonly kind: 'invalid'; readonly why: string };

const ABSENT: BlockRef = Object.freeze({ kind: 'absent' });
const HASH = /^0[xX][0-9a-fA-F]{64}$/;
export const isHash = (v: unknown): v is string => typeof v === 'string' && HASH.test(v);

/**
 * A block parameter as nodes read it. `hashAllowed`: the spec's `BlockNumberOrTagOrHash`, where a
 * 32-byte hash and the EIP-1898 objects are allowed too (a 66-character value is a hash there, as
 * geth reads it; elsewhere it is a number, far above 2^64-1). Numbers above 2^64-1 are invalid (C50).
 */
export function readBlock(v: unknown, hashAllowed: boolean): BlockRef {
  if (v === undefined || v === null) return ABSENT;
  if (typeof v === 'string') {
    if (TAGS.has(v)) return { kind: 'tag', tag: v as BlockTag };
    if (hashAllowed && HASH.test(v)) return { kind: 'hash', hash: v.toLowerCase(), requireCanonical: false };
    return numberRef(v);
  }
  if (typeof v === 'number') return numberRef(v);
  if (typeof v === 'object' && !Array.isArray(v)) {
    if (!hashAllowed) return { kind: 'invalid', why: 'a block object (EIP-1898) is not allowed here: name the block by number or tag' };
    // EIP-1898, member names as a Go node reads them.
    let blockHash: unknown;
    let blockNumber: unknown;
    let requireCanonical: unknown;
    for (const [name, value] of Object.entries(v as Record<string, unknown>)) {
      const c = canonicalMember(name, BLOCK_OBJECT);
      if (c === 'blockHash') blockHash = value;
      else if (c === 'blockNumber') blockNumber = value;
      else if (c === 'requireCanonical') requireCanonical = value;
      else return { kind: 'invalid', why: `a block object has only blockHash, requireCanonical or blockNumber, not "${name.slice(0, 64)}"` };
    }
    if (blockHash !== undefined && blockNumber !== undefined) return { kind: 'invalid', why: 'a block object names blockHash or blockNumber, not both' };
    if (requireCanonical !== undefined && typeof requireCanonical !== 'boolean') return { kind: 'invalid', why: 'requireCanonical must be true or false' };
    if (blockHash !== undefined) {
      if (!isHash(blockHash)) return { kind: 'invalid', why: 'blockHash must be 32 bytes of hex' };
      return { kind: 'hash', hash: blockHash.toLowerCase(), requireCanonical: requireCanonical === true };
    }
    if (requireCanonical !== undefined) return { kind: 'invalid', why: 'requireCanonical goes with blockHash' };
    if (blockNumber === undefined || blockNumber === null) return { kind: 'invalid', why: 'a block object names blockHash or blockNumber' };
    const inner = readBlock(blockNumber, false);
    return inner.kind === 'absent' ? { kind: 'invalid', why: 'blockNumber must be a number or tag' } : inner;
  }
  return { kind: 'invalid', why: 'a block is a number, a tag or a block hash' };
}

function numberRef(v: string | number): BlockRef {
  const n = readQuantity(v);
  if (n === null) return { kind: 'invalid', why: 'a block is a number (0x hex), a tag (latest, pending, safe, finalized, earliest) or, where allowed, a block hash' };
  if (n > MAX_UINT64) return { kind: 'invalid', why: 'block number above 2^64-1' };
  return { kind: 'number', number: n };
}

/**
 * The canonical JSON value of a judged block: a number as a hex quantity, a tag as itself, a hash
 * in lower case; `original` was an object (EIP-1898): the canonical object.
 */
export function blockValue(ref: BlockRef, original: unknown): unknown {
  const object = typeof original === 'object' && original !== null;
  switch (ref.kind) {
    case 'number':
      return object ? { blockNumber: quantityText(ref.number) } : quantityText(ref.number);
    case 'tag':
      return object ? { blockNumber: ref.tag } : ref.tag;
    case 'hash':
      return object ? (ref.requireCanonical ? { blockHash: ref.hash, requireCanonical: true } : { blockHash: ref.hash }) : ref.hash;
    default:
      return original;
  }
}

/** The block number a reference fixes, as a JS number when it is one (`earliest` is 0), else null. */
export function blockNumberOf(ref: BlockRef | null | undefined): number | null {
  if (!ref) return null;
  if (ref.kind === 'number') return ref.number <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(ref.number) : null;
  if (ref.kind === 'tag' && ref.tag === 'earliest') return 0;
  return null;
}

/** Member names of objects the gateway judges, by the form a Go node folds them to. */
export type MemberSet = ReadonlyMap<string, string>;

/** A member set from its canonical names. */
export function members(...names: string[]): MemberSet {
  return new Map(names.map((n) => [fold(n), n]));
}

export const BLOCK_OBJECT = members('blockHash', 'blockNumber', 'requireCanonical');

/** The canonical spelling of a member name as a Go node matches it (case folded), or undefined when the set has none. */
export function canonicalMember(name: string, set: MemberSet): string | undefined {
  return set.get(fold(name));
}

/** A member name as a Go node compares it: case folded the way Go's `strings.EqualFold` does for these names (ſ is s, K is k). */
export function fold(name: string): string {
  return name.toUpperCase().toLowerCase();
}
