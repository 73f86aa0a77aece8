import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld } from '../helpers/mail-world.js';

// Mail accepted in sandbox mode from a domain that never verified, and due once the server runs
// without it (a scheduled send across a restart, or `POSTHORN_SANDBOX=true posthorn send` beside
// a server not in sandbox mode): it is REJECTED, never sent, and the reason says what happened
// rather than that the domain lost a verification it never had.

const HOUR = 3600_000;

test('a send from a never-verified domain accepted in sandbox mode and due outside it is REJECTED, never sent, with a reason that names sandbox mode instead of a lost verification', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 8, 0, 0));
  const w = await startMailWorld({ clock, overrides: { sandbox: true } });
  try {
    const d = (await w.t0.request('POST', '/v1/domains', { body: { name: 'trial.dev', region: 'local' } })).body;
    t.is(d.status, 'PENDING');
    const sent = await w.t0.request('POST', '/v1/emails', {
      body: { from: 'hello@trial.dev', to: 'later@example.net', subject: 'Hi', text: 'x', scheduledAt: new Date(clock.nowMs() + HOUR).toISOString() },
    });
    t.is(sent.status, 200, JSON.stringify(sent.body));
    await w.restart({ sandbox: false });
    clock.advance(HOUR + 1000);
    await w.settle();
    t.is(w.sink.messages.length, 0, 'nothing reaches an MX from a domain that never verified');
    const e = (await w.t0.request('GET', `/v1/emails/${sent.body.emailId}`)).body;
    t.is(e.latestStatus, 'REJECTED');
    const reason: string = e.emailEvents.at(-1).data.rejected.reason;
    t.regex(reason, /trial\.dev is not verified \(PENDING\)/);
    t.notRegex(reason, /any more|again/, 'it was never verified');
    t.regex(reason, /sandbox mode/);
  } finally {
    await w.close();
  }
});
