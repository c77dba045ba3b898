// Which new passwords are accepted (C5).
import { readFileSync } from 'node:fs';
import { badRequest } from '../errors/http.ts';

const LIST_FILE = new URL('./common-passwords.txt', import.meta.url);

/** C5: at least 8 characters (the schema checks the raw length; this the length without padding). */
const MIN_LENGTH = 8;

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
  // Spaces around, doubled or inside do not make a common password another one ("1234567 ", "pass word").
  const folded = p.toLowerCase().trim().replace(/\s+/gu, ' ');
  // C5's 8 characters count without the padding: "1234567 " is the 7 characters it looks like.
  if ([...folded].length < MIN_LENGTH) return `must have at least ${MIN_LENGTH} characters besides spaces around or repeated inside it`;
  if (commonPasswords().has(folded) || commonPasswords().has(folded.replace(/ /g, ''))) return 'is one of the most common passwords; choose another';
  return null;
}

/** Throws 400 VALIDATION_ERROR naming `field` (e.g. `body.password`) when the password is refused. */
export function checkNewPassword(password: string, field: string): void {
  const problem = passwordProblem(password);
  if (problem) throw badRequest(`Invalid request: ${field} ${problem}`, [{ field, message: problem }]);
}
