import { execFile } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, sendBody } from '../helpers/mail-world.js';
import { createEmptyDatabase, dropTestDatabase } from '../helpers/pg-databases.js';
import { startTestApp } from '../helpers/test-app.js';
import { acquireServeLock } from '../../src/store/serve-lock.js';
import { openStore } from '../../src/store/db.js';
import { createShapingRepository } from '../../src/store/repositories/shaping-repository.js';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { simpleParser } from 'mailparser';

// `posthorn store copy --to postgres://...` moves a SQLite installation to PostgreSQL. The
// installation is filled through the real API (a verified domain, emails delivered to the MX,
// contacts, segments, a sent campaign opened and clicked by machines, webhooks, suppressions,
// templates, API keys); the CLI
// copies it; an app started on the copy gives the same API answers, with the old API key. The
// copy refuses a target that already holds data.

const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../../../bin/posthorn', import.meta.url));

/** A GET without following redirects (a click answers with one to the link's real target). */
function hit(port: number, url: string, userAgent: string): Promise<number> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path: u.pathname, method: 'GET', headers: { host: u.host, 'user-agent': userAgent } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end();
  });
}

function storeCopy(dataDir: string, url: string, extraEnv: Record<string, string> = {}) {
  return run(process.execPath, [BIN, 'store', 'copy', '--to', url], { env: { PATH: process.env.PATH!, POSTHORN_DATA_DIR: dataDir, ...extraEnv } });
}

