/**
 * RFC 8461 §5.1: "A message delivery attempt MUST NOT be permanently failed until the sender has
 * first checked for the presence of a new policy (as indicated by the "id" field in the
 * "_mta-sts" TXT record)." A delivery an enforce policy refuses makes the next lookup for the
 * domain ask for the TXT record afresh, whatever its TTL, at most once per five minutes per domain.
 * The TXT records here live for a day, longer than the give-up age: only a fresh check finds
 * a new id in time.
 */
import test from 'ava';
import { ManualClock } from '../../../src/lib/clock.js';
import { sendAndSettle, startTlsWorld, type Mx, type TlsWorld } from '../../helpers/tls-world.js';

const clock = new ManualClock(Date.UTC(2026, 10, 20, 8, 0, 0));
const DOMAINS = ['fixed.test', 'bulk.test', 'giveup.test', 'badcert.test'];
const DAY_SECONDS = 86400;
const MINUTE_MS = 60_000;
let w: TlsWorld;
let fixed: Mx;
let bulk: Mx;
let giveup: Mx;
let badCert: Mx;

test.before(async () => {
  w = await startTlsWorld({ clock, policyDomains: DOMAINS, overrides: { outbound: { maxAgeHours: 12 } } });
  fixed = await w.addMx('mx.fixed.tls.test', 'good');
  bulk = await w.addMx('mx.bulk.tls.test', 'good');
  giveup = await w.addMx('mx.giveup.tls.test', 'good');
  badCert = await w.addMx('mx.badcert.tls.test', 'wrong-name');
});
test.after.always(async () => {
  await w?.close();
});

/** An enforce policy under `id` whose TXT record is cached for a day. */
function publish(domain: string, mx: string[], id: string): void {
  w.publishSts(domain, 'enforce', mx, id);
  w.zone.set(`_mta-sts.${domain}`, 'TXT', [`v=STSv1; id=${id};`], DAY_SECONDS);
}

const send = (to: string) => sendAndSettle(w, to);
const email = async (id: string) => (await w.t0.request('GET', `/v1/emails/${id}`)).body;
const txtQueries = (domain: string) => w.zone.queriesFor(`_mta-sts.${domain}`, 'TXT');

test.serial('a refused delivery looks for a new policy at its next retry, not when the TXT TTL runs out', async (t) => {
  w.setMx('fixed.test', [fixed.host]);
  publish('fixed.test', ['mx.elsewhere.test'], '1');
  const id = await send('alice@fixed.test');
  const first = (await email(id)).emailEvents.at(-1);
  t.is(first.status, 'DELIVERY_DELAYED');
  t.like(first.data.tls, { policy: 'sts', mode: 'enforce', result: 'validation-failure', mxHost: fixed.host });
  // The recipient fixes its policy under a new id; the old TXT answer is still cached for a day.
  publish('fixed.test', [fixed.host], '2');
  clock.advance(2 * MINUTE_MS);
  await w.settle();
  t.is((await email(id)).latestStatus, 'DELIVERED');
  t.is(fixed.sink.messages.length, 1);
  t.is(w.policy.fetches.filter((h) => h === 'mta-sts.fixed.test').length, 2);
});

test.serial('refusals to one domain cost one fresh TXT query per five minutes, not one per delivery', async (t) => {
  w.setMx('bulk.test', [bulk.host]);
  publish('bulk.test', ['mx.elsewhere.test'], '1');
  for (let i = 0; i < 5; i++) await send(`b${i}@bulk.test`);
  t.is(txtQueries('bulk.test'), 2, 'five refused deliveries: the first answer, then one fresh look after the first refusal');
  clock.advance(2 * MINUTE_MS); // every retry is due (1 minute +-15%)
  await w.settle();
  t.is(txtQueries('bulk.test'), 2, 'five refused retries within five minutes of the fresh look: none');
  clock.advance(6 * MINUTE_MS); // every retry is due again (5 minutes +-15%)
  await w.settle();
  t.is(txtQueries('bulk.test'), 3, 'the next window: one more');
  t.is((await w.t0.app.store.db.selectFrom('deliveries').select('attempts').where('rcpt_domain', '=', 'bulk.test').execute()).map((d) => d.attempts).join(), '3,3,3,3,3');
  t.is(bulk.sink.connectionCount, 0);
});

test.serial('a delivery is FAILED at the give-up age only after a fresh look for a new policy', async (t) => {
  w.setMx('giveup.test', [giveup.host]);
  publish('giveup.test', ['mx.elsewhere.test'], '1');
  const id = await send('carol@giveup.test');
  t.is((await email(id)).latestStatus, 'DELIVERY_DELAYED');
  // Queries seen once each attempt was over: the last entry is the give-up attempt's.
  const seen: number[] = [txtQueries('giveup.test')];
  for (let i = 0; i < 40 && (await email(id)).latestStatus !== 'FAILED'; i++) {
    clock.advance(2 * 3_600_000);
    await w.settle();
    seen.push(txtQueries('giveup.test'));
  }
  const events = (await email(id)).emailEvents;
  t.is(events.at(-1).status, 'FAILED');
  t.like(events.at(-1).data.tls, { policy: 'sts', mode: 'enforce', result: 'validation-failure' });
  t.true(seen.length >= 3);
  t.true(seen.at(-1)! > seen.at(-2)!, `a _mta-sts TXT query after the last-but-one attempt (queries after each attempt: ${seen.join(', ')})`);
  t.is(giveup.sink.connectionCount, 0);
});


test.serial('a session an enforce policy refuses (the certificate) makes the next retry look for a new policy too', async (t) => {
  w.setMx('badcert.test', [badCert.host]);
  publish('badcert.test', [badCert.host], '1');
  const id = await send('dave@badcert.test');
  t.like((await email(id)).emailEvents.at(-1).data.tls, { policy: 'sts', mode: 'enforce', result: 'certificate-host-mismatch' });
  t.is(badCert.mailFroms(), 0);
  // The recipient steps back to testing under a new id while it fixes the certificate.
  w.publishSts('badcert.test', 'testing', [badCert.host], '2');
  w.zone.set('_mta-sts.badcert.test', 'TXT', ['v=STSv1; id=2;'], DAY_SECONDS);
  clock.advance(2 * MINUTE_MS);
  await w.settle();
  const e = (await email(id)).emailEvents.at(-1);
  t.is(e.status, 'DELIVERED');
  t.like(e.data.tls, { policy: 'sts', mode: 'testing', result: 'certificate-host-mismatch' });
});
