import test from 'ava';
import { STALE_MS } from '../../src/core/cluster/cluster-service.js';
import { ManualClock } from '../../src/lib/clock.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/pg-databases.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import type { SmtpSink } from '../helpers/smtp-sink.js';
import { submissionTransport } from '../helpers/submission-client.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { until } from '../helpers/until.js';

// Bounce notices a node was sending when it died: the live nodes' sweep frees its claims at
// once (not when its five-minute lease runs out) and one of them sends the notice; a live
// node's claim stays its own. Two nodes on one database; which of them claims a notice is
// whichever gets there first, so each test reads the holder from the store.

const clock = new ManualClock(Date.UTC(2026, 10, 29, 9, 0, 0));
let url: string;
let w: MailWorld;
let b: TestApp;
let senderMx: SmtpSink;
/** While set, the sender's MX holds each DATA until it is released. */
let hold: { held: number; release: () => void; gate: Promise<void> } | undefined;
/** Every gate made, released at the end. */
const gates: (() => void)[] = [];
/** The sender's MX drops the connection at DATA's end (the session of a node that died); counts those. */
let dropData = false;
let dropped = 0;

function holdAtSenderMx() {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  hold = { held: 0, release, gate };
  gates.push(release);
  return hold;
}

test.before(async () => {
  url = await createTestDatabase();
  const overrides = { store: { url }, submission: { bounceNotices: true } };
  w = await startMailWorld({ clock, overrides: { ...overrides, cluster: { nodeName: 'node-a' } } });
  b = await startTestApp({ zone: w.zone, clock, overrides: { ...overrides, cluster: { nodeName: 'node-b' }, outbound: { ...w.t0.config.outbound } } });
  (b as { key: string }).key = w.t0.key;
  senderMx = await w.startSecondSink('sender.dev', {
    holdData: () => {
      if (!hold) return Promise.resolve();
      hold.held++;
      return hold.gate;
    },
    onData: () => {
      if (!dropData) return undefined;
      dropped++;
      return 'drop';
    },
  });
  // Every recipient at bad.example is refused at once: a notice is owed for each email.
  await w.startSecondSink('bad.example', { onRcpt: (rcpt) => ({ code: 550, message: `5.1.1 <${rcpt}>: User unknown` }) });
});
test.after.always(async () => {
  dropData = true;
  for (const release of gates) release();
  await b?.close();
  await w?.close();
  if (url) await dropTestDatabase(url);
});

const nodes = () => [w.t0, b];

/** Submits an email to `rcpt` (refused) and waits until a node has claimed its notice and is held at the sender's MX; returns its id and the holder. */
async function noticeHeld(rcpt: string): Promise<{ id: string; holder: TestApp; other: TestApp }> {
  const gate = holdAtSenderMx();
  const tx = submissionTransport(w.t0);
  const info = await tx.sendMail({ from: 'hello@sender.dev', to: rcpt, subject: 'Fails', text: 'x', envelope: { from: 'app@sender.dev', to: [rcpt] } });
  tx.close();
  const id = /queued as (em_\S+)$/.exec(info.response)![1]!;
  for (const n of nodes()) n.app.engine.wake();
  await until(() => gate.held === 1);
  const rows = await b.app.store.db.selectFrom('bounce_notice_recipients').select(['recipient', 'lease_owner']).where('email_id', '=', id).execute();
  if (rows.length !== 1 || !rows[0]!.lease_owner) throw new Error(`the notice is not claimed: ${JSON.stringify(rows)}`);
  const holder = nodes().find((n) => n.app.nodeId === rows[0]!.lease_owner)!;
  return { id, holder, other: nodes().find((n) => n !== holder)! };
}

const noticesFor = (rcpt: string) => senderMx.messages.filter((m) => m.raw.toString('latin1').includes(`Final-Recipient: rfc822; ${rcpt}`));

test.serial('a live node\'s claim on a bounce notice is not freed by the sweep; it sends the notice once', async (t) => {
  const { id, holder, other } = await noticeHeld('wall@bad.example');
  t.log(`held by ${holder.app.nodeId}`);
  const db = other.app.store.db;
  await Promise.all([other.app.cluster!.sweepNow(), holder.app.cluster!.sweepNow()]);
  const row = await db.selectFrom('bounce_notice_recipients').select('lease_owner').where('email_id', '=', id).executeTakeFirstOrThrow();
  // (Freed, it would be claimed again and held at the MX: runNow() below would never end.)
  if (!t.is(row.lease_owner, holder.app.nodeId, 'the live holder keeps its claim')) return;
  await other.app.bounceNotices!.runNow();
  t.is(hold!.held, 1, 'nobody else sends it meanwhile');
  hold!.release();
  hold = undefined;
  await senderMx.waitForMessages(1);
  await holder.app.bounceNotices!.runNow();
  await other.app.bounceNotices!.runNow();
  t.is(noticesFor('wall@bad.example').length, 1, 'one notice');
  t.deepEqual(await db.selectFrom('bounce_notice_recipients').select('id').where('email_id', '=', id).execute(), []);
});

test.serial('a dead node\'s claim on a bounce notice is freed by the sweep before its lease runs out, and a live node sends the notice once', async (t) => {
  const before = senderMx.messages.length;
  const { id, holder, other } = await noticeHeld('dead@bad.example');
  t.log(`held by ${holder.app.nodeId}`);
  const db = other.app.store.db;
  const gate = hold!;
  hold = undefined; // the live node's send goes through
  // The holder dies with its send on the wire: cut off from the store, it is silent from now.
  await holder.app.store.close();
  // Its claim would hold for five minutes; well within them, the live node's sweep frees it.
  clock.advance(STALE_MS + 5000);
  const claim = await db.selectFrom('bounce_notice_recipients').select(['lease_owner', 'lease_until']).where('email_id', '=', id).executeTakeFirstOrThrow();
  t.is(claim.lease_owner, holder.app.nodeId);
  t.true(Number(claim.lease_until) > clock.nowMs() + 60_000, 'its lease runs for minutes yet');
  // Silent for longer than STALE_MS (heartbeats are wall-clock times): dead at the next sweep.
  await db.updateTable('cluster_nodes').set({ heartbeat_at: Date.now() - STALE_MS - 1000 }).where('id', '=', holder.app.nodeId).execute();
  await other.app.cluster!.sweepNow();
  const rows = await db.selectFrom('bounce_notice_recipients').select('lease_owner').where('email_id', '=', id).execute();
  t.true(
    rows.every((r) => r.lease_owner === other.app.nodeId),
    `claimed by the live node as the sweep ends (or already sent): ${JSON.stringify(rows)}`,
  );
  await senderMx.waitForMessages(before + 1);
  await other.app.bounceNotices!.runNow();
  const notices = noticesFor('dead@bad.example');
  t.is(notices.length, 1, 'one notice');
  t.regex(notices[0]!.raw.toString('latin1'), /^Final-Recipient: rfc822; dead@bad\.example\r$/m);
  t.deepEqual(notices[0]!.rcptTo, ['app@sender.dev']);
  t.deepEqual(await db.selectFrom('bounce_notice_recipients').select('id').where('email_id', '=', id).execute(), []);
  // The dead node's session dies with it (its connection drops at DATA's end): still one.
  dropData = true;
  gate.release();
  await until(() => dropped === 1);
  await other.app.bounceNotices!.runNow();
  t.is(noticesFor('dead@bad.example').length, 1);
});
