// Objects under way that come and go all the time, kept where the garbage collector lets them go
// as soon as they leave (C48's attempt watch, C57's connection drain).

/**
 * Objects under way (attempts, connections), each in a numbered slot reused through a free list.
 * Not a `Set`: a Set under steady adding and deleting rebuilds its table every few dozen entries,
 * and a table given up still points at the entries it held. Once such a table is in V8's old
 * generation, a scavenge takes those pointers as roots (it cannot know the table is dead), so the
 * entries, and all they reach, outlive their use and are promoted: a forwarded call kept 2,381
 * bytes past a young collection where the bare proxy keeps 160 (bench/README.md: "Garbage that
 * lives too long"). A slot is emptied when its object leaves; the arrays grow only to the most
 * objects ever under way at once, and are never rebuilt after.
 */
export class Slots<T extends object> {
  readonly #items: Array<T | undefined> = [];
  readonly #free: number[] = [];
  #size = 0;

  /** Objects in a slot now. */
  get size(): number {
    return this.#size;
  }

  /** Puts `item` in a free slot; returns the slot's number, which the caller keeps for {@link remove}. */
  add(item: T): number {
    const slot = this.#free.length > 0 ? (this.#free.pop() as number) : this.#items.length;
    this.#items[slot] = item;
    this.#size++;
    return slot;
  }

  /** Empties `slot` if `item` is in it (a second removal, or a stale number, changes nothing). */
  remove(slot: number, item: T): void {
    if (this.#items[slot] !== item) return;
    this.#items[slot] = undefined;
    this.#free.push(slot);
    this.#size--;
  }

  /** Calls `fn` for each object in a slot; one removed meanwhile (by `fn` too) is not visited after. */
  forEach(fn: (item: T) => void): void {
    const items = this.#items;
    for (let i = 0; i < items.length; i++) {
      const item = items[i];
      if (item !== undefined) fn(item);
    }
  }
}
