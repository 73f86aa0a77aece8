import { randomBytes } from 'node:crypto';
import test from 'ava';
import pg from 'pg';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { createLogger } from '../../src/lib/logger.js';
import { openStoreOf } from '../../src/composition/store-opening.js';
import { openPgStore } from '../../src/store/pg/pg-store.js';
import { PgStoreUnsupportedError } from '../../src/store/pg/pg-url.js';
import { pgAdminUrl } from '../helpers/pg-databases.js';

// Case-ignoring matches lower text under ICU's root collation on PostgreSQL (store/unicode-lower.ts).
// A database without it (a server built without ICU; here, one encoded SQL_ASCII, for which no
// ICU collation exists) is refused when the store opens, with a message that says why, and
// `serve` does not wait for it as for a server that is down: waiting would not help. Otherwise
// every segment and search would fail with a 500.

test('a PostgreSQL database without the ICU collation is refused at open, not waited for', async (t) => {
  const adminUrl = await pgAdminUrl();
  const name = `posthorn_e_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${name} template template0 encoding 'SQL_ASCII' locale 'C'`);
  t.teardown(async () => {
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
  });
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;

  const err = await t.throwsAsync(openPgStore({ url: url.toString(), poolMax: 1, connectTimeoutMs: 5000, durability: 'normal' }), { instanceOf: PgStoreUnsupportedError });
  t.regex(err!.message, /no collation "und-x-icu"/);

  const config = { ...DEFAULT_CONFIG, store: { ...DEFAULT_CONFIG.store, url: url.toString() } };
  await t.throwsAsync(openStoreOf(config, createLogger('silent'), {}, true), { instanceOf: PgStoreUnsupportedError });
});