test('a populated SQLite installation copied to PostgreSQL serves the same API answers, with the same keys', async (t) => {
  t.timeout(180_000);
  const clock = new ManualClock(Date.UTC(2026, 10, 20, 9, 0, 0));
  // Always SQLite, whatever store the test run is on: this is the installation to move.
  const w = await startMailWorld({ clock, overrides: { store: { url: '' }, webhooks: { allowPrivate: true } } });
  const url = await createEmptyDatabase();
  t.teardown(async () => {
    await w.close();
    await dropTestDatabase(url);
  });
  const ok = async (method: string, path: string, body?: unknown) => {
    const res = await w.t0.request(method, path, { body });
    if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  const from = `News <news@${w.domain.name}>`;
  // A webhook to a closed port: its events, calls and failed attempts are history to move too.
  await ok('POST', '/v1/webhooks', { url: 'http://127.0.0.1:9/hook', eventTypes: ['email.delivered'] });
  const key = (await ok('POST', '/v1/apiKeys', { name: 'sender', permission: 'SENDING' })).token as string;
  const content = JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'Hello {{name}}' }] }] });
  const campaignContent = JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'Read more', marks: [{ type: 'link', attrs: { href: 'https://example.com/launch' } }] }] }] });
  const tpl = await ok('POST', '/v1/templates', { name: 'Welcome', subject: 'Hi {{name}}', content });
  await ok('POST', `/v1/templates/${tpl.id}/publish`);
  for (let i = 0; i < 12; i++) await ok('POST', '/v1/emails', sendBody(w, { from, to: `reader${i}@example.net`, subject: `Issue ${i}`, tags: ['copy'] }));
  await ok('POST', '/v1/emails/batch', [sendBody(w, { from, to: 'b1@example.org' }), sendBody(w, { from, to: 'b2@example.org' })]);
  await ok('POST', '/v1/emails', { from, to: 'templated@example.net', templateId: tpl.id, variables: { name: 'Ada' } });
  const book = await ok('POST', '/v1/contactBooks', { name: 'Readers' });
  await ok('POST', `/v1/contactBooks/${book.id}/contacts/bulk`, Array.from({ length: 25 }, (_, i) => ({ email: `c${i}@example.net`, firstName: `C${i}`, properties: { plan: i % 2 ? 'pro' : 'free' } })));
  // Tracked, so a machine (a privacy proxy, a link scanner) can open and click a campaign email.
  await ok('PATCH', `/v1/domains/${w.domain.id}`, { openTracking: true, clickTracking: true });
  const seg = await ok('POST', '/v1/segments', { name: 'Pro', contactBookId: book.id, filters: { match: 'all', conditions: [{ field: 'properties.plan', op: 'eq', value: 'pro' }] } });
  const campaign = await ok('POST', '/v1/campaigns', { name: 'Launch', from, subject: 'Launch', contactBookId: book.id, segmentId: seg.id, content: campaignContent, sendNow: true });
  await w.t0.app.runCampaigns();
  await w.settle();
  await w.t0.app.runCampaigns();
  await w.settle();
  // Machine hits on one campaign email, through the tracking endpoints: Apple's privacy proxy
  // fetches the pixel, a link scanner follows the link. They count in the campaign's and the
  // daily stats' machine counters (campaigns, email_daily_stats), which the copy must carry.
  const campaignMail = w.sink.messages.find((m) => m.rcptTo.includes('c1@example.net'))!;
  const html = String((await simpleParser(campaignMail.raw)).html || '');
  const pixelUrl = /<img src="([^"]*\/t\/o\/[^"]*)"/.exec(html)![1]!;
  const linkUrl = /<a\b[^>]*\shref="([^"]*\/t\/c\/[^"]*)"/.exec(html)![1]!;
  const httpPort = w.t0.app.listeners.http!.port;
  t.is(await hit(httpPort, pixelUrl, 'Mozilla/5.0'), 200);
  t.is(await hit(httpPort, linkUrl, 'Mozilla/5.0 (compatible; Barracuda Sentinel (EE))'), 302);
  // The counters follow the hits' events: look until both the campaign and the daily stats have them.
  const machineCounts = async () => {
    const c = await ok('GET', `/v1/campaigns/${campaign.id}`);
    const s = (await ok('GET', '/v1/analytics/email-time-series?days=7')).totalCounts;
    return [c.machineOpened, c.machineClicked, s.machineOpened, s.machineClicked] as number[];
  };
  let machine = await machineCounts();
  while (machine.some((n) => n === 0)) machine = await machineCounts();
  t.deepEqual(machine, [1, 1, 1, 1]);
  await ok('POST', '/v1/suppressions', { email: 'stop@example.net', source: 'copy-test' });
  await ok('POST', '/v1/suppressions/bulk', { emails: ['s1@example.net', 's2@example.net'], reason: 'COMPLAINT', source: 'copy-bulk' });
  t.true(w.sink.messages.length >= 27, `${w.sink.messages.length} delivered`);

  // What the API answers before the move (the old FULL key and the SENDING key both work).
  const emailId = (await ok('GET', '/v1/emails?limit=1')).data[0].id as string;
  const paths = [
    '/v1/domains',
    `/v1/domains/${w.domain.id}`,
    '/v1/emails?limit=100',
    `/v1/emails/${emailId}`,
    '/v1/contactBooks',
    `/v1/contactBooks/${book.id}`,
    `/v1/contactBooks/${book.id}/contacts?limit=100`,
    '/v1/segments',
    `/v1/segments/${seg.id}`,
    `/v1/segments/${seg.id}/contacts?limit=100`,
    '/v1/campaigns',
    `/v1/campaigns/${campaign.id}`,
    '/v1/webhooks',
    '/v1/suppressions?limit=100',
    '/v1/templates',
    `/v1/templates/${tpl.id}`,
    '/v1/analytics/email-time-series?days=7',
    '/v1/analytics/reputation-metrics',
  ];
  const before = new Map<string, unknown>();
  for (const p of paths) before.set(p, await ok('GET', p));
  const keysBefore = (await ok('GET', '/v1/apiKeys')) as { id: number }[];
  const dataDir = w.t0.dataDir;
  await w.t0.stop();

  // The copy: progress per table, then the verification table.
  const { stdout } = await storeCopy(dataDir, url);
  t.regex(stdout, /^ {2}emails: 27 of 27 rows, done$/m, '15 sent, 12 by the campaign');
  t.regex(stdout, /^ {2}contacts: 25 of 25 rows, done$/m);
  t.regex(stdout, /^ {2}webhook_events: [1-9]\d* of [1-9]\d* rows, done$/m);
  t.regex(stdout, /^verification \(rows per table\):$/m);
  t.regex(stdout, /^ {2}deliveries\s+\d+\s+\d+$/m);
  t.notRegex(stdout, /MISMATCH/);
  t.regex(stdout, /every table verified/);
  // Parents before children: a team before its domains, an email before its deliveries.
  t.true(stdout.indexOf('\n  teams') < stdout.indexOf('\n  domains') && stdout.indexOf('\n  emails') < stdout.indexOf('\n  deliveries'));

  // A second copy into the same database is refused: a copy never merges.
  const again = await t.throwsAsync(storeCopy(dataDir, url));
  t.regex((again as unknown as { stderr: string }).stderr, /the target database already holds data \(table \w+ has rows\): copy into an empty database/);
  t.is((again as unknown as { code: number }).code, 1);

  // The same installation, now on PostgreSQL: the same answers, with the old keys.
  const copy = await startTestApp({ dataDir, zone: w.zone, clock, overrides: { store: { url }, webhooks: { allowPrivate: true } } });
  try {
    t.is(copy.app.store.kind, 'postgres');
    for (const p of paths) {
      const res = await copy.request('GET', p, { key: w.t0.key });
      t.is(res.status, 200, p);
      t.deepEqual(res.body, before.get(p), p);
    }
    // The machine counters came across (campaigns and email_daily_stats), not reset to 0.
    const copied = (await copy.request('GET', `/v1/campaigns/${campaign.id}`, { key: w.t0.key })).body;
    const copiedTotals = (await copy.request('GET', '/v1/analytics/email-time-series?days=7', { key: w.t0.key })).body.totalCounts;
    t.deepEqual([copied.machineOpened, copied.machineClicked, copiedTotals.machineOpened, copiedTotals.machineClicked], [1, 1, 1, 1]);
    const keysAfter = (await copy.request('GET', '/v1/apiKeys', { key: w.t0.key })).body as { id: number }[];
    const kept = keysAfter.filter((k) => keysBefore.some((b) => b.id === k.id));
    t.deepEqual(
      kept.map((k) => ({ ...k, lastUsed: undefined })),
      keysBefore.map((k) => ({ ...k, lastUsed: undefined })),
    );
    // The SENDING key sends; new rows take ids after the copied ones (sequences were moved on).
    const sent = await copy.request('POST', '/v1/emails', { key, body: sendBody(w, { from, to: 'after@example.net' }) });
    t.is(sent.status, 200);
    const book2 = await copy.request('POST', `/v1/contactBooks/${book.id}/contacts`, { key: w.t0.key, body: { email: 'new@example.net' } });
    t.is(book2.status, 200);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const maxDelivery = Number((await client.query('select max(id) as n from deliveries')).rows[0].n);
      t.true(maxDelivery > 27, 'the new delivery took an id after the copied ones');
    } finally {
      await client.end();
    }
  } finally {
    await copy.stop();
  }
});

