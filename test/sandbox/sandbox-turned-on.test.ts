import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld } from '../helpers/mail-world.js';

// Real mail accepted outside sandbox mode and still waiting (a scheduled send, a retry) when the
// server restarts in sandbox mode: it is held, never captured and never marked DELIVERED (its
// recipients would never get it), and it goes to its MX once a server without sandbox mode runs.

const HOUR = 3600_000;

test('mail accepted outside sandbox mode and due in it is held, not captured as DELIVERED, and sent once sandbox mode is off again', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 8, 0, 0));
  const w = await startMailWorld({ clock });
  try {
    const sent = await w.t0.request('POST', '/v1/emails', {
      body: { from: `hello@${w.domain.name}`, to: 'later@example.net', subject: 'Real mail', text: 'x', scheduledAt: new Date(clock.nowMs() + HOUR).toISOString() },
    });
    t.is(sent.status, 200, JSON.stringify(sent.body));
    const emailId = sent.body.emailId;
    await w.restart({ sandbox: true });
    clock.advance(HOUR + 1000);
    await w.settle();
    const held = (await w.t0.request('GET', `/v1/emails/${emailId}`)).body;
    t.is(held.latestStatus, 'DELIVERY_DELAYED', JSON.stringify(held.emailEvents));
    t.false(held.emailEvents.some((e: any) => e.status === 'DELIVERED' || e.status === 'SENT'));
    t.regex(held.emailEvents.at(-1).data.response, /^451 4\.3\.2 held: accepted outside sandbox mode/);
    t.is((await w.t0.request('GET', '/v1/sandbox/messages')).body.total, 0, 'nothing captured');
    // A send made in sandbox mode is still captured beside it.
    const trial = await w.t0.request('POST', '/v1/emails', { body: { from: `hello@${w.domain.name}`, to: 'now@example.net', subject: 'Trial', text: 'x' } });
    await w.settle();
    t.is((await w.t0.request('GET', `/v1/emails/${trial.body.emailId}`)).body.latestStatus, 'DELIVERED');
    t.is((await w.t0.request('GET', '/v1/sandbox/messages')).body.total, 1);

    await w.restart({ sandbox: false });
    clock.advance(HOUR);
    await w.settle();
    const e = (await w.t0.request('GET', `/v1/emails/${emailId}`)).body;
    t.is(e.latestStatus, 'DELIVERED');
    t.not(e.emailEvents.at(-1).data.mxHost, 'sandbox');
    t.deepEqual(w.sink.messages.map((m) => m.rcptTo).flat(), ['later@example.net']);
  } finally {
    await w.close();
  }
});
