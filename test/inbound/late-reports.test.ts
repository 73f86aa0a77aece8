import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import type { BusEvent } from '../../src/core/events.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { repositoriesOf } from '../helpers/repositories.js';
import { twoTeams } from '../helpers/two-teams.js';
import { collectEvents, sendAndDeliver, type DeliveredEmail } from './helpers/inbound-world.js';
import { fixture, smtpSend } from './helpers/smtp-client.js';

// Reports that come back after the sending domain was deleted (docs/inbound.md, Late reports
// for a deleted domain): a final DSN days after the send, a feedback loop's complaint later
// still. A tagged return path of a domain deleted at most 30 days ago still takes them, for
// the email (and team) it names, whoever holds the name now; anything else at the name goes
// as its current owner's routing says.

const DAY = 24 * 3600_000;
const clock = new ManualClock(Date.UTC(2026, 10, 20, 9, 0, 0));
const COMPLAINTS = 'complaints@mx.posthorn.test';
let w: MailWorld;
let port: number;
let teamB: { teamId: number; key: string };
let events: BusEvent[];

test.before(async () => {
  w = await startMailWorld({ clock });
  port = w.t0.app.listeners.inbound!.port;
  teamB = (await twoTeams(w.t0)).b;
  events = collectEvents(w, ['email.bounced', 'email.complained']);
});
test.after.always(async () => {
  await w?.close();
});

/** Team A adds and verifies `name`, sends from it to `to`, and the sink takes the mail. */
async function sendFrom(name: string, to: string | string[]): Promise<{ domain: any; email: DeliveredEmail }> {
  const domain = await addVerifiedDomain(w.t0, name);
  const email = await sendAndDeliver(w, { from: `News <news@${name}>`, to, subject: `From ${name}` });
  return { domain, email };
}

async function deleteDomain(id: number, key?: string) {
  const res = await w.t0.request('DELETE', `/v1/domains/${id}`, { key });
  if (res.status !== 200) throw new Error(`DELETE domain ${id}: ${res.status}`);
}

function dsnTo(returnPath: string, email: DeliveredEmail, recipient: string) {
  const raw = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: returnPath, RECIPIENT: recipient, ORIGINAL: email.raw.toString() });
  return smtpSend({ port, from: '', to: [returnPath], raw });
}

/** The same token with another tag: what a recipient who only saw their own copy could write. */
function forged(returnPath: string): string {
  return returnPath.replace(/_[0-9a-f]{12}@/, '_0123456789ab@');
}

const suppression = (teamId: number, address: string) => repositoriesOf(w.t0.app).suppressions.get(teamId, address);

test.serial('a DSN that comes back after the domain was deleted bounces the email, suppresses the address for the team and is announced', async (t) => {
  const { domain, email } = await sendFrom('late.dev', 'gone@example.net');
  clock.advance(2 * DAY);
  await deleteDomain(domain.id);
  clock.advance(3 * DAY); // the remote's final failure, five days after the send

  const res = await dsnTo(email.returnPath, email, 'gone@example.net');
  t.true(res.ok, res.response);
  t.regex(res.response, /^250 /);

  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'BOUNCED');
  t.is(got.body.emailEvents.find((e: any) => e.status === 'BOUNCED')?.data.recipient, 'gone@example.net');
  const s = await suppression(w.t0.teamId, 'gone@example.net');
  t.is(s?.reason, 'HARD_BOUNCE', 'the team must not mail the dead address again from another (or the re-added) domain');
  t.is(s?.source, email.id);
  const announced = events.find((e) => e.type === 'email.bounced' && e.data.id === email.id);
  t.truthy(announced, 'email.bounced goes to the team\'s webhooks');
  t.is(announced!.teamId, w.t0.teamId);
  const [report] = await w.t0.app.inbound.reportsRepo.listForEmail(email.id);
  t.is(report?.linked_by, 'verp');
  t.is(report?.team_id, w.t0.teamId);

  // The team adds the name again and mails the address: it is not sent.
  await addVerifiedDomain(w.t0, 'late.dev');
  const again = await w.t0.request('POST', '/v1/emails', { body: { from: 'News <news@late.dev>', to: 'gone@example.net', subject: 'Again', text: 'Hi' } });
  t.is(again.status, 200);
  t.is((await w.t0.request('GET', `/v1/emails/${again.body.emailId}`)).body.latestStatus, 'SUPPRESSED');
});