test('store copy refuses what it cannot do, with a clear message', async (t) => {
  const empty = await startTestApp({ overrides: { store: { url: '' } } });
  const dataDir = empty.dataDir;
  await empty.stop();
  t.teardown(() => empty.close());
  const notPg = await t.throwsAsync(storeCopy(dataDir, 'mysql://x@localhost/db'));
  t.regex((notPg as unknown as { stderr: string }).stderr, /--to: must be a postgres:\/\/ or postgresql:\/\/ URL/);
  const fromPg = await t.throwsAsync(storeCopy(dataDir, 'postgres://u@127.0.0.1:9/x', { POSTHORN_DATABASE_URL: 'postgres://u:secret@db.example:5432/live' }));
  t.regex((fromPg as unknown as { stderr: string }).stderr, /the configured store is already PostgreSQL \(store\.url, db\.example:5432\/live\)/);
  t.notRegex((fromPg as unknown as { stderr: string }).stderr, /secret/);
  const nothing = await t.throwsAsync(storeCopy(`${dataDir}/nowhere`, 'postgres://u@127.0.0.1:9/x'));
  t.regex((nothing as unknown as { stderr: string }).stderr, /there is no SQLite store at .*nowhere\/posthorn\.db/);
  // Nothing listens on loopback's port 9: the target is named as the thing that cannot be reached, before any copying is announced.
  const away = (await t.throwsAsync(storeCopy(dataDir, 'postgres://u:hidden@127.0.0.1:9/x'))) as unknown as { stdout: string; stderr: string };
  t.regex(away.stderr, /^posthorn: the target PostgreSQL database at 127\.0\.0\.1:9\/x cannot be reached: .*ECONNREFUSED/m);
  t.notRegex(away.stderr, /hidden/);
  t.notRegex(away.stdout, /copying every table/);
});

/** A stopped SQLite app (its data dir to copy from) and an empty PostgreSQL database to copy to, both gone after the test. */
async function stoppedSourceAndTarget(t: ExecutionContext): Promise<{ dataDir: string; url: string }> {
  const source = await startTestApp({ overrides: { store: { url: '' } } });
  await source.stop();
  const url = await createEmptyDatabase();
  t.teardown(async () => {
    await source.close();
    await dropTestDatabase(url);
  });
  return { dataDir: source.dataDir, url };
}

