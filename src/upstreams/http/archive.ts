// Which calls want an archive node (C26).
import { methodFacts } from '../../methods/catalogue.ts';

/**
 * Which calls want an archive node (C26): a full node keeps the state of the last
 * `pruneDepthBlocks` blocks only, so state reads at an older block go to upstreams marked
 * `archive` first. Which methods read state at their block, and which prefer archive nodes
 * whatever their block, is the method catalogue's `archive` rule (src/methods/catalogue.ts).
 */

/** True when one of `methods` may need state older than a full node keeps. */
export function mayNeedArchive(methods: readonly string[]): boolean {
  for (const m of methods) if (methodFacts(m)?.archive) return true;
  return false;
}

/**
 * True when a method always prefers archive nodes, or the request reads state at `block` (the
 * oldest block its calls name, as the gateway judged it) more than `pruneDepth` blocks below
 * `head`. Unknown head, tags and block hashes (`block` null) count as recent: nothing proves them old.
 */
export function needsArchive(methods: readonly string[], block: number | null | undefined, head: number | null, pruneDepth: number): boolean {
  let byBlock = false;
  for (const m of methods) {
    const rule = methodFacts(m)?.archive;
    if (rule === 'always') return true;
    if (rule === 'block') byBlock = true;
  }
  return byBlock && head !== null && block !== null && block !== undefined && head - block > pruneDepth;
}
