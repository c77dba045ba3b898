// C59: which secret values a gateway outside the devnet refuses to start with: the ones the
// repository shows (examples, docs, anvil's public keys) and the ones of obviously low entropy.
// test/config/example-secrets.test.ts scans the repository's files for example secrets, so an
// example added later without being listed here fails that test.
import { ConfigError } from '../errors/config.ts';
import type { Config } from './schema.ts';

/**
 * The private keys anvil derives from its default mnemonic "test test ... junk" (m/44'/60'/0'/0/i):
 * public knowledge (docs/devnet.md lists them), the devnet's dev accounts, never a real wallet.
 */
export const ANVIL_DEV_KEYS = [
  '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
  '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
  '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a',
  '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6',
  '0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a',
  '0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba',
  '0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e',
  '0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356',
  '0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97',
  '0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6',
] as const;

/** Placeholders the repository's examples show for secrets (deploy/kubernetes/secret.example.yaml). */
const EXAMPLE_SECRETS = ['CHANGE-ME-32-characters-or-more-000000'];

const SHIPPED = new Set([...EXAMPLE_SECRETS, ...ANVIL_DEV_KEYS].map((s) => s.toLowerCase()));

/** Words that only a placeholder holds. */
const PLACEHOLDER_WORDS = /change[-_ ]?me|replace[-_ ]?me|placeholder/i;

/** Fewer distinct characters than this (or than a fifth of the length, for short values) is a short alphabet. */
const MIN_DISTINCT = 8;
/** One character this many times in a row. */
const MAX_RUN = 10;
/** This many characters each one code point above (or below) the one before: "abcdefghijkl". */
const MAX_SEQUENCE = 12;

/**
 * Why `value` is a secret no one may run with, or null when it is none of these:
 * - a value the repository shows (an example, or one of anvil's public dev keys);
 * - a placeholder word in it (change-me, replace-me, placeholder);
 * - obviously low entropy: fewer than min(8, length / 5) distinct characters, one character 10
 *   times in a row, a run of 12 consecutive characters ("abcdefghijkl", "lkjihgfedcba"), or a
 *   shorter piece repeated to make the whole.
 *
 * Generated secrets pass: a value of `openssl rand -hex 32` (64 hex digits) fails with odds of
 * about 1 in 10^9 (a run of 10 of one digit; fewer than 8 distinct digits is 1 in 10^19, and hex
 * has no 12 consecutive characters at all); `openssl rand -hex 8` or `-hex 16` (16 or 32 digits)
 * and base64 values of 24 or more characters about as rarely. test/config/weak-secrets.test.ts
 * draws 20,000 values of each of these shapes and sees every one pass.
 * A private key (0x and 64 hex digits) is judged on its digits.
 */
export function weakSecretReason(value: string): string | null {
  const shown = shownSecretReason(value);
  if (shown) return shown;
  const text = /^0x[0-9a-fA-F]{64}$/.test(value) ? value.slice(2).toLowerCase() : value;
  const distinct = new Set(text).size;
  if (distinct < Math.min(MIN_DISTINCT, Math.ceil(text.length / 5))) return `it has only ${distinct} distinct characters`;
  let same = 1;
  let up = 1;
  let down = 1;
  for (let i = 1; i < text.length; i++) {
    const step = text.charCodeAt(i) - text.charCodeAt(i - 1);
    same = step === 0 ? same + 1 : 1;
    up = step === 1 ? up + 1 : 1;
    down = step === -1 ? down + 1 : 1;
    if (same >= MAX_RUN) return `it repeats one character ${MAX_RUN} times in a row`;
    if (up >= MAX_SEQUENCE || down >= MAX_SEQUENCE) return `it holds a run of ${MAX_SEQUENCE} consecutive characters`;
  }
  for (let period = 1; period <= text.length / 2; period++) {
    if (text.length % period === 0 && text.slice(0, period).repeat(text.length / period) === text) return 'it is one short piece repeated';
  }
  return null;
}

