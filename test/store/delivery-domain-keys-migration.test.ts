import { join } from 'node:path';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import test, { type ExecutionContext } from 'ava';
import { sql, type Kysely } from 'kysely';
import { migrateToLatest } from '../../src/store/migrate.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startDnsZone } from '../helpers/dns-zone.js';
import { startSmtpSink } from '../helpers/smtp-sink.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { testCert } from '../helpers/test-keys.js';
import { repositoriesOf } from '../helpers/repositories.js';
import { storeAtMigration, openStoreIn } from '../helpers/store-at-migration.js';
import { tempDir } from '../helpers/temp-dir.js';

// Deliveries queued before domains were kept in A-labels (2026-11-25) hold the recipient's
// domain in Unicode ("bücher.example") in rcpt_domain and in the recipient. Everything that
// matches a destination compares the A-label form: an operator's suspension of
// xn--bcher-kva.example did not hold such a delivery, the queue listed it under another
// destination, shaping state made from it was keyed apart, and its RCPT TO named the Unicode
// domain (refused locally by a server without SMTPUTF8). An upgrade re-keys what is still
// waiting; final rows stay as they were sent.

const BEFORE = '20261129060000-address-keys';
const OLD = '2026-11-20T09:00:00.000Z';
const A_LABEL = 'xn--bcher-kva.example';

const storeBefore = (t: ExecutionContext, dir: string) => storeAtMigration(t, dir, BEFORE);

/**
 * An app in the test's world makes an email (its content, its verified sending domain) while a
 * suspension of the whole team keeps it waiting, then stops; `world.t0` is the app now running
 * (a test starts the next one there), which the operator's `admin` calls reach.
 */
async function emailHeld(t: ExecutionContext, start: () => Promise<TestApp>, recipients: { to: string; cc?: string }) {
  const world = { t0: await start() };
  t.teardown(() => world.t0.close());
  const op = (await world.t0.app.services.operatorKeys.create('ops')).token;
  const admin = async (method: string, path: string, body?: unknown) => {
    const res = await world.t0.request(method, `/admin/v1${path}`, { key: op, body });
    t.is(res.status, 200, `${method} ${path}: ${JSON.stringify(res.body)}`);
    return res.body;
  };
  const teamHold = await admin('POST', '/queue/suspensions', { teamId: world.t0.teamId, minutes: 60, reason: 'until the test is ready' });
  await addVerifiedDomain(world.t0, 'sender.dev');
  const sent = await world.t0.request('POST', '/v1/emails', { body: { from: 'hello@sender.dev', ...recipients, subject: 'Hi', text: 'Hi' } });
  t.is(sent.status, 200, JSON.stringify(sent.body));
  await world.t0.stop();
  return { world, admin, teamHold, emailId: sent.body.emailId as string };
}

/** The store back at BEFORE: the migrations after it run again at the next start. */
async function forgetMigrationsAfterBefore(db: Kysely<any>): Promise<void> {
  const names = Object.keys(MIGRATIONS).sort();
  const later = names.slice(names.indexOf(BEFORE) + 1);
  if (later.length) await sql`delete from kysely_migration where name in (${sql.join(later)})`.execute(db);
}

/**
 * The A-label domain's MX: a sink without SMTPUTF8, so a recipient is only sent when it is all
 * ASCII (a Unicode domain is refused locally) and what it takes went into RCPT TO in A-labels.
 */
async function sinkWorld(t: ExecutionContext) {
  const zone = await startDnsZone();
  t.teardown(() => zone.close());
  const cert = await testCert({ hostnames: ['mx.sink.test'], ips: ['127.0.0.1'] });
  const sink = await startSmtpSink({ hostname: 'mx.sink.test', cert, smtputf8: false });
  t.teardown(() => sink.close());
  const caDir = mkdtempSync(join(tmpdir(), 'posthorn-ca-'));
  t.teardown(() => rmSync(caDir, { recursive: true, force: true }));
  const caFile = join(caDir, 'sink-ca.pem');
  writeFileSync(caFile, sink.ca);
  zone.set('mx.sink.test', 'A', ['127.0.0.1']);
  zone.set(A_LABEL, 'MX', [{ exchange: 'mx.sink.test', priority: 10 }]);
  return { zone, sink, caFile };
}

