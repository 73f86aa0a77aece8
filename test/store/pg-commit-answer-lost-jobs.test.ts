import test from 'ava';
import pg from 'pg';
import { ManualClock } from '../../src/lib/clock.js';
import { startCommitCutWorld, type CommitCutWorld } from '../helpers/commit-cut-world.js';
import { sendBody, type MailWorld } from '../helpers/mail-world.js';
import type { CommitCutter } from '../helpers/pg-commit-cutter.js';
import { createBounceNoticesRepository } from '../../src/store/repositories/bounce-notices-repository.js';
import { createCampaignsRepository } from '../../src/store/repositories/campaigns-repository.js';
import { createClusterRepository } from '../../src/store/repositories/cluster-repository.js';
import { createSandboxMessagesRepository } from '../../src/store/repositories/sandbox-messages-repository.js';
import { createShapingRepository } from '../../src/store/repositories/shaping-repository.js';
import { createTlsReportsRepository } from '../../src/store/repositories/tls-reports-repository.js';

// PostgreSQL (whatever POSTHORN_TEST_STORE says): as pg-commit-answer-lost.test.ts, but for the
// writes the node makes on its own (sweeps, claims, holds, recounts, reports, purges). The
// connection is cut after the server committed and before its answer arrives: the write
// happened, so the job must carry on with its result, not fail and (at its next turn) find
// its own work done by "someone else", count it twice, or leak a claim until it expires.
// Each cut is armed with a value only the call under test sends, never the app's own jobs.

const NODE = 'node-lost';
let cw: CommitCutWorld;
let w: MailWorld;
let cutter: CommitCutter;
let client: pg.Client;
const clock = new ManualClock(Date.UTC(2026, 10, 29, 9, 0, 0));
/** Far past the world's clock: rows due then are never the app's own jobs' to take. */
const FAR_MS = Date.UTC(2099, 0, 1);

test.before(async () => {
  cw = await startCommitCutWorld(clock, { cluster: { nodeName: NODE }, campaigns: { batchWindowSeconds: 60 } });
  ({ w, cutter, client } = cw);
});
test.after.always(async () => {
  await cw?.close();
});

const db = () => w.t0.app.store.db;

test.serial('a cluster sweep whose COMMIT answer is lost answers what it freed', async (t) => {
  const repo = createClusterRepository(db());
  // Live to the app's own sweeps (heard within STALE_MS), dead to this one.
  await client.query("insert into cluster_nodes (id, hostname, pid, started_at, heartbeat_at, listeners_json) values ('lost-dead', 'elsewhere', 1, '2026-11-29T09:00:00.000Z', $1, '{}')", [Date.now() - 10_000]);
  await client.query("insert into connection_leases (host_key, node, count, until_ms, waiting_until) values ('swept.example', 'lost-dead', 2, $1, null)", [FAR_MS]);
  const sinceMs = Date.now() - 5_000;
  const cut = cutter.arm(String(sinceMs));
  try {
    const swept = await repo.releaseDeadOwners(sinceMs, NODE);
    await cut;
    t.is(swept.freed.connections, 1);
    t.false(swept.live.includes('lost-dead'));
    t.is((await client.query("select 1 from connection_leases where node = 'lost-dead'")).rowCount, 0);
  } finally {
    await client.query("delete from cluster_nodes where id = 'lost-dead'");
  }
});

test.serial('a connection claimed in a transaction whose COMMIT answer is lost is granted, and counted once', async (t) => {
  const repo = createClusterRepository(db());
  // A live member, or the app's sweeps would free its count.
  await client.query("insert into cluster_nodes (id, hostname, pid, started_at, heartbeat_at, listeners_json) values ('lost-claimer', 'elsewhere', 1, '2026-11-29T09:00:00.000Z', $1, '{}')", [Date.now()]);
  try {
    const cut = cutter.arm('lost-claimer');
    t.true(await repo.acquireConnection('claimed.example', 'lost-claimer', 5, 60_000));
    await cut;
    const rows = (await client.query<{ count: number }>("select count::int as count from connection_leases where host_key = 'claimed.example'")).rows;
    t.deepEqual(rows, [{ count: 1 }]);
  } finally {
    await client.query("delete from connection_leases where node = 'lost-claimer'");
    await client.query("delete from cluster_nodes where id = 'lost-claimer'");
  }
});

test.serial('a shaping hold put in a transaction whose COMMIT answer is lost is put, once', async (t) => {
  const repo = createShapingRepository(db());
  const cut = cutter.arm('hold-lost-answer');
  await t.notThrowsAsync(
    repo.putHold({ id: 'hold-lost-answer', source: 'lost-source', rollup: 'lost.example', kind: 'suspend', message_rate: null, reason: 'lost answer', until_ms: FAR_MS, created_at: clock.now().toISOString() }),
  );
  await cut;
  t.deepEqual((await client.query<{ id: string }>("select id from shaping_holds where source = 'lost-source'")).rows, [{ id: 'hold-lost-answer' }]);
});

