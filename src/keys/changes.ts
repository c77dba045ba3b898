/**
 * The key-change listeners of one instance (C20): every change to a key is published here, so
 * caches of key lookups drop it at once; the cross-instance bus (bus.ts) relays changes from and
 * to other instances through the same listeners.
 */

/** Published after every change to a key, so caches of key lookups drop it at once (C20). */
export interface KeyChange {
  type: 'created' | 'updated' | 'revoked' | 'rotated' | 'deleted' | 'account';
  userId: string;
  keyId?: string;
  /** Hashes whose cached lookups are stale now. */
  keyHashes: string[];
}

export type KeyChangeListener = (change: KeyChange, remote: boolean) => void;

export class KeyChanges {
  readonly #listeners = new Set<KeyChangeListener>();

  /** Subscribe to key changes; returns the unsubscribe function. */
  on(listener: KeyChangeListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** `remote`: the change was made on another instance and arrived over the bus (C20). */
  emit(change: KeyChange, remote = false): void {
    for (const l of this.#listeners) l(change, remote);
  }
}