async function snapshot(db: Kysely<any>) {
  const q = async (text: string) => (await sql.raw(text).execute(db)).rows.map((r: any) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'bigint' ? Number(v) : v])));
  return {
    deliveries: await q('select id, email_id, recipient, rcpt_domain, state, attempts, next_attempt_at from deliveries order by id'),
    holds: await q('select id, source, rollup, kind from shaping_holds order by id'),
    warmup: await q('select source, rollup, day, used from warmup_usage order by source, rollup, day'),
    rates: await q('select source, rollup, tat_ms from shaping_rates order by source, rollup'),
    policies: await q('select domain, policy_id from mta_sts_policies order by domain'),
    counts: await q('select policy_domain, day, result, mx_host, count from tls_session_counts order by policy_domain, day, result, mx_host'),
  };
}

test('an upgrade keys the domain of waiting deliveries, shaping state, cached MTA-STS policies and unreported TLS counts in A-labels; final rows stay; a second run changes nothing', async (t) => {
  const { db } = await storeBefore(t, tempDir(t, 'posthorn-delivery-keys-'));
  const team = Number((await sql<{ id: number }>`insert into teams (name, created_at, updated_at) values ('one', ${OLD}, ${OLD}) returning id`.execute(db)).rows[0]!.id);
  await sql`insert into emails (id, team_id, from_addr, to_json, subject, message_id, latest_status, status_rank, created_at, updated_at)
    values ('em_1', ${team}, 'a@news.example', '[]', 's', '<em_1@x.com>', 'QUEUED', 0, ${OLD}, ${OLD})`.execute(db);
  const delivery = (recipient: string, domain: string, state: string, attempts = 0) =>
    sql`insert into deliveries (email_id, team_id, recipient, rcpt_domain, kind, state, attempts, next_attempt_at, due_since, updated_at)
      values ('em_1', ${team}, ${recipient}, ${domain}, 'to', ${state}, ${attempts}, 1000, 1000, ${OLD})`.execute(db);
  await delivery('user@bücher.example', 'bücher.example', 'queued');
  await delivery('Retry.Me@bücher.example', 'bücher.example', 'queued', 3);
  // NFD spelling of the same domain: one A-label form.
  await delivery('nfd@bu\u0308cher.example', 'bu\u0308cher.example', 'queued');
  // A non-ASCII local part keeps it; only the domain is converted.
  await delivery('jürgen@bücher.example', 'bücher.example', 'queued');
  await delivery('jürgen@example.net', 'example.net', 'queued');
  // Final rows keep the domain they were sent to (a DSN's return-path tag names it).
  await delivery('done@bücher.example', 'bücher.example', 'delivered', 1);
  await delivery('plain@example.net', 'example.net', 'queued');

  await sql`insert into shaping_holds (id, source, rollup, kind, message_rate, reason, until_ms, created_at) values
    ('sh_1', 'default', 'bücher.example', 'throttle', '1/m', '421', 9e12, ${OLD}),
    ('sh_2', 'default', 'mx.provider.example', 'suspend', null, '421', 9e12, ${OLD})`.execute(db);
  await sql`insert into warmup_usage (source, rollup, day, used) values
    ('ip1', 'bücher.example', '2026-11-28', 5), ('ip1', ${A_LABEL}, '2026-11-28', 7), ('ip1', 'bücher.example', '2026-11-27', 2)`.execute(db);
  await sql`insert into shaping_rates (source, rollup, tat_ms) values
    ('ip1', 'bücher.example', 5000), ('ip1', ${A_LABEL}, 4000), ('ip2', 'bücher.example', 100)`.execute(db);
  await sql`insert into mta_sts_policies (domain, policy_id, body, fetched_at, expires_at) values
    ('bücher.example', 'old', 'x', 1, 2), ('münchen.example', 'm', 'x', 1, 2), (${'xn--bcher-kva.example'}, 'new', 'x', 3, 4)`.execute(db);
  const count = (domain: string, day: string, result: string, mx: string, n: number) =>
    sql`insert into tls_session_counts (policy_domain, day, policy_key, policy_type, policy_json, result, sending_ip, mx_host, receiving_ip, reason_code, count)
      values (${domain}, ${day}, 'k', 'no-policy-found', '{}', ${result}, '', ${mx}, '', '', ${n})`.execute(db);
  await count('bücher.example', '2026-11-28', 'success', '', 3);
  await count(A_LABEL, '2026-11-28', 'success', '', 4);
  await count('bücher.example', '2026-11-28', 'certificate-expired', 'mx.b.example', 1);
  // The A-label's report for 11-27 is made: counts under the Unicode name that day stay.
  await count('bücher.example', '2026-11-27', 'success', '', 2);
  await sql`insert into tls_reports_out (policy_domain, day, report_id, state, rua_json, created_at) values (${A_LABEL}, '2026-11-27', 'r1', 'no-rua', '[]', ${OLD})`.execute(db);

  await migrateToLatest(db);
  const after = await snapshot(db);
  t.deepEqual(
    after.deliveries.map((d: any) => [d.recipient, d.rcpt_domain, d.state, d.attempts]),
    [
      [`user@${A_LABEL}`, A_LABEL, 'queued', 0],
      [`Retry.Me@${A_LABEL}`, A_LABEL, 'queued', 3],
      [`nfd@${A_LABEL}`, A_LABEL, 'queued', 0],
      [`jürgen@${A_LABEL}`, A_LABEL, 'queued', 0],
      ['jürgen@example.net', 'example.net', 'queued', 0],
      ['done@bücher.example', 'bücher.example', 'delivered', 1],
      ['plain@example.net', 'example.net', 'queued', 0],
    ],
  );
  t.deepEqual(after.holds.map((h: any) => [h.id, h.rollup]), [['sh_1', A_LABEL], ['sh_2', 'mx.provider.example']]);
  // One budget per day: what was used under either key counts.
  t.deepEqual(after.warmup.map((w: any) => [w.rollup, w.day, w.used]), [[A_LABEL, '2026-11-27', 2], [A_LABEL, '2026-11-28', 12]]);
  // The later theoretical arrival time: never sends faster than either key allowed.
  t.deepEqual(after.rates.map((r: any) => [r.source, r.rollup, r.tat_ms]), [['ip1', A_LABEL, 5000], ['ip2', A_LABEL, 100]]);
  // A cached policy under the A-label (what lookups found since) stays; another is renamed.
  t.deepEqual(after.policies.map((p: any) => [p.domain, p.policy_id]), [[A_LABEL, 'new'], ['xn--mnchen-3ya.example', 'm']]);
  t.deepEqual(
    after.counts.map((c: any) => [c.policy_domain, c.day, c.result, c.count]),
    [
      ['bücher.example', '2026-11-27', 'success', 2],
      [A_LABEL, '2026-11-28', 'certificate-expired', 1],
      [A_LABEL, '2026-11-28', 'success', 7],
    ],
  );

  const { up } = await import('../../src/store/migrations/20261129070000-delivery-domain-keys.js');
  await up(db);
  t.deepEqual(await snapshot(db), after);
});

