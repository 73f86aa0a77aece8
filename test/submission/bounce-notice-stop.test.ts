import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld } from '../helpers/mail-world.js';
import { submissionTransport } from '../helpers/submission-client.js';

// A graceful stop loses no bounce notice (docs/inbound.md, Bounce notices): it waits for the
// notice on the wire, never for those waiting behind it for a connection (each may take minutes
// against a slow MX: the stop would outlast its timeout); they stay in the store and go after
// the next start.

test('a graceful stop sends the notice in flight; those queued behind it are sent after a restart', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 27, 8, 0, 0));
  // One connection per host: the notices after the first wait for it in the pool.
  const w = await startMailWorld({ clock, overrides: { submission: { bounceNotices: true }, outbound: { maxConnectionsPerHost: 1 } } });
  t.teardown(() => w.close());
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let held = 0;
  // The sender's MX holds the first notice at DATA until the stop is under way.
  const senderMx = await w.startSecondSink('sender.dev', { holdData: () => (held++ === 0 ? gate : Promise.resolve()) });
  w.sink.setBehaviour({ onRcpt: (address) => (address.startsWith('nobody') ? { code: 550, message: `5.1.1 <${address}>: User unknown` } : undefined) });

  const ids: string[] = [];
  for (let i = 1; i <= 3; i++) {
    const tx = submissionTransport(w.t0);
    const info = await tx.sendMail({ from: 'hello@sender.dev', to: `nobody-${i}@example.net`, subject: `Bounce ${i}`, text: 'x', envelope: { from: 'app@sender.dev', to: [`nobody-${i}@example.net`] } });
    tx.close();
    ids.push(/queued as (em_\S+)$/.exec(info.response)![1]!);
  }
  // Waited for without the bus's settled(), which would wait for the held notice.
  for (let i = 0; ; i++) {
    w.t0.app.engine.wake();
    const statuses = await Promise.all(ids.map(async (id) => (await w.t0.request('GET', `/v1/emails/${id}`)).body.latestStatus));
    const pending = await w.t0.app.store.db.selectFrom('bounce_notice_recipients').select('email_id').execute();
    if (held >= 1 && statuses.every((s) => s === 'BOUNCED') && pending.length === 3) break;
    if (i > 500) throw new Error(`not ready: ${statuses.join(', ')}, held ${held}, pending ${pending.length}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  // The gate opens once the engine's stop has answered the sends waiting for a connection.
  const engine = w.t0.app.engine;
  const engineStop = engine.stop.bind(engine);
  engine.stop = async () => {
    await engineStop();
    release();
  };
  await w.t0.stop();
  // At least the notice in flight. Under load a notice claimed just as the stop began may take
  // the connection after it, before it closes: sent is not lost; it is checked once below.
  t.true(senderMx.messages.length >= 1, 'the notice in flight');
  // Which one: the three fell due at the same (test clock) moment, so any may take the connection first.
  const inFlight = /^Final-Recipient: rfc822; (\S+)\r$/m.exec(senderMx.messages[0]!.raw.toString('latin1'))?.[1];
  t.true(['nobody-1@example.net', 'nobody-2@example.net', 'nobody-3@example.net'].includes(inFlight ?? ''), inFlight);

  // The same data dir: those left are sent at start, and each notice went once.
  await w.restart();
  await senderMx.waitForMessages(3);
  await w.settle();
  await w.t0.app.bounceNotices!.runNow();
  const named = senderMx.messages.map((m) => /^Final-Recipient: rfc822; (\S+)\r$/m.exec(m.raw.toString('latin1'))![1]).sort();
  t.deepEqual(named, ['nobody-1@example.net', 'nobody-2@example.net', 'nobody-3@example.net'], 'each once');
  t.deepEqual(await w.t0.app.store.db.selectFrom('bounce_notice_recipients').selectAll().execute(), []);
});
