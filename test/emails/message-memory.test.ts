import test from 'ava';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { until } from '../helpers/until.js';

// The delivery engine's memory budget (outbound.messageMemoryMb), end to end: emails with large
// attachments are composed and sent only as far as the budget allows; the rest wait their turn
// unread, and every one is delivered in the end, one larger than the whole budget included.

const ATTACHMENT_BYTES = 600 * 1024;
const attachment = (fill: number, bytes = ATTACHMENT_BYTES) => ({ filename: 'report.bin', content: Buffer.alloc((bytes / 4) * 3, fill).toString('base64') });

let w: MailWorld;
const held: (() => void)[] = [];
test.before(async () => {
  w = await startMailWorld({ overrides: { outbound: { messageMemoryMb: 1 } }, sink: { holdData: () => new Promise<void>((r) => held.push(r)) } });
  for (const d of ['big1.test', 'big2.test', 'big3.test', 'huge.test']) w.addRecipientDomain(d);
});
test.after.always(async () => {
  for (const release of held.splice(0)) release();
  await w?.close();
});

test.serial('large messages beyond the budget wait unread while one is on the wire; all are delivered', async (t) => {
  const engine = w.t0.app.engine;
  const ids: string[] = [];
  for (const [i, domain] of ['big1.test', 'big2.test', 'big3.test'].entries()) {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: `r@${domain}`, attachments: [attachment(i + 1)] }) });
    t.is(res.status, 200, JSON.stringify(res.body));
    ids.push(res.body.emailId);
  }
  // Two of 600 KB do not fit in 1 MB: one message is held by the sink, the other two wait.
  await until(() => held.length === 1 && engine.budget.queued === 2);
  t.true(engine.budget.inUse > ATTACHMENT_BYTES && engine.budget.inUse < 1024 * 1024, String(engine.budget.inUse));
  for (let delivered = 1; delivered <= 3; delivered++) {
    held.shift()!();
    await w.sink.waitForMessages(delivered);
    if (delivered < 3) await until(() => held.length === 1);
    t.is(held.length, delivered < 3 ? 1 : 0, 'one message on the wire at a time');
  }
  await w.settle();
  t.is(engine.budget.inUse, 0);
  t.is(engine.budget.queued, 0);
  const domains = w.sink.messages.map((m) => m.rcptTo[0]);
  t.deepEqual([...domains].sort(), ['r@big1.test', 'r@big2.test', 'r@big3.test']);
  // Each is the message it should be, attachment and all.
  for (const m of w.sink.messages) t.true(m.raw.length > ATTACHMENT_BYTES, `${m.raw.length} bytes`);
  for (const id of ids) t.is((await w.t0.request('GET', `/v1/emails/${id}`)).body.latestStatus, 'DELIVERED');
});

test.serial('a message larger than the whole budget goes alone', async (t) => {
  const before = w.sink.messages.length;
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'r@huge.test', attachments: [attachment(9, 1536 * 1024)] }) });
  t.is(res.status, 200);
  await until(() => held.length === 1);
  t.true(w.t0.app.engine.budget.inUse > 1024 * 1024);
  held.shift()!();
  await w.sink.waitForMessages(before + 1);
  await w.settle();
  t.is((await w.t0.request('GET', `/v1/emails/${res.body.emailId}`)).body.latestStatus, 'DELIVERED');
  t.is(w.t0.app.engine.budget.inUse, 0);
});
