import { readFileSync } from 'node:fs';
import { badRequest } from '../errors/http.ts';

const LIST_FILE = new URL('./common-passwords.txt', import.meta.url);

let common: Set<string> | undefined;
function commonPasswords(): Set<string> {
  common ??= new Set(
    readFileSync(LIST_FILE, 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#')),
  );
  return common;
}

/** Why a new password is refused, or null when it may be used. Length is the schema's job (C5). */
export function passwordProblem(password: string): string | null {
  const p = password.normalize('NFKC');
  if (/^\s*$/u.test(p)) return 'must not be only spaces';
  if (/^(.)\1*$/su.test(p)) return 'must not be one character repeated';
  if (commonPasswords().has(p.toLowerCase())) return 'is one of the most common passwords; choose another';
  return null;
}

/** Throws 400 VALIDATION_ERROR naming `field` (e.g. `body.password`) when the password is refused. */
export function checkNewPassword(password: string, field: string): void {
  const problem = passwordProblem(password);
  if (problem) throw badRequest(`Invalid request: ${field} ${problem}`, [{ field, message: problem }]);
}
