// C19: a key's prefix carries 32 random bits and is unique, so with many keys stored a new value
// now and then draws a prefix already taken; create and rotate then make another value instead of
// failing. The key service as the app makes it, on real storage of both kinds, with a maker of key
// values that repeats prefixes on purpose.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { AccountService } from '../../src/auth/accounts.ts';
import { Networks } from '../../src/chains/networks.ts';
import { loadConfig } from '../../src/config/load.ts';
import { uniqueViolation } from '../../src/errors/storage.ts';
import { hashKey } from '../../src/keys/crypto.ts';
import { KeyService } from '../../src/keys/service.ts';
import type { Storage } from '../../src/storage/db.ts';
import { storageBackends } from '../support/services.ts';
import { openTestStorage } from '../support/storage.ts';

const backends = await storageBackends();
const config = loadConfig({ env: {} });

for (const backend of backends) {
  describe(`a key prefix already taken on ${backend.name} (C19)`, { skip: backend.skip }, () => {
    let storage: Storage;
    let close: () => Promise<void>;
    let accounts: AccountService;
    let keys: KeyService;
    /** The random parts of the prefixes the next key values get, in turn. */
    let next: string[] = [];
    const made: string[] = [];
    before(async () => {
      ({ storage, close } = await openTestStorage(backend.name));
      accounts = new AccountService(storage.db, { passwordHashCost: 10 });
      const networks = new Networks(config, () => 'http://localhost:8080');
      const newKey = (tag: string) => {
        const part = next.shift();
        assert.ok(part, 'a key value asked for beyond the script');
        const prefix = `${tag}${part}`;
        made.push(prefix);
        return { prefix, key: `${prefix}${randomBytes(32).toString('base64url')}` };
      };
      keys = new KeyService({ db: storage.db, settings: config, networks, encryptionSecret: 'prefix-test-key-secret-0123456789abcdefgh', newKey });
    });
    after(() => close?.());
    const registerUser = () => accounts.register({ email: `prefix.${randomBytes(6).toString('hex')}@example.com`, password: 'correct horse battery', name: 'P' });

    test('create draws again when the prefix is taken, and the key it answers works by its own value', async () => {
      const user = await registerUser();
      next = ['aa000001'];
      const first = await keys.create(user.id, { name: 'first' });
      next = ['aa000001', 'aa000002'];
      made.length = 0;
      const second = await keys.create(user.id, { name: 'second' });
      assert.deepEqual(made, ['jk_live_aa000001', 'jk_live_aa000002'], 'the taken prefix, then a new one');
      assert.equal(second.prefix, 'jk_live_aa000002');
      assert.ok(keys.decryptKey(second).startsWith('jk_live_aa000002'));
      assert.equal((await keys.lookupByHash(hashKey(keys.decryptKey(second))))?.key.id, second.id);
      assert.equal((await keys.list(user.id, user)).length, 2, 'one key for each create, the first unchanged');
      assert.equal((await keys.lookupByHash(first.keyHash))?.key.id, first.id);
    });

    test('rotate draws again too; five taken prefixes in a row fail the call and change nothing', async () => {
      const user = await registerUser();
      next = ['bb000001'];
      const a = await keys.create(user.id, { name: 'a' });
      next = ['bb000002'];
      const b = await keys.create(user.id, { name: 'b' });
      next = ['bb000001', 'bb000003'];
      const rotated = await keys.rotate(user.id, b.id);
      assert.equal(rotated.prefix, 'jk_live_bb000003');
      assert.equal(await keys.lookupByHash(b.keyHash), undefined, 'the old value stops working');

      next = Array(5).fill('bb000001');
      await assert.rejects(keys.rotate(user.id, rotated.id), (err) => uniqueViolation(err) === 'api_keys_prefix_key');
      assert.equal(next.length, 0, 'five tries');
      assert.equal((await keys.lookupByHash(rotated.keyHash))?.key.id, rotated.id, 'the key keeps its value');
      assert.equal((await keys.lookupByHash(a.keyHash))?.key.id, a.id);
    });
  });
}
