/**
 * TLS reporting (RFC 8460) from our side: a day of mixed sessions (an injected clock) becomes,
 * the next day, one aggregate report per recipient domain that publishes _smtp._tls: mailed
 * (gzipped, DKIM-signed with the server key) or POSTed. The report validates against the RFC's
 * format, its counts are the sessions made, it goes out once however often the job runs or the
 * process restarts, and delivering it is not itself reported.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import test from 'ava';
import { simpleParser } from 'mailparser';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { ManualClock } from '../../src/lib/clock.js';
import { createDnsClient } from '../../src/lib/dns/dns-client.js';
import { toNodeStyleResolver } from '../../src/lib/dns/node-style-resolver.js';
import { startTlsWorld, tlsSend, type Mx, type TlsWorld } from '../helpers/tls-world.js';

type AddFormats = (typeof addFormatsModule)['default'];
const addFormats = ((addFormatsModule as unknown as { default?: AddFormats }).default ?? addFormatsModule) as unknown as AddFormats;
const SCHEMA = JSON.parse(readFileSync(join(fileURLToPath(new URL('.', import.meta.url)), '../../../test/fixtures/tlsrpt/rfc8460-report.schema.json'), 'utf8'));
const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats(ajv);
const validateReport = ajv.compile(SCHEMA);

const DAY = '2026-11-20';
const clock = new ManualClock(Date.parse(`${DAY}T08:00:00Z`));
let w: TlsWorld;
let wrong: Mx;
let plain: Mx;
let collector: Mx;

test.before(async () => {
  w = await startTlsWorld({ clock, policyDomains: ['a.rpt.test', 'b.rpt.test'] });
  wrong = await w.addMx('mx-wrong.rpt.test', 'wrong-name');
  plain = await w.addMx('mx-plain.rpt.test', 'good', { starttls: false });
  collector = await w.addMx('mx.collector.test', 'good');
  w.setMx('collector.test', [collector.host]);
  // a.rpt.test: MTA-STS testing, reports by mail.
  w.publishSts('a.rpt.test', 'testing', [w.mx1.host, wrong.host], 'r1');
  w.zone.set('_smtp._tls.a.rpt.test', 'TXT', ['v=TLSRPTv1; rua=mailto:tls-reports@collector.test']);
  // b.rpt.test: no policy, reports over HTTPS.
  w.zone.set('reports.b.rpt.test', 'A', ['127.0.0.1']);
  w.zone.set('_smtp._tls.b.rpt.test', 'TXT', [`v=TLSRPTv1;rua=https://reports.b.rpt.test:${w.policy.port}/tlsrpt`]);
  // c.rpt.test wants no reports.
  w.setMx('c.rpt.test', [w.mx1.host]);
  const key = await w.t0.app.tlsReports.serverDkimKey();
  w.zone.set(key.record.name, 'TXT', [key.record.value]);
});
test.after.always(async () => {
  await w?.close();
});

async function send(to: string): Promise<void> {
  const res = await w.t0.request('POST', '/v1/emails', { body: tlsSend(to) });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  await w.settle();
}

test.serial('a day of sessions: one report per domain, valid RFC 8460 JSON, counts equal to the sessions (connections) made', async (t) => {
  // a.rpt.test: two messages to an MX with a certificate for another name (testing: delivered),
  // three to a good one. The report counts connections (RFC 8460 4.4), not messages: a session
  // the pool reuses for the next message is one session.
  w.setMx('a.rpt.test', [wrong.host]);
  for (let i = 0; i < 2; i++) await send(`a${i}@a.rpt.test`);
  w.setMx('a.rpt.test', [w.mx1.host]);
  clock.advance(301_000); // the MX records' TTL
  for (let i = 0; i < 3; i++) await send(`b${i}@a.rpt.test`);
  const goodSessions = w.mx1.sink.connectionCount;
  const wrongSessions = wrong.sink.connectionCount;
  // b.rpt.test: one MX without STARTTLS, one with.
  w.setMx('b.rpt.test', [plain.host]);
  await send('x@b.rpt.test');
  w.setMx('b.rpt.test', [w.mx1.host]);
  clock.advance(301_000);
  await send('y@b.rpt.test');
  await send('z@c.rpt.test');
  t.is(wrong.sink.messages.length, 2);

  // The first POST fails: the delivery is retried.
  w.policy.setPostStatus(500);
  // Nothing to report while the day is not over.
  await w.t0.app.tlsReports.runNow();
  t.is((await w.t0.app.tlsReports.history()).reports.length, 0);

  clock.set(Date.parse('2026-11-21T02:00:00Z'));
  await w.t0.app.tlsReports.runNow();
  const { reports, deliveries } = await w.t0.app.tlsReports.history();
  t.deepEqual(
    reports.map((r) => [r.policy_domain, r.day, r.state]),
    [
      ['a.rpt.test', DAY, 'queued'],
      ['b.rpt.test', DAY, 'queued'],
      ['c.rpt.test', DAY, 'no-rua'],
    ],
  );
  t.like(deliveries.find((d) => d.policy_domain === 'a.rpt.test'), { target: 'mailto:tls-reports@collector.test', state: 'sent', attempts: 1 });
  t.like(deliveries.find((d) => d.policy_domain === 'b.rpt.test'), { state: 'pending', attempts: 1 });

  // The mail: multipart/report with the gzipped JSON, DKIM-signed by the server's own key.
  const [mail] = await collector.sink.waitForMessages(1);
  t.deepEqual(mail!.rcptTo, ['tls-reports@collector.test']);
  t.is(mail!.mailFrom, 'tlsrpt-noreply@mx.posthorn.test');
  const parsed = await simpleParser(mail!.raw);
  t.is(parsed.headers.get('tls-report-domain'), 'a.rpt.test');
  t.is(parsed.headers.get('tls-report-submitter'), 'mx.posthorn.test');
  t.regex(parsed.subject ?? '', /^Report Domain: a\.rpt\.test Submitter: mx\.posthorn\.test Report-ID: <.+@mx\.posthorn\.test>$/);
  t.regex(String(parsed.headers.get('content-type') && (parsed.headers.get('content-type') as { params: Record<string, string> }).params['report-type']), /^tlsrpt$/);
  const attachment = parsed.attachments.find((a) => a.contentType === 'application/tlsrpt+gzip');
  t.truthy(attachment);
  const start = Date.parse(`${DAY}T00:00:00Z`) / 1000;
  t.is(attachment!.filename, `mx.posthorn.test!a.rpt.test!${start}!${start + 86_399}.json.gz`);
  const resolver = toNodeStyleResolver(createDnsClient({ servers: [w.zone.server], timeoutMs: 500, tries: 1 }));
  const dkim = (await dkimVerify(mail!.raw, { resolver: resolver as never })) as { results: { status: { result: string }; signingDomain: string }[] };
  t.like(dkim.results[0], { signingDomain: 'mx.posthorn.test', status: { result: 'pass' } });

  const a = JSON.parse(gunzipSync(attachment!.content).toString('utf8'));
  t.true(validateReport(a), JSON.stringify(validateReport.errors));
  t.like(a, { 'organization-name': 'mx.posthorn.test', 'contact-info': 'postmaster@mx.posthorn.test', 'date-range': { 'start-datetime': `${DAY}T00:00:00Z`, 'end-datetime': `${DAY}T23:59:59Z` } });
  t.is(a.policies.length, 1);
  t.deepEqual(a.policies[0].policy, {
    'policy-type': 'sts',
    'policy-string': ['version: STSv1', 'mode: testing', `mx: ${w.mx1.host}`, `mx: ${wrong.host}`, 'max_age: 86400'],
    'policy-domain': 'a.rpt.test',
    'mx-host': [w.mx1.host, wrong.host],
  });
  t.deepEqual(a.policies[0].summary, { 'total-successful-session-count': goodSessions, 'total-failure-session-count': wrongSessions });
  t.deepEqual(a.policies[0]['failure-details'], [
    {
      'result-type': 'certificate-host-mismatch',
      'sending-mta-ip': '127.0.0.1',
      'receiving-mx-hostname': wrong.host,
      'receiving-ip': wrong.address,
      'failed-session-count': wrongSessions,
      'failure-reason-code': 'ERR_TLS_CERT_ALTNAME_INVALID',
    },
  ]);

  // The POST, once the endpoint works again: the same report, gzipped.
  w.policy.setPostStatus(200);
  clock.advance(5 * 60_000);
  await w.t0.app.tlsReports.sendDue();
  const posts = await w.policy.waitForPosts(2);
  t.is(posts[0]!.body.equals(posts[1]!.body) || gunzipSync(posts[0]!.body).equals(gunzipSync(posts[1]!.body)), true, 'the same report on every attempt');
  t.like(posts[1], { host: 'reports.b.rpt.test', path: '/tlsrpt', contentType: 'application/tlsrpt+gzip' });
  const b = JSON.parse(gunzipSync(posts[1]!.body).toString('utf8'));
  t.true(validateReport(b), JSON.stringify(validateReport.errors));
  t.deepEqual(b.policies[0].policy, { 'policy-type': 'no-policy-found', 'policy-domain': 'b.rpt.test' });
  t.deepEqual(b.policies[0].summary, { 'total-successful-session-count': 1, 'total-failure-session-count': 1 });
  t.like(b.policies[0]['failure-details'][0], { 'result-type': 'starttls-not-supported', 'receiving-mx-hostname': plain.host, 'failed-session-count': 1 });
  t.like((await w.t0.app.tlsReports.history()).deliveries.find((d) => d.policy_domain === 'b.rpt.test'), { state: 'sent', attempts: 2 });
});

test.serial('a report goes out once: running again, or after a restart, sends nothing new', async (t) => {
  await w.t0.app.tlsReports.runNow();
  await w.restart();
  await w.t0.app.tlsReports.runNow();
  clock.advance(3_600_000);
  await w.t0.app.tlsReports.runNow();
  t.is(collector.sink.messages.length, 1);
  t.is(w.policy.posts.length, 2);
  t.is((await w.t0.app.tlsReports.history()).reports.length, 3);
});

test.serial('delivering a report is not itself counted for a report', async (t) => {
  await w.t0.app.tlsReports.flushCounts();
  const rows = await w.t0.app.store.db.selectFrom('tls_session_counts').select(['policy_domain', 'day']).execute();
  t.deepEqual(rows, []);
});

test.serial('a collector that answers 200 with a body past the 4 KB read is sent: the report is not posted again', async (t) => {
  // The POST's answer is read up to 4 KB; a longer one failed the attempt as "too large", and
  // the report went again, up to six times, to a collector that had taken it each time.
  w.policy.setPostStatus(200, 'accepted '.repeat(2000));
  await send('big-answer@b.rpt.test');
  await w.t0.app.tlsReports.flushCounts();
  const posts = w.policy.posts.length;
  clock.set(Date.parse('2026-11-22T02:00:00Z'));
  await w.t0.app.tlsReports.runNow();
  const { deliveries } = await w.t0.app.tlsReports.history();
  t.like(deliveries.find((d) => d.policy_domain === 'b.rpt.test' && d.day === '2026-11-21'), { state: 'sent', attempts: 1, last_error: null });
  clock.advance(24 * 3_600_000);
  await w.t0.app.tlsReports.runNow();
  t.is(w.policy.posts.length, posts + 1, 'posted once');
  w.policy.setPostStatus(200);
});
