import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/pg-databases.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import type { SmtpSink } from '../helpers/smtp-sink.js';
import { submissionTransport } from '../helpers/submission-client.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { until } from '../helpers/until.js';

// Bounce notices on a cluster: the recipients of one submitted email delivered by two nodes,
// both bouncing, bring ONE notice naming both (the rows are in the store, claimed per email).

const clock = new ManualClock(Date.UTC(2026, 10, 28, 9, 0, 0));
let url: string;
let w: MailWorld;
let a: TestApp;
let b: TestApp;
let senderMx: SmtpSink;
const gates: Record<'one' | 'two', { held: number; release: () => void; gate: Promise<void> }> = {} as never;

test.before(async () => {
  url = await createTestDatabase();
  const overrides = { store: { url }, submission: { bounceNotices: true } };
  w = await startMailWorld({ clock, overrides: { ...overrides, cluster: { nodeName: 'node-a' } } });
  a = w.t0;
  b = await startTestApp({ zone: w.zone, clock, overrides: { ...overrides, cluster: { nodeName: 'node-b' }, outbound: { port: w.sink.port, allowLoopbackMx: true, signingWorkers: 1 } } });
  senderMx = await w.startSecondSink('sender.dev');
  // Each recipient's MX holds its DATA until let go, then refuses it.
  for (const name of ['one', 'two'] as const) {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    gates[name] = { held: 0, release, gate };
    await w.startSecondSink(`${name}.example`, {
      holdData: () => {
        gates[name].held++;
        return gate;
      },
      onData: (msg) => ({ code: 550, message: `5.1.1 <${msg.rcptTo[0]}>: User unknown` }),
    });
  }
});
test.after.always(async () => {
  for (const g of Object.values(gates)) g.release();
  await b?.close();
  await w?.close();
  if (url) await dropTestDatabase(url);
});

test('two nodes each deliver one recipient of a submitted email, both bounce: one notice names both', async (t) => {
  await Promise.all([a.app.engine.stop(), b.app.engine.stop()]);
  const to = ['nobody@one.example', 'nobody@two.example'];
  const tx = submissionTransport(a);
  const info = await tx.sendMail({ from: 'hello@sender.dev', to, subject: 'Split', text: 'x', envelope: { from: 'app@sender.dev', to } });
  tx.close();
  const id = /queued as (em_\S+)$/.exec(info.response)![1]!;
  const db = a.app.store.db;
  const due = (rcpt: string, at: number) => db.updateTable('deliveries').set({ next_attempt_at: at }).where('email_id', '=', id).where('recipient', '=', rcpt).execute();

  // node-a takes the first recipient (the second is not due yet) and is held at its MX...
  await due('nobody@two.example', clock.nowMs() + 3600_000);
  a.app.engine.start();
  a.app.engine.wake();
  await until(() => gates.one.held === 1);
  // ...and claims nothing more; node-b takes the second.
  const aStopped = a.app.engine.stop();
  await due('nobody@two.example', clock.nowMs());
  b.app.engine.start();
  b.app.engine.wake();
  await until(() => gates.two.held === 1);
  const owners = await db.selectFrom('deliveries').select(['recipient', 'lease_owner']).where('email_id', '=', id).orderBy('recipient').execute();
  t.deepEqual(owners, [
    { recipient: 'nobody@one.example', lease_owner: 'node-a' },
    { recipient: 'nobody@two.example', lease_owner: 'node-b' },
  ]);

  gates.one.release();
  gates.two.release();
  await aStopped;
  a.app.engine.start();
  await senderMx.waitForMessages(1);
  // Everything either node set off has run; then both look again.
  for (const n of [a, b]) {
    n.app.engine.wake();
    await n.app.engine.whenIdle();
    await n.app.services.events.settled();
  }
  await Promise.all([a.app.bounceNotices!.runNow(), b.app.bounceNotices!.runNow()]);
  t.is((await a.request('GET', `/v1/emails/${id}`)).body.latestStatus, 'BOUNCED');
  t.is(senderMx.messages.length, 1, 'one notice');
  const raw = senderMx.messages[0]!.raw.toString('latin1');
  // In the order the two nodes recorded the failures: either may come first.
  t.deepEqual(raw.match(/^Final-Recipient: rfc822; \S+(?=\r$)/gm)?.sort(), ['Final-Recipient: rfc822; nobody@one.example', 'Final-Recipient: rfc822; nobody@two.example']);
  t.deepEqual(await db.selectFrom('bounce_notice_recipients').selectAll().execute(), []);
});
