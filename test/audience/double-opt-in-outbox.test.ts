import test from 'ava';
import { sql } from 'kysely';
import { pino } from 'pino';
import { createContactImportService } from '../../src/core/contacts/contact-import-service.js';
import { createContactImportsRepository } from '../../src/store/repositories/contact-imports-repository.js';
import { ManualClock } from '../../src/lib/clock.js';
import type { App } from '../../src/app.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';

// A double opt-in confirmation is part of its contact's write (the transactional outbox): a
// store that fails the email's write right after the contact's (as a full disk, a lost
// connection or a process killed in between would) leaves both or neither, never a pending
// contact whom no confirmation will ever reach. After a restart the confirmation of every
// pending contact reaches the sink exactly once.

const clock = new ManualClock(Date.UTC(2026, 10, 30, 15, 0, 0));
let w: MailWorld;
let bookId: string;
test.before(async () => {
  w = await startMailWorld({ clock });
  const res = await w.t0.request('POST', '/v1/contactBooks', {
    body: { name: 'Outbox', doubleOptInEnabled: true, doubleOptInFrom: `news@${w.domain.name}` },
  });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  bookId = res.body.id;
});
test.after.always(async () => {
  await w?.close();
});

const contactsPath = (rest = '') => `/v1/contactBooks/${bookId}/contacts${rest}`;

/** From now on the store refuses emails to addresses LIKE `pattern` (a trigger, on either engine). */
async function refuseEmails(app: App, pattern: string): Promise<void> {
  const db = app.store.db;
  if (app.store.kind === 'postgres') {
    await sql
      .raw(
        `create or replace function refuse_email() returns trigger language plpgsql as $$ begin
           if new.to_json like '${pattern}' then raise exception 'email refused by the test'; end if; return new; end $$`,
      )
      .execute(db);
    await sql.raw('create trigger refuse_email before insert on emails for each row execute function refuse_email()').execute(db);
  } else {
    await sql.raw(`create trigger refuse_email before insert on emails when new.to_json like '${pattern}' begin select raise(abort, 'email refused by the test'); end`).execute(db);
  }
}

async function acceptEmails(app: App): Promise<void> {
  await sql.raw(app.store.kind === 'postgres' ? 'drop trigger if exists refuse_email on emails' : 'drop trigger if exists refuse_email').execute(app.store.db);
}

async function contactsAt(emails: string[]) {
  const res = await w.t0.request('GET', contactsPath(`?emails=${emails.join(',')}`));
  return res.body as { email: string; subscribed: boolean; unsubscribeReason: string | null }[];
}

/** After a restart and once the engine is idle: each pending contact among `emails` got exactly one confirmation. */
async function eachPendingConfirmedOnce(t: import('ava').ExecutionContext, emails: string[]): Promise<number> {
  await w.restart();
  w.t0.app.engine.wake();
  await w.settle();
  const pending = (await contactsAt(emails)).filter((c) => !c.subscribed && c.unsubscribeReason === null);
  for (const c of pending) {
    t.is(w.sink.messages.filter((m) => m.rcptTo.includes(c.email)).length, 1, `${c.email} is pending: its confirmation must reach the sink once`);
  }
  return pending.length;
}

test.serial('single add: the confirmation failing to be stored leaves no pending contact without one', async (t) => {
  const email = 'lost-single@example.net';
  await refuseEmails(w.t0.app, '%lost-single%');
  const res = await w.t0.request('POST', contactsPath(), { body: { email } });
  await acceptEmails(w.t0.app);
  t.not(res.status, 200, 'the request was not answered as done');
  t.deepEqual(await contactsAt([email]), [], 'neither the contact nor its confirmation was stored');
  t.is(await eachPendingConfirmedOnce(t, [email]), 0);

  // The client's retry stores both, and the confirmation goes out once.
  const again = await w.t0.request('POST', contactsPath(), { body: { email } });
  t.is(again.status, 200, JSON.stringify(again.body));
  w.t0.app.engine.wake();
  await w.sink.waitForMessages(1);
  await w.settle();
  t.is(await eachPendingConfirmedOnce(t, [email]), 1);
});

test.serial('bulk add: a confirmation failing to be stored rolls the whole write back', async (t) => {
  const emails = ['lost-bulk1@example.net', 'lost-bulk2@example.org'];
  await refuseEmails(w.t0.app, '%lost-bulk2%');
  const res = await w.t0.request('POST', contactsPath('/bulk'), { body: emails.map((email) => ({ email })) });
  await acceptEmails(w.t0.app);
  t.not(res.status, 200, 'the request was not answered as done');
  t.deepEqual(await contactsAt(emails), [], 'nothing of the write was stored');
  t.is(await eachPendingConfirmedOnce(t, emails), 0);

  const again = await w.t0.request('POST', contactsPath('/bulk'), { body: emails.map((email) => ({ email })) });
  t.is(again.status, 200, JSON.stringify(again.body));
  t.is(again.body.created, 2);
  t.is(await eachPendingConfirmedOnce(t, emails), 2);
});

test.serial('CSV import: a chunk whose confirmation fails to be stored is rolled back with its progress', async (t) => {
  const emails = ['lost-import1@example.net', 'lost-import2@example.org'];
  const app = w.t0.app;
  const service = createContactImportService({ imports: createContactImportsRepository(app.store.db), contacts: app.services.contacts, clock: app.clock, logger: pino({ level: 'silent' }), node: 'n', cluster: false });
  t.teardown(() => service.stop());
  const scope = { teamId: w.t0.teamId, domainId: null };
  await refuseEmails(app, '%lost-import2%');
  const job = await service.start(scope, bookId, 'optin.csv', `email\n${emails.join('\n')}\n`);
  await service.whenFinished(job.id);
  await acceptEmails(app);
  t.like(await service.get(scope, job.id), { status: 'FAILED', created: 0 });
  t.deepEqual(await contactsAt(emails), [], 'the chunk was not written');
  await service.stop();
  t.is(await eachPendingConfirmedOnce(t, emails), 0);
});

test.serial('a suppressed address is stored pending with a SUPPRESSED confirmation and gets no mail', async (t) => {
  const email = 'suppressed-optin@example.net';
  const sup = await w.t0.request('POST', '/v1/suppressions', { body: { email, reason: 'MANUAL' } });
  t.true(sup.status === 200 || sup.status === 201, JSON.stringify(sup.body));
  const res = await w.t0.request('POST', contactsPath(), { body: { email } });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.like((await contactsAt([email]))[0], { subscribed: false, unsubscribeReason: null });
  await w.settle();
  t.is(w.sink.messages.filter((m) => m.rcptTo.includes(email)).length, 0);
  const sent = (await w.t0.request('GET', '/v1/emails')).body.data.find((e: any) => e.to === email);
  t.is(sent?.latestStatus, 'SUPPRESSED');
});
