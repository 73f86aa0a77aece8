import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { HOLDS_REFRESH_MS } from '../../src/core/shaping/traffic-shaper.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { acceptAudit, refuseAudit } from '../helpers/refuse-audit.js';

// Lifting a traffic-shaping hold, the release of the mail it parked and the audit entry commit
// together (docs/operations.md, The audit log): when the store refuses the entry, the hold stays
// in place (in the store and in the engine) and its mail stays parked; a normal lift does all
// three. Run on SQLite and, with POSTHORN_TEST_STORE=postgres, on PostgreSQL.

const T0 = Date.UTC(2026, 10, 26, 9, 0, 0);
const RULES = { replyRules: [{ enhancedCode: '4.7.28', action: 'suspend', duration: '30m', reason: 'unusual rate' }] };
const clock = new ManualClock(T0);
let w: MailWorld;
let op: string;

test.before(async () => {
  w = await startMailWorld({ clock, overrides: { rateLimit: { perSecond: 1_000_000 }, outbound: RULES } as never });
  op = (await w.t0.app.services.operatorKeys.create('ops')).token;
});
test.after.always(async () => {
  if (w) await acceptAudit(w.t0.app);
  await w?.close();
});

async function send(to: string): Promise<string> {
  const res = await w.t0.request('POST', '/v1/emails', { body: { from: `News <news@${w.domain.name}>`, to, subject: 'Hi', text: 'Hello' } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.emailId;
}
const statuses = async (id: string) => ((await w.t0.request('GET', `/v1/emails/${id}`)).body.emailEvents as { status: string }[]).map((e) => e.status);
const entries = async (n = 5) => (await w.t0.app.services.audit.list(n)).entries;
const lastAuditId = async () => (await entries(1))[0]?.id ?? 0;
const holds = async () => (await w.t0.app.services.queue.summary()).shaping.holds.map((h) => h.id);
const parked = async () =>
  ((await w.t0.request('GET', '/admin/v1/queue/messages?destination=gmailish.example', { key: op })).body.messages as any[]).map((m) => [m.emailId, m.state, m.nextAttemptAt]);

test.serial('lifting a hold: a refused audit entry leaves the hold on and its mail parked (API and CLI path); a normal lift releases the mail and is audited', async (t) => {
  let refusing = true;
  const mx2 = await w.startSecondSink('gmailish.example', { onMailFrom: () => (refusing ? { code: 421, message: '4.7.28 [127.0.0.1] unusual rate of unsolicited mail' } : undefined) });
  await send('one@gmailish.example');
  await w.settle();
  const held = [await send('two@gmailish.example'), await send('three@gmailish.example')];
  await w.settle();
  const [hold] = (await w.t0.app.services.queue.summary()).shaping.holds;
  t.truthy(hold, 'the 421 put a hold in place');
  const before = await parked();
  t.true(before.filter(([id]) => held.includes(id)).every(([, state]) => state === 'suspended'));
  const connections = mx2.connectionCount;
  const lastEntry = await lastAuditId();
  refusing = false;

  await refuseAudit(w.t0.app);
  const res = await w.t0.request('DELETE', `/admin/v1/queue/shaping-holds/${hold!.id}`, { key: op });
  t.is(res.status, 500, JSON.stringify(res.body));
  t.is(res.body.error.code, 'INTERNAL_SERVER_ERROR');
  await t.throwsAsync(w.t0.app.services.shaping.endHold('cli', hold!.id), { any: true, message: /refused by the test/ });
  t.deepEqual(await holds(), [hold!.id], 'the hold is still stored');
  t.deepEqual(await parked(), before, 'its mail is still parked, due as before');
  t.is(await lastAuditId(), lastEntry);
  await w.settle();
  t.is(mx2.connectionCount, connections, 'the engine still holds the rollup');
  await acceptAudit(w.t0.app);

  const lifted = await w.t0.request('DELETE', `/admin/v1/queue/shaping-holds/${hold!.id}`, { key: op });
  t.is(lifted.status, 200, JSON.stringify(lifted.body));
  t.deepEqual(await holds(), []);
  const [entry] = await entries(1);
  t.deepEqual([entry!.action, entry!.target], ['queue.shaping.resume', { holdId: hold!.id, source: hold!.source, rollup: 'gmailish.example', kind: 'suspend' }]);
  t.true((await parked()).filter(([id]) => held.includes(id)).every(([, , due]) => due <= new Date(clock.nowMs() + HOLDS_REFRESH_MS + 1000).toISOString()), 'released with the lift');
  // On PostgreSQL the mail is due once every node has read the holds again.
  if (w.t0.app.store.kind === 'postgres') clock.advance(HOLDS_REFRESH_MS + 1000);
  await w.settle();
  for (const id of held) t.true((await statuses(id)).includes('DELIVERED'), id);
  t.is((await w.t0.request('DELETE', `/admin/v1/queue/shaping-holds/${hold!.id}`, { key: op })).status, 404);
  t.is((await entries(5)).filter((e) => e.action === 'queue.shaping.resume').length, 1, 'one entry: the lift that happened');
});
