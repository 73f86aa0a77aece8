import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startTlsWorld, type Mx, type TlsWorld } from '../helpers/tls-world.js';
import { submissionTransport } from '../helpers/submission-client.js';

// A bounce notice is mail like any other for its recipient's domain: it carries the original's
// headers and recipients, so the domain's MTA-STS policy applies to it (RFC 8461 §5), unlike a
// TLS report (RFC 8460 §3), which must reach a domain whose TLS is broken.

const clock = new ManualClock(Date.UTC(2026, 10, 27, 8, 0, 0));
let w: TlsWorld;
let unlisted: Mx;
let refusing: Mx;

test.before(async () => {
  w = await startTlsWorld({ clock, policyDomains: ['sender.dev'], overrides: { submission: { bounceNotices: true } } });
  unlisted = await w.addMx('mx.unlisted.tls.test', 'good');
  refusing = await w.addMx('mx.refusing.tls.test', 'good', { onRcpt: (address) => ({ code: 550, message: `5.1.1 <${address}>: User unknown` }) });
  w.setMx('bounce.test', [refusing.host]);
});
test.after.always(async () => {
  await w?.close();
});

async function status(id: string): Promise<string> {
  for (let i = 0; i < 100; i++) {
    await w.settle();
    await w.t0.app.services.events.settled();
    const res = await w.t0.request('GET', `/v1/emails/${id}`);
    if (res.body.latestStatus !== 'QUEUED' && res.body.latestStatus !== 'SENT') return res.body.latestStatus;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`email ${id} never settled`);
}

test.serial("the envelope sender's MTA-STS enforce policy: the notice goes only to an MX the policy lists", async (t) => {
  // sender.dev's first MX is not in its enforce policy; the second is.
  w.setMx('sender.dev', [unlisted.host, w.mx1.host]);
  w.publishSts('sender.dev', 'enforce', [w.mx1.host], '1');
  const tx = submissionTransport(w.t0);
  const info = await tx.sendMail({ from: 'hello@sender.dev', to: 'nobody@bounce.test', subject: 'Secret plans', text: 'x', envelope: { from: 'app@sender.dev', to: ['nobody@bounce.test'] } });
  tx.close();
  const id = /queued as (em_\S+)$/.exec(info.response)![1]!;
  t.is(await status(id), 'BOUNCED');
  t.is(unlisted.mailFroms(), 0, 'never sent to an MX the enforce policy does not list');
  t.is(unlisted.sink.messages.length, 0);
  const [notice] = await w.mx1.sink.waitForMessages(1);
  t.deepEqual(notice!.rcptTo, ['app@sender.dev']);
  t.true(notice!.secure);
});