/** Why `value` is a secret the repository shows (an example, a placeholder), or null. */
function shownSecretReason(value: string): string | null {
  if (SHIPPED.has(value.toLowerCase())) return 'it is an example shown in the repository (public, anyone can use it)';
  if (PLACEHOLDER_WORDS.test(value)) return 'it is a placeholder';
  return null;
}

/** A secret setting as the reader set it: its environment variable (when it has one) and its path. */
interface SecretSetting {
  label: string;
  value: string | null | undefined;
  /** A private key: made differently from a token. */
  key?: boolean;
  /**
   * The password in a database or Redis URL: refused when the repository shows it, not judged on
   * its entropy (the operator's database sets it, and the gateway cannot make it anew).
   */
  password?: boolean;
}

/** The password of a URL, decoded; null when it has none or is not a URL. */
function urlPassword(url: string | null): string | null {
  if (!url) return null;
  try {
    const { password } = new URL(url);
    return password ? decodeURIComponent(password) : null;
  } catch {
    return null;
  }
}

function secretSettings(cfg: Config): SecretSetting[] {
  const out: SecretSetting[] = [
    { label: 'JWT_SECRET (auth.jwtSecret)', value: cfg.auth.jwtSecret },
    { label: 'KEY_ENCRYPTION_SECRET (keys.encryptionSecret)', value: cfg.keys.encryptionSecret },
    { label: 'ADMIN_TOKEN (admin.token)', value: cfg.admin.token },
    { label: 'METRICS_TOKEN (metrics.token)', value: cfg.metrics.token },
    { label: 'FAUCET_PRIVATE_KEY (faucet.privateKey)', value: cfg.faucet.privateKey, key: true },
    { label: 'SOLVER_PRIVATE_KEY (intents.solverPrivateKey)', value: cfg.intents.solverPrivateKey, key: true },
  ];
  for (const [slug, n] of Object.entries(cfg.faucet.networks)) {
    out.push({ label: `FAUCET_PRIVATE_KEY_${slug.toUpperCase().replaceAll('-', '_')} (faucet.networks.${slug}.privateKey)`, value: n.privateKey, key: true });
  }
  for (const [slug, k] of Object.entries(cfg.intents.solverPrivateKeys)) {
    out.push({ label: `SOLVER_PRIVATE_KEY_${slug.toUpperCase().replaceAll('-', '_')} (intents.solverPrivateKeys.${slug})`, value: k, key: true });
  }
  out.push({ label: "DATABASE_URL (storage.databaseUrl)'s password", value: urlPassword(cfg.storage.databaseUrl), password: true });
  out.push({ label: "REDIS_URL (redis.url)'s password", value: urlPassword(cfg.redis.url), password: true });
  for (const [i, node] of (cfg.redis.clusterNodes ?? []).entries()) {
    out.push({ label: `REDIS_CLUSTER_NODES (redis.clusterNodes.${i})'s password`, value: urlPassword(node), password: true });
  }
  return out;
}

/**
 * C59: outside `--devnet`, stops the start when a secret setting holds a value shipped in the
 * repository or of obviously low entropy, naming the setting (never the value) and how to make a
 * good one. Under the devnet the given secrets are left as they are (the devnet is local, and its
 * dev accounts' keys are anvil's public ones on purpose).
 */
export function refuseWeakSecrets(cfg: Config): void {
  if (cfg.devnet.enabled) return;
  for (const s of secretSettings(cfg)) {
    if (!s.value) continue;
    const reason = s.password ? shownSecretReason(s.value) : weakSecretReason(s.value);
    if (!reason) continue;
    if (s.password) throw new ConfigError(`${s.label}: refused, ${reason}; give your server's own password (e.g. one made with \`openssl rand -hex 24\`)`);
    const make = s.key ? 'a new wallet\'s key, e.g. `echo 0x$(openssl rand -hex 32)`' : 'one with `openssl rand -hex 32`';
    throw new ConfigError(`${s.label}: refused, ${reason}; outside --devnet a secret must be your own random value: make ${make}`);
  }
}