test('store copy refuses a data directory a running posthorn serve holds, and copies it once the server is stopped', async (t) => {
  t.timeout(120_000);
  const { dataDir, url } = await stoppedSourceAndTarget(t);
  // What `posthorn serve` takes on this data directory for its life (serve-lock.ts).
  const serve = acquireServeLock(dataDir);
  const refused = await t.throwsAsync(storeCopy(dataDir, url));
  t.is((refused as unknown as { code: number }).code, 1);
  t.regex((refused as unknown as { stderr: string }).stderr, new RegExp(`posthorn serve \\(pid ${process.pid}\\) is running on the data directory .*: stop it before posthorn store copy`));
  serve.release();
  // While a copy runs, no server starts on the directory (the copy holds the same lock).
  const copying = acquireServeLock(dataDir, 'store copy');
  t.throws(() => acquireServeLock(dataDir), { message: new RegExp(`^posthorn store copy \\(pid ${process.pid}\\) is running on the data directory`) });
  copying.release();

  // Stopped: the copy runs (into the same database: the refused copy wrote nothing there).
  t.regex((await storeCopy(dataDir, url)).stdout, /every table verified/);
});

test('store copy moves each id sequence past the ids SQLite ever gave, deleted rows included: a new row never takes a deleted one\'s id', async (t) => {
  t.timeout(120_000);
  const source = await startTestApp({ overrides: { store: { url: '' } } });
  const url = await createEmptyDatabase();
  t.teardown(async () => {
    await source.close();
    await dropTestDatabase(url);
  });
  const created = async (name: string) => {
    const res = await source.request('POST', '/v1/apiKeys', { body: { name, permission: 'SENDING' } });
    t.is(res.status, 200);
    return res.body.id as number;
  };
  await created('kept');
  const gone = await created('revoked');
  // The newest key is deleted: SQLite's AUTOINCREMENT never gives its id again.
  t.is((await source.request('DELETE', `/v1/apiKeys/${gone}`)).status, 200);
  const dataDir = source.dataDir;
  await source.stop();
  const sqlite = new Database(join(dataDir, 'posthorn.db'), { readonly: true });
  const given = sqlite.prepare('select name, seq from sqlite_sequence where seq > 0').all() as { name: string; seq: number }[];
  sqlite.close();
  t.true(given.some((g) => g.name === 'api_keys' && g.seq === gone));

  t.regex((await storeCopy(dataDir, url)).stdout, /every table verified/);
  // Every sequence starts after the largest id SQLite gave in its table, not the largest left.
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const g of given) {
      const seq = (await client.query<{ s: string | null }>(`select pg_get_serial_sequence($1, 'id') as s`, [g.name])).rows[0]!.s;
      if (!seq) continue;
      const { last_value: last, is_called: called } = (await client.query<{ last_value: string; is_called: boolean }>(`select last_value, is_called from ${seq}`)).rows[0]!;
      t.true(Number(last) + (called ? 1 : 0) > g.seq, `${g.name}: next id ${Number(last) + (called ? 1 : 0)}, SQLite gave up to ${g.seq}`);
    }
  } finally {
    await client.end();
  }
  // Through the API: the first key made on PostgreSQL does not take the revoked key's id.
  const copy = await startTestApp({ dataDir, overrides: { store: { url } } });
  try {
    const res = await copy.request('POST', '/v1/apiKeys', { key: source.key, body: { name: 'after the move', permission: 'SENDING' } });
    t.is(res.status, 200);
    t.true(res.body.id > gone, `new key ${res.body.id}, revoked ${gone}`);
  } finally {
    await copy.stop();
  }
});

test('store copy carries a fractional millisecond SQLite stored in an integer column (a rate of 3/s spaces slots 333.3 ms apart) instead of failing on it', async (t) => {
  t.timeout(120_000);
  const { dataDir, url } = await stoppedSourceAndTarget(t);
  // The SQLite shaper's own write for a source limited to 3 messages a second: SQLite keeps the
  // theoretical arrival time as the REAL it was given (INTEGER affinity keeps a fraction).
  const store = openStore(join(dataDir, 'posthorn.db'));
  const nowMs = Date.UTC(2026, 10, 29, 9, 0, 0);
  await createShapingRepository(store.db).takeSlots([{ source: 'default', rollup: 'gmail.com', spacingMs: 1000 / 3 }], nowMs);
  const stored = store.sqlite.prepare("select tat_ms, typeof(tat_ms) as type from shaping_rates where rollup = 'gmail.com'").get() as { tat_ms: number; type: string };
  await store.close();
  t.is(stored.type, 'real');

  const { stdout } = await storeCopy(dataDir, url);
  t.regex(stdout, /every table verified/);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const row = (await client.query("select tat_ms from shaping_rates where rollup = 'gmail.com'")).rows[0];
    t.is(Number(row.tat_ms), Math.round(stored.tat_ms));
  } finally {
    await client.end();
  }
});
