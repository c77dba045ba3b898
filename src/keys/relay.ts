// Key changes between the workers of one gateway without Redis (WORKERS; docs/scaling.md
// "Workers"): C20 holds across workers as it does across instances with the Redis bus (bus.ts):
// a change made by one worker reaches the primary, which passes it to every other worker, where it
// is replayed on that worker's listeners (its key cache drops the key).
import type { IpcChannel } from '../storage/ipc.ts';
import type { KeyChange } from './changes.ts';
import type { KeyService } from './service.ts';

/** A worker's side: its own changes go to the primary, the others' are replayed here. Returns the unsubscribe. */
export function relayKeyChanges(channel: IpcChannel, keys: KeyService): () => void {
  channel.onNote('keys.change', (change) => keys.changes.emit(change as KeyChange, true));
  return keys.changes.on((change, remote) => {
    if (remote || channel.closed) return;
    channel.note('keys.change', change);
  });
}
