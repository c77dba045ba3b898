import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** The file of the devnet's admin token, in the devnet's folder of the data folder. */
export const adminTokenFile = (dataDir: string) => path.resolve(dataDir, 'devnet', 'admin-token');

/**
 * C52 on the devnet: the admin token when ADMIN_TOKEN is not set, so that `npm run admin` works
 * at once. Made once into DATA_DIR/devnet/admin-token (mode 0600) and kept across restarts; with
 * DATA_DIR=memory, made for this run only (`file` undefined). Never used outside `--devnet`.
 */
export function devnetAdminToken(dataDir: string): { token: string; file?: string } {
  if (dataDir === 'memory') return { token: randomBytes(24).toString('base64url') };
  const file = adminTokenFile(dataDir);
  try {
    const stored = readFileSync(file, 'utf8').trim();
    if (stored.length >= 16) return { token: stored, file };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const token = randomBytes(24).toString('base64url');
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return { token, file };
}