test.serial('a campaign recount whose COMMIT answer is lost answers what it added, and counts once', async (t) => {
  const book = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Recount' } })).body.id as string;
  t.is((await w.t0.request('POST', `/v1/contactBooks/${book}/contacts/bulk`, { body: [{ email: 'recount@example.net' }] })).status, 200);
  const created = await w.t0.request('POST', '/v1/campaigns', {
    body: { name: 'Recount', from: `News <news@${w.domain.name}>`, subject: 'Hi', contactBookId: book, html: '<p>x {{unsubscribeUrl}}</p>', sendNow: true },
  });
  t.is(created.status, 200, JSON.stringify(created.body));
  const id = created.body.id as string;
  const campaign = async () => (await w.t0.request('GET', `/v1/campaigns/${id}`)).body;
  for (let i = 0; i < 10 && (await campaign()).status !== 'SENT'; i++) {
    clock.advance(60_000);
    await w.t0.app.runCampaigns();
  }
  await w.settle();
  t.like(await campaign(), { status: 'SENT', sent: 1, delivered: 1 });
  // The node that recorded the results died before counting them.
  await client.query("update campaign_recipients set counted = '' where campaign_id = $1", [id]);
  await client.query('update campaigns set sent = 0, delivered = 0 where id = $1', [id]);
  const cut = cutter.arm('update "campaign_recipients" set "counted"');
  const recounted = await createCampaignsRepository(db()).recountMissed(0, 1000);
  await cut;
  t.is(recounted.added, 2);
  t.like(await campaign(), { sent: 1, delivered: 1 });
});

test.serial('a bounce notice claim whose COMMIT answer is lost answers the claimed rows', async (t) => {
  const sent = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'claim-lost@example.net', subject: 'claim lost' }) });
  t.is(sent.status, 200, JSON.stringify(sent.body));
  await w.settle();
  // Due far past the app's clock: only this claim takes it.
  await client.query(
    "insert into bounce_notice_recipients (email_id, team_id, recipient, reason, expired, created_at, next_attempt_at, attempts) values ($1, $2, 'gone@example.net', 'lost answer', 0, $3, $3, 0)",
    [sent.body.emailId, w.t0.teamId, FAR_MS],
  );
  // A role of a live node: the app's sweeps leave the lease alone.
  const owner = `${NODE}:lost-answer`;
  const cut = cutter.arm(owner);
  const claims = await createBounceNoticesRepository(db()).claimReady(owner, FAR_MS, 60_000, 0, 10);
  await cut;
  t.deepEqual(
    claims.map((c) => [c.emailId, c.rows.map((r) => r.recipient)]),
    [[sent.body.emailId, ['gone@example.net']]],
  );
  const rows = (await client.query<{ lease_owner: string }>('select lease_owner from bounce_notice_recipients where email_id = $1', [sent.body.emailId])).rows;
  t.deepEqual(rows, [{ lease_owner: owner }]);
});

test.serial('a TLS report made in a transaction whose COMMIT answer is lost is answered as made, once', async (t) => {
  const repo = createTlsReportsRepository(db());
  // A day after the world's clock: the app's own report job does not make it.
  const day = '2026-12-25';
  await repo.addCounts([{ policy_domain: 'report-lost.example', day, policy_key: 'k', policy_type: 'sts', policy_json: '{}', result: 'success', sending_ip: '127.0.0.1', mx_host: 'mx.report-lost.example', receiving_ip: '127.0.0.1', reason_code: '', count: 3 }]);
  const cut = cutter.arm('report-lost-id');
  const made = await repo.insertReport({
    policyDomain: 'report-lost.example',
    day,
    reportId: 'report-lost-id',
    state: 'queued',
    rua: ['mailto:a@report-lost.example', 'mailto:b@report-lost.example'],
    reportJson: '{}',
    createdAt: clock.now().toISOString(),
    targets: ['mailto:a@report-lost.example', 'mailto:b@report-lost.example'],
    dueMs: FAR_MS,
  });
  await cut;
  t.true(made);
  t.is((await client.query("select 1 from tls_reports_out where policy_domain = 'report-lost.example'")).rowCount, 1);
  t.is((await client.query("select 1 from tls_report_deliveries where policy_domain = 'report-lost.example'")).rowCount, 2);
  t.is((await client.query("select 1 from tls_session_counts where policy_domain = 'report-lost.example'")).rowCount, 0);
});

test.serial('a retention purge whose COMMIT answer is lost answers how many it deleted', async (t) => {
  const repo = createSandboxMessagesRepository(db());
  const domainId = (await client.query<{ id: number }>('select id from domains where name = $1', [w.domain.name])).rows[0]!.id;
  for (const id of ['sm_lost_1', 'sm_lost_2']) {
    await repo.insert(
      { id, team_id: w.t0.teamId, domain_id: domainId, email_id: 'em_none', mail_from: 'a@b.example', rcpt_to_json: '[]', subject: 'old', size_bytes: 1, parsed_json: '{}', created_at: '2001-01-01T00:00:00.000Z' },
      Buffer.from('x'),
    );
  }
  const cut = cutter.arm('delete from "sandbox_messages"');
  const purged = await repo.purgeBefore('2002-01-01T00:00:00.000Z', { rows: 100, bytes: 1 << 20 });
  await cut;
  t.is(purged, 2);
  t.is((await client.query("select 1 from sandbox_messages where id like 'sm_lost_%'")).rowCount, 0);
});
