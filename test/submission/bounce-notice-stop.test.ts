import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld } from '../helpers/mail-world.js';
import { submissionTransport } from '../helpers/submission-client.js';

// Bounce notices are best effort (docs/inbound.md, Bounce notices): one due when the process
// stops is logged and lost. A graceful stop waits for the notice being sent, never for the ones
// queued behind it (each may take minutes against a slow MX: the stop would outlast its timeout).

test('a graceful stop sends the notice in flight, not those queued behind it', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 27, 8, 0, 0));
  const w = await startMailWorld({ clock, overrides: { submission: { bounceNotices: true } } });
  t.teardown(() => w.close());
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let held = 0;
  // The sender's MX holds the first notice at DATA until the stop is under way.
  const senderMx = await w.startSecondSink('sender.dev', {
    holdData: () => {
      held++;
      return gate;
    },
  });
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
    if (held >= 1 && statuses.every((s) => s === 'BOUNCED')) break;
    if (i > 500) throw new Error(`not ready: ${statuses.join(', ')}, held ${held}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  // The gate opens when the stop waits for the after-commit handlers.
  const events = w.t0.app.services.events;
  const settled = events.settled.bind(events);
  events.settled = async () => {
    release();
    await settled();
  };
  await w.t0.stop();
  t.is(senderMx.messages.length, 1, 'the notice in flight, and no other');
});
