// Shared by the weak-secret tests (C59): whether a start with the given settings passes the check.
import { ConfigError, loadConfig } from '../../src/config/load.ts';
import { refuseWeakSecrets } from '../../src/config/weak-secrets.ts';

/** How a start with this one secret ends: the ConfigError's message, or null when it would go on. */
export function startWith(env: Record<string, string>, devnet = false): string | null {
  try {
    refuseWeakSecrets(loadConfig({ env: { DATA_DIR: 'memory', ...env }, devnet }));
    return null;
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
}