test('a queue larger than a batch is keyed whole, rows between and after the matches untouched, none lost', async (t) => {
  const { db } = await storeBefore(t, tempDir(t, 'posthorn-delivery-keys-batch-'));
  const team = Number((await sql<{ id: number }>`insert into teams (name, created_at, updated_at) values ('one', ${OLD}, ${OLD}) returning id`.execute(db)).rows[0]!.id);
  await sql`insert into emails (id, team_id, from_addr, to_json, subject, message_id, latest_status, status_rank, created_at, updated_at)
    values ('em_1', ${team}, 'a@news.example', '[]', 's', '<em_1@x.com>', 'QUEUED', 0, ${OLD}, ${OLD})`.execute(db);
  // 1,300 Unicode rows (more than two batches of 500) among ASCII ones and final ones.
  const values = [];
  for (let i = 0; i < 1700; i++) {
    const [recipient, domain, state] = i % 17 === 0 ? [`a${i}@example.net`, 'example.net', 'queued'] : i % 19 === 0 ? [`d${i}@bücher.example`, 'bücher.example', 'bounced'] : i < 1400 ? [`u${i}@bücher.example`, 'bücher.example', 'queued'] : [`p${i}@example.org`, 'example.org', 'queued'];
    values.push(sql`('em_1', ${team}, ${recipient}, ${domain}, 'to', ${state}, 0, 1000, 1000, ${OLD})`);
  }
  for (let i = 0; i < values.length; i += 200) {
    await sql`insert into deliveries (email_id, team_id, recipient, rcpt_domain, kind, state, attempts, next_attempt_at, due_since, updated_at) values ${sql.join(values.slice(i, i + 200))}`.execute(db);
  }
  const before = (await sql<any>`select id, recipient, rcpt_domain, state from deliveries order by id`.execute(db)).rows;

  await migrateToLatest(db);
  const after = (await sql<any>`select id, recipient, rcpt_domain, state from deliveries order by id`.execute(db)).rows;
  const expected = before.map((r: any) =>
    r.state === 'queued' && r.rcpt_domain === 'bücher.example' ? { ...r, recipient: r.recipient.replace('bücher.example', A_LABEL), rcpt_domain: A_LABEL } : r,
  );
  t.deepEqual(after, expected);
  t.true(expected.filter((r: any) => r.rcpt_domain === A_LABEL).length > 1000);
});

