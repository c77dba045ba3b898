// C52 on the devnet: the admin token made for `npm run admin`, and the address of the gateway it is for.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** The file of the devnet's admin token, in the devnet's folder of the data folder. */
export const adminTokenFile = (dataDir: string) => path.resolve(dataDir, 'devnet', 'admin-token');

/**
 * The file of the address the devnet's gateway listens on, beside its admin token: the admin
 * command uses the devnet's token only for that gateway (C52), never for another one it is sent to.
 */
export const adminUrlFile = (dataDir: string) => path.resolve(dataDir, 'devnet', 'admin-url');

/**
 * C52: records the address of the gateway that serves the devnet's admin token, once it listens;
 * `url` undefined removes the record (the gateway runs with an ADMIN_TOKEN of its own).
 */
export function recordDevnetAdminUrl(dataDir: string, url: string | undefined): void {
  if (dataDir === 'memory') return;
  const file = adminUrlFile(dataDir);
  if (url === undefined) {
    rmSync(file, { force: true });
    return;
  }
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(file, `${url}\n`, { mode: 0o600 });
}

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
