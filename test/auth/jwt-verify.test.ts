import assert from 'node:assert/strict';
import { createHmac, createSecretKey, randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { jwtVerify, SignJWT } from 'jose';
import { verifyHs256 } from '../../src/auth/jwt-verify.ts';

// The synchronous HS256 verifier of the bearer hook (docs/scaling.md) against jose's jwtVerify, which the
// gateway used before with the same options: every token one accepts, the other accepts.
const raw = randomBytes(32);
const key = createSecretKey(raw);
const ISSUER = 'junction';
const REQUIRED = ['iss', 'sub', 'iat', 'exp', 'jti'];
// Both verifiers judge at this second, whatever the clock of the process (other tests in it may move it).
const now = Math.floor(Date.now() / 1000);
const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
const sign = (h: string, p: string, k: Buffer = raw) => createHmac('sha256', k).update(`${h}.${p}`).digest('base64url');
/** A token of any header and payload, signed with `k`. */
const token = (header: unknown, payload: unknown, k: Buffer = raw) => {
  const h = b64(header);
  const p = b64(payload);
  return `${h}.${p}.${sign(h, p, k)}`;
};
const claims = { typ: 'access', fam: 'f', sub: 'u1', iss: ISSUER, iat: now, exp: now + 600, jti: 'j1' };

const ours = (t: string): 'ok' | 'expired' | 'invalid' => {
  const v = verifyHs256(t, key, { issuer: ISSUER, required: REQUIRED, nowS: now });
  return v.ok ? 'ok' : v.reason;
};
const jose = async (t: string): Promise<'ok' | 'expired' | 'invalid'> => {
  try {
    await jwtVerify(t, raw, { issuer: ISSUER, algorithms: ['HS256'], requiredClaims: REQUIRED, currentDate: new Date(now * 1000) });
    return 'ok';
  } catch (err) {
    return (err as { code?: string }).code === 'ERR_JWT_EXPIRED' ? 'expired' : 'invalid';
  }
};

describe('verifyHs256 (the bearer hook, C5)', () => {
  test('a token jose signs verifies, with its claims', async () => {
    const t = await new SignJWT({ typ: 'access', fam: 'f' }).setProtectedHeader({ alg: 'HS256' }).setSubject('u1').setIssuer(ISSUER).setIssuedAt().setExpirationTime('15m').setJti('j').sign(raw);
    const v = verifyHs256(t, key, { issuer: ISSUER, required: REQUIRED });
    assert.ok(v.ok);
    assert.equal(v.claims.sub, 'u1');
    assert.equal(v.claims.fam, 'f');
  });

  const cases: Array<[string, string, 'ok' | 'expired' | 'invalid']> = [
    ['valid', token({ alg: 'HS256', typ: 'JWT' }, claims), 'ok'],
    ['another key', token({ alg: 'HS256' }, claims, randomBytes(32)), 'invalid'],
    ['alg none, empty signature', `${b64({ alg: 'none' })}.${b64(claims)}.`, 'invalid'],
    ['alg none, signed anyway', token({ alg: 'none' }, claims), 'invalid'],
    ['alg HS512 header over an HS256 signature', token({ alg: 'HS512' }, claims), 'invalid'],
    ['alg hs256 (case)', token({ alg: 'hs256' }, claims), 'invalid'],
    ['no alg', token({}, claims), 'invalid'],
    ['crit', token({ alg: 'HS256', crit: ['b64'], b64: false }, claims), 'invalid'],
    ['header an array', token([{ alg: 'HS256' }], claims), 'invalid'],
    ['header not JSON', token('{alg:HS256}', claims), 'invalid'],
    ['payload an array', token({ alg: 'HS256' }, [claims]), 'invalid'],
    ['payload null', token({ alg: 'HS256' }, null), 'invalid'],
    ['payload not UTF-8', (() => {
      const h = b64({ alg: 'HS256' });
      const p = Buffer.from([0x7b, 0xff, 0x7d]).toString('base64url');
      return `${h}.${p}.${sign(h, p)}`;
    })(), 'invalid'],
    ['expired', token({ alg: 'HS256' }, { ...claims, exp: now - 1 }), 'expired'],
    ['expires this second', token({ alg: 'HS256' }, { ...claims, exp: now }), 'expired'],
    ['exp a string', token({ alg: 'HS256' }, { ...claims, exp: String(now + 600) }), 'invalid'],
    ['iat a string', token({ alg: 'HS256' }, { ...claims, iat: String(now) }), 'invalid'],
    ['nbf in the future', token({ alg: 'HS256' }, { ...claims, nbf: now + 60 }), 'invalid'],
    ['nbf in the past', token({ alg: 'HS256' }, { ...claims, nbf: now - 60 }), 'ok'],
    ['another issuer', token({ alg: 'HS256' }, { ...claims, iss: 'other' }), 'invalid'],
    ...REQUIRED.map((c): [string, string, 'invalid'] => {
      const { [c as keyof typeof claims]: _, ...rest } = claims;
      return [`no ${c}`, token({ alg: 'HS256' }, rest), 'invalid'];
    }),
    ['two parts', token({ alg: 'HS256' }, claims).split('.').slice(0, 2).join('.'), 'invalid'],
    ['four parts', `${token({ alg: 'HS256' }, claims)}.x`, 'invalid'],
    ['a stray character in the signature', token({ alg: 'HS256' }, claims).replace(/(.{10})$/, '!$1'), 'invalid'],
    ['empty', '', 'invalid'],
  ];
  for (const [name, t, want] of cases) {
    test(`${name}: ${want}, as jose says`, async () => {
      assert.equal(ours(t), want);
      // jose is laxer only in how a signature may be written (the last two tests); every case here it judges the same.
      assert.equal(await jose(t), want);
    });
  }

  test('600 random mutations of a valid token: every one refused', () => {
    const valid = token({ alg: 'HS256' }, claims);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ ';
    let accepted = 0;
    for (let i = 0; i < 600; i++) {
      const chars = [...valid];
      const edits = 1 + (i % 3);
      for (let e = 0; e < edits; e++) {
        const at = Math.floor(Math.random() * chars.length);
        const op = Math.floor(Math.random() * 3);
        const c = alphabet[Math.floor(Math.random() * alphabet.length)] as string;
        if (op === 0) chars[at] = c;
        else if (op === 1) chars.splice(at, 0, c);
        else chars.splice(at, 1);
      }
      const t = chars.join('');
      if (t !== valid && ours(t) !== 'invalid') accepted++;
    }
    assert.equal(accepted, 0);
  });

  test('stricter than jose: a padded signature is refused (jose accepts it)', async () => {
    const t = `${token({ alg: 'HS256' }, claims)}=`;
    assert.equal(ours(t), 'invalid');
    assert.equal(await jose(t), 'ok');
  });

  test('stricter than jose: a signature re-encoded with extra low bits in its last character is refused (jose accepts it)', async () => {
    const valid = token({ alg: 'HS256' }, claims);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const last = valid.at(-1) as string;
    // 32 bytes in 43 characters leave the last one's two low bits unused: flip one.
    const twin = alphabet[alphabet.indexOf(last) ^ 1] as string;
    const t = `${valid.slice(0, -1)}${twin}`;
    assert.deepEqual(Buffer.from(t.split('.')[2] as string, 'base64url'), Buffer.from(valid.split('.')[2] as string, 'base64url'));
    assert.equal(ours(t), 'invalid');
    assert.equal(await jose(t), 'ok', 'jose decodes the signature and compares bytes');
  });
});