test('after the upgrade an operator suspension of the A-label destination holds a delivery queued with a Unicode domain, and on resume it goes to the A-label domain\'s MX', async (t) => {
  const dir = tempDir(t, 'posthorn-delivery-keys-app-');
  const { url, close } = await storeBefore(t, dir);
  await close();

  const { zone, sink, caFile } = await sinkWorld(t);
  const overrides = { store: { url }, outbound: { port: sink.port, allowLoopbackMx: true, caFile, signingWorkers: 1 } };
  const start = () => startTestApp({ dataDir: dir, zone, overrides });

  // An app makes the email (its content, its verified sending domain) while a suspension of the
  // whole team keeps it waiting; the row is then put back as a store from before 2026-11-25
  // held it, and the store back at the migration before the re-keying.
  const { world, admin, teamHold, emailId } = await emailHeld(t, start, { to: 'user@bücher.example' });

  const store = await openStoreIn(dir, url);
  const db = store.db as Kysely<any>;
  const rows = await sql`update deliveries set recipient = 'user@bücher.example', rcpt_domain = 'bücher.example' where email_id = ${emailId} and rcpt_domain = ${A_LABEL}`.execute(db);
  t.is(Number(rows.numAffectedRows), 1);
  await forgetMigrationsAfterBefore(db);
  await store.close();

  const t0 = (world.t0 = await start());
  t.is((await admin('GET', '/queue/messages')).messages.length, 1);
  const hold = await admin('POST', '/queue/suspensions', { destination: A_LABEL, minutes: 60, reason: 'provider asked us to slow down' });
  await admin('DELETE', `/queue/suspensions/${teamHold.id}`);
  t0.app.engine.wake();
  await t0.app.engine.whenIdle();

  const listed = await admin('GET', `/queue/messages?destination=${A_LABEL}`);
  t.deepEqual(listed.messages.map((m: any) => [m.emailId, m.state, m.attempts]), [[emailId, 'suspended', 0]], 'held by the A-label suspension, never attempted');
  const summary = await admin('GET', '/queue');
  t.deepEqual(summary.destinations.map((d: any) => [d.destination, d.suspended, d.suspension?.id]), [[A_LABEL, 1, hold.id]]);
  t.is(sink.messages.length, 0);

  await admin('DELETE', `/queue/suspensions/${hold.id}`);
  t0.app.engine.wake();
  await sink.waitForMessages(1);
  // smtp-server shows the domain back in Unicode; the row holds what went into RCPT TO.
  t.deepEqual(sink.messages[0]!.rcptTo, ['user@bücher.example']);
  await t0.app.engine.whenIdle();
  await t0.app.services.events.settled();
  const kept = await repositoriesOf(t0.app).deliveries.listForEmail(emailId);
  t.deepEqual(kept.map((r) => [r.recipient, r.rcpt_domain, r.state]), [[`user@${A_LABEL}`, A_LABEL, 'delivered']]);
  const events = (await t0.request('GET', `/v1/emails/${emailId}`)).body.emailEvents.map((e: any) => e.status);
  t.deepEqual(events, ['QUEUED', 'SENT', 'DELIVERED']);
});

