import type { ExecutionContext } from 'ava';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { sql } from 'kysely';
import type { App } from '../../src/app.js';
import { startTestApp, storeEnvOf } from './test-app.js';

/*
 * A store that refuses operator audit entries, as a full disk or a lost connection would: a
 * trigger on operator_audit, on either engine. Tests of an action and its entry committing
 * together turn it on, try the action, and check that nothing of the action was stored.
 */

/** From now on the store refuses audit entries whose target JSON is LIKE `pattern`. */
export async function refuseAudit(app: App, pattern = '%'): Promise<void> {
  const db = app.store.db;
  if (!/^[%\w":,.{} -]*$/.test(pattern)) throw new Error('pattern: keep it to plain characters');
  if (app.store.kind === 'postgres') {
    await sql
      .raw(
        `create or replace function refuse_audit() returns trigger language plpgsql as $$ begin
           if new.target_json like '${pattern}' then raise exception 'audit entry refused by the test'; end if; return new; end $$`,
      )
      .execute(db);
    await sql.raw('create trigger refuse_audit before insert on operator_audit for each row execute function refuse_audit()').execute(db);
  } else {
    await sql.raw(`create trigger refuse_audit before insert on operator_audit when new.target_json like '${pattern}' begin select raise(abort, 'audit entry refused by the test'); end`).execute(db);
  }
}

export async function acceptAudit(app: App): Promise<void> {
  await sql.raw(app.store.kind === 'postgres' ? 'drop trigger if exists refuse_audit on operator_audit' : 'drop trigger if exists refuse_audit').execute(app.store.db);
}

const BIN = fileURLToPath(new URL('../../../bin/posthorn', import.meta.url));

/**
 * A test app and `bin/posthorn` run against its store (SQLite, or the test's PostgreSQL), for
 * CLI actions audited as `cli`; the audit is accepted again before the app closes.
 */
export async function appWithCli(t: ExecutionContext) {
  const app = await startTestApp();
  t.teardown(async () => {
    await acceptAudit(app.app);
    await app.close();
  });
  const env = { PATH: process.env.PATH, POSTHORN_DNS_SERVERS: '127.0.0.1:9', ...(await storeEnvOf(app.dataDir)) };
  const cli = (...args: string[]) => promisify(execFile)(process.execPath, [BIN, ...args], { env });
  return { app, cli };
}