test.serial('a complaint at the complaint address quoting a deleted domain\'s tagged return path reaches the complainer\'s copy', async (t) => {
  const { domain, email } = await sendFrom('late-arf.dev', ['annoyed@example.net', 'happy@example.net']);
  const copy = w.sink.messages.find((m) => m.rcptTo.includes('annoyed@example.net') && m.raw.toString().includes(email.id))!;
  await deleteDomain(domain.id);
  clock.advance(10 * DAY);
  const arf = fixture('yahoo-arf-abuse.eml', { REPORT_TO: COMPLAINTS, SUBJECT: email.subject, RETURN_PATH: copy.mailFrom, RECIPIENT: 'annoyed@example.net', ORIGINAL: copy.raw.toString() });
  const res = await smtpSend({ port, from: 'feedback@arf.mail.yahoo.com', to: [COMPLAINTS], raw: arf });
  t.true(res.ok, res.response);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'COMPLAINED');
  t.is((await suppression(w.t0.teamId, 'annoyed@example.net'))?.reason, 'COMPLAINT');
  t.is(await suppression(w.t0.teamId, 'happy@example.net'), undefined);
  const [report] = await w.t0.app.inbound.reportsRepo.listForEmail(email.id);
  t.is(report?.linked_by, 'report', 'linked by the tagged return path it quotes, which covers that one copy');
});

test.serial('a forged tag or an untagged token at a deleted domain is refused, and so is any token 30 days after the deletion', async (t) => {
  const { domain, email } = await sendFrom('expired.dev', 'later@example.net');
  await deleteDomain(domain.id);
  clock.advance(DAY);
  const bad = await dsnTo(forged(email.returnPath), email, 'later@example.net');
  t.false(bad.ok);
  t.regex(bad.response, /^550 5\.7\.1 /, 'nobody holds the name: relay access denied, as before');
  const untagged = email.returnPath.replace(/_[0-9a-f]{12}@/, '@');
  t.regex((await dsnTo(untagged, email, 'later@example.net')).response, /^550 5\.7\.1 /);
  t.regex((await dsnTo(email.returnPath.replace(/\+[^@]+@/, '@'), email, 'later@example.net')).response, /^550 5\.7\.1 /, 'plain bounces@ of a name nobody holds');

  clock.advance(30 * DAY);
  const late = await dsnTo(email.returnPath, email, 'later@example.net');
  t.false(late.ok);
  t.regex(late.response, /^550 5\.7\.1 /);
  t.is((await w.t0.request('GET', `/v1/emails/${email.id}`)).body.latestStatus, 'DELIVERED');
  t.is(await suppression(w.t0.teamId, 'later@example.net'), undefined);
});

test.serial('after team B adds the name team A deleted, A\'s old return path lands on A\'s email; the rest of the name is B\'s', async (t) => {
  const { domain, email } = await sendFrom('handover.dev', 'moved@example.net');
  await deleteDomain(domain.id);
  clock.advance(DAY);
  const b = await addVerifiedDomain(w.t0, 'handover.dev', teamB.key);
  const before = events.length;

  const res = await dsnTo(email.returnPath, email, 'moved@example.net');
  t.true(res.ok, res.response);
  t.is((await w.t0.request('GET', `/v1/emails/${email.id}`)).body.latestStatus, 'BOUNCED');
  t.is((await suppression(w.t0.teamId, 'moved@example.net'))?.reason, 'HARD_BOUNCE');
  t.is(await suppression(teamB.teamId, 'moved@example.net'), undefined, 'never the new owner\'s');
  const [report] = await w.t0.app.inbound.reportsRepo.listForEmail(email.id);
  t.is(report?.team_id, w.t0.teamId);
  const announced = events.slice(before);
  t.is(announced.length, 1);
  t.is(announced[0]!.teamId, w.t0.teamId);
  t.is(announced[0]!.domainId, domain.id);
  t.is((await w.t0.request('GET', `/v1/emails/${email.id}`, { key: teamB.key })).status, 404, 'B still cannot see A\'s email');

  // A forged tag at the name is an unknown return path of B's bounce host.
  const bad = await dsnTo(forged(email.returnPath), email, 'moved@example.net');
  t.false(bad.ok);
  t.regex(bad.response, /^550 5\.1\.1 /);
  // Plain bounces@ is B's (a tokenless return path, linked within B's domain only).
  const plain = email.returnPath.replace(/\+[^@]+@/, '@');
  const toB = await dsnTo(plain, email, 'moved@example.net');
  t.true(toB.ok, toB.response);
  t.is(events.length, before + 1, 'A\'s evidence at B\'s bounce host changes nothing');
  t.is(b.name, 'handover.dev');
});