test('an email queued before 2026-11-25 to one mailbox in both spellings (two rows then) is sent once after the upgrade, and both rows end (one transaction for the domain)', async (t) => {
  const dir = tempDir(t, 'posthorn-delivery-keys-twice-');
  const { url, close } = await storeBefore(t, dir);
  await close();

  const { zone, sink, caFile } = await sinkWorld(t);
  // A rule that puts the domain's recipients in one transaction: both rows go in one envelope.
  const overrides = { store: { url }, outbound: { port: sink.port, allowLoopbackMx: true, caFile, signingWorkers: 1, shaping: [{ domain: A_LABEL, maxRecipientsPerTransaction: 10 }] } };
  const start = () => startTestApp({ dataDir: dir, zone, overrides: overrides as never });

  const { world, admin, teamHold, emailId } = await emailHeld(t, start, { to: 'ute@bücher.example', cc: `ute@${A_LABEL}` });

  // Before 2026-11-25 the two spellings were two rows: one as typed in Unicode, one in A-labels.
  const store = await openStoreIn(dir, url);
  const db = store.db as Kysely<any>;
  const one = (await sql<any>`select * from deliveries where email_id = ${emailId}`.execute(db)).rows;
  t.is(one.length, 1);
  await sql`update deliveries set recipient = 'ute@bücher.example', rcpt_domain = 'bücher.example' where id = ${one[0].id}`.execute(db);
  await sql`insert into deliveries (email_id, team_id, recipient, rcpt_domain, kind, state, attempts, next_attempt_at, due_since, updated_at)
    values (${emailId}, ${one[0].team_id}, ${`ute@${A_LABEL}`}, ${A_LABEL}, 'cc', 'queued', 0, ${one[0].next_attempt_at}, ${one[0].due_since}, ${one[0].updated_at})`.execute(db);
  await forgetMigrationsAfterBefore(db);
  await store.close();

  const t0 = (world.t0 = await start());
  await admin('DELETE', `/queue/suspensions/${teamHold.id}`);
  t0.app.engine.wake();
  await sink.waitForMessages(1);
  await t0.app.engine.whenIdle();
  await t0.app.services.events.settled();
  const kept = await repositoriesOf(t0.app).deliveries.listForEmail(emailId);
  t.deepEqual(kept.map((r) => [r.recipient, r.state]), [[`ute@${A_LABEL}`, 'delivered'], [`ute@${A_LABEL}`, 'delivered']]);
  t.is(sink.messages.length, 1, 'one mailbox, one copy');
  t.deepEqual(sink.messages[0]!.rcptTo, ['ute@bücher.example']);
});
