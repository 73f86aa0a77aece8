import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { createTlsReportsRepository } from '../../src/store/repositories/tls-reports-repository.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/pg-databases.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// TLS reports (RFC 8460) sent by two nodes sharing one PostgreSQL database, one injected clock.
// Each node's report run (the daily one and the five-minute retries: whichever node claims the
// period) claims due report deliveries with a lease. A report mail can take minutes (a slow or
// tarpitting MX, six MX addresses tried in turn): a delivery must stay the claiming node's while
// it is attempted, and one a node has not started yet must not sit leased behind it.

const clock = new ManualClock(Date.UTC(2026, 10, 26, 9, 0, 0));
/** Short, so its renewal (every third, in real time) is seen within the test. */
const LEASE_MS = 1500;
let url: string;
let w: MailWorld;
let b: TestApp;

test.before(async () => {
  url = await createTestDatabase();
  const shared = { store: { url } };
  w = await startMailWorld({ clock, overrides: { ...shared, cluster: { nodeName: 'node-a' }, outbound: { leaseMs: LEASE_MS } } });
  b = await startTestApp({ zone: w.zone, clock, overrides: { ...shared, cluster: { nodeName: 'node-b' }, outbound: w.t0.config.outbound } });
  w.addRecipientDomain('collector.test');
});
test.after.always(async () => {
  await b?.close();
  await w?.close();
  if (url) await dropTestDatabase(url);
});

async function queueReport(policyDomain: string): Promise<void> {
  const target = `mailto:tls@collector.test`;
  const inserted = await createTlsReportsRepository(w.t0.app.store.db).insertReport({
    policyDomain,
    day: '2026-11-25',
    reportId: `${policyDomain}@mx.posthorn.test`,
    state: 'queued',
    rua: [target],
    reportJson: JSON.stringify({ 'organization-name': 'test', policies: [] }),
    createdAt: clock.now().toISOString(),
    targets: [target],
    dueMs: clock.nowMs(),
  });
  if (!inserted) throw new Error(`report of ${policyDomain} not queued`);
}

/** How many report mails about `policyDomain` the collector received. */
const mailsAbout = (policyDomain: string) => w.sink.messages.filter((m) => m.raw.toString('utf8').includes(`\r\nTLS-Report-Domain: ${policyDomain}\r\n`)).length;

async function deliveryOf(policyDomain: string) {
  return w.t0.app.store.db.selectFrom('tls_report_deliveries').selectAll().where('policy_domain', '=', policyDomain).executeTakeFirstOrThrow();
}

test.serial('a report mail that outlasts its lease is neither sent again by another node, nor is the report behind it in the claim', async (t) => {
  await queueReport('one.example');
  await queueReport('two.example');
  // The collector holds the first report mail's DATA reply: node A is mid-attempt.
  let held!: () => void;
  const holding = new Promise<void>((resolve) => (held = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let first = true;
  w.sink.setBehaviour({
    holdData: () => {
      if (!first) return Promise.resolve();
      first = false;
      held();
      return released;
    },
  });
  t.teardown(() => w.sink.setBehaviour({ holdData: undefined }));
  const runA = w.t0.app.tlsReports.sendDue();
  await holding;
  const attempted = (await deliveryOf('one.example')).lease_until !== null ? 'one.example' : 'two.example';
  // The attempt goes on past its lease (and past the ten minutes report leases used to have).
  clock.advance(11 * 60_000);
  // Node A keeps the lease of what it is attempting (renewed every third of it): wait for that,
  // at most a few renewal periods.
  const deadline = Date.now() + 10 * LEASE_MS;
  while (Date.now() < deadline && !(((await deliveryOf(attempted)).lease_until ?? 0) > clock.nowMs())) await new Promise((r) => setImmediate(r));
  // Node B's run at that moment: sends what node A has not started, not what it is sending.
  await b.app.tlsReports.sendDue();
  release();
  await runA;
  t.is(mailsAbout('one.example'), 1, 'one.example reported once');
  t.is(mailsAbout('two.example'), 1, 'two.example reported once');
  t.like(await deliveryOf('one.example'), { state: 'sent', attempts: 1, lease_until: null });
  t.like(await deliveryOf('two.example'), { state: 'sent', attempts: 1, lease_until: null });
});

test.serial('an attempt whose lease another node took records nothing over that node\'s result', async (t) => {
  await queueReport('three.example');
  const a = w.t0.app.services.tlsReports;
  const [jobA] = await a.claimDue(10);
  t.is(jobA?.policyDomain, 'three.example');
  // Node A stalled past its lease (frozen, its renewals never written): node B takes the delivery and sends it.
  clock.advance(11 * 60_000);
  const [jobB] = await b.app.services.tlsReports.claimDue(10);
  t.is(jobB?.id, jobA!.id);
  t.is(await b.app.services.tlsReports.recordAttempt(jobB!, { ok: true }), 'sent');
  // Node A wakes and its attempt fails: a retry recorded now would send the report a third time.
  await a.recordAttempt(jobA!, { ok: false, permanent: false, error: '451 4.3.0 try again later' });
  t.like(await deliveryOf('three.example'), { state: 'sent', attempts: 1, last_error: null, lease_until: null });
  clock.advance(60 * 60_000);
  t.deepEqual(await a.claimDue(10), [], 'nothing left to send');
});
