import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { repositoriesOf } from '../helpers/repositories.js';
import { sendAndDeliver, type DeliveredEmail } from './helpers/inbound-world.js';
import { fixture, smtpSend } from './helpers/smtp-client.js';

// inbound.lateReportDays (docs/inbound.md, Late reports for a deleted domain) set to 3: a DSN to
// a deleted domain's tagged return path is taken within 3 days of the deletion and refused after,
// as the injected clock says.

const DAY = 24 * 3600_000;
const clock = new ManualClock(Date.UTC(2026, 10, 20, 9, 0, 0));
let w: MailWorld;
let port: number;

test.before(async () => {
  w = await startMailWorld({ clock, overrides: { inbound: { lateReportDays: 3 } } });
  port = w.t0.app.listeners.inbound!.port;
});
test.after.always(async () => {
  await w?.close();
});

/** Team A sends from `name` to `to`, then deletes the domain. */
async function sentThenDeleted(name: string, to: string): Promise<DeliveredEmail> {
  const domain = await addVerifiedDomain(w.t0, name);
  const email = await sendAndDeliver(w, { from: `News <news@${name}>`, to, subject: `From ${name}` });
  const res = await w.t0.request('DELETE', `/v1/domains/${domain.id}`);
  if (res.status !== 200) throw new Error(`DELETE domain ${domain.id}: ${res.status}`);
  return email;
}

function dsnTo(email: DeliveredEmail, recipient: string) {
  const raw = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: email.returnPath, RECIPIENT: recipient, ORIGINAL: email.raw.toString() });
  return smtpSend({ port, from: '', to: [email.returnPath], raw });
}

const suppression = (address: string) => repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, address);

test.serial('inside the window (3 days less a minute after the deletion) the DSN is taken: the email bounces and the address is suppressed', async (t) => {
  const email = await sentThenDeleted('window-in.dev', 'inside@example.net');
  clock.advance(3 * DAY - 60_000);
  const res = await dsnTo(email, 'inside@example.net');
  t.true(res.ok, res.response);
  t.regex(res.response, /^250 /);
  t.is((await w.t0.request('GET', `/v1/emails/${email.id}`)).body.latestStatus, 'BOUNCED');
  t.is((await suppression('inside@example.net'))?.reason, 'HARD_BOUNCE');
});

test.serial('past the window (3 days and a minute) the same kind of DSN is refused like mail for any name not ours, and changes nothing', async (t) => {
  const email = await sentThenDeleted('window-out.dev', 'outside@example.net');
  clock.advance(3 * DAY + 60_000);
  const res = await dsnTo(email, 'outside@example.net');
  t.false(res.ok);
  t.regex(res.response, /^550 5\.7\.1 /);
  t.is((await w.t0.request('GET', `/v1/emails/${email.id}`)).body.latestStatus, 'DELIVERED');
  t.is(await suppression('outside@example.net'), undefined);
});
