/**
 * Transport security for receiving domains: the MTA-STS policy served by Host on the HTTP
 * listener (RFC 8461 §3.3), the records a receiving domain is asked to publish, and TLS
 * reports (RFC 8460) mailed to the domain's Posthorn mailbox, parsed, stored once and read
 * through the API within the team. A report counts only with a passing DKIM signature of the
 * reporting domain (RFC 8460 §3).
 */
import { request as httpRequest } from 'node:http';
import { gzipSync } from 'node:zlib';
import test from 'ava';
import MailComposer from 'nodemailer/lib/mail-composer';
import { parseStsPolicy } from '../../src/smtp/outbound/mta-sts-policy.js';
import { addVerifiedDomain, publishRecords, removeDkimRecord } from '../helpers/domain-fixtures.js';
import { dkimSignAs } from '../helpers/reporter-dkim.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { twoTeams } from '../helpers/two-teams.js';
import { smtpSend } from '../inbound/helpers/smtp-client.js';

let t0: TestApp;
let port: number;
let inbox: any;
let other: any;

test.before(async () => {
  t0 = await startTestApp();
  port = t0.app.listeners.inbound!.port;
  inbox = await addVerifiedDomain(t0, 'inbox.dev');
  other = await addVerifiedDomain(t0, 'other-inbox.dev');
  for (const d of [inbox, other]) {
    const res = await t0.request('PATCH', `/v1/domains/${d.id}`, { body: { receiving: true } });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  }
});
test.after.always(async () => {
  await t0?.close();
});

function getPolicy(host: string): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${t0.baseUrl}/.well-known/mta-sts.txt`, { headers: { host } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, type: String(res.headers['content-type']), body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const report = (overrides: Record<string, unknown> = {}) => ({
  'organization-name': 'Company-X',
  'date-range': { 'start-datetime': '2026-11-20T00:00:00Z', 'end-datetime': '2026-11-20T23:59:59Z' },
  'contact-info': 'sts-reporting@company-x.example',
  'report-id': '5065427c-23d3-47ca-b6e0-946ea0e8c4be',
  policies: [
    {
      policy: { 'policy-type': 'sts', 'policy-string': ['version: STSv1', 'mode: testing', 'mx: mx.posthorn.test', 'max_age: 86400'], 'policy-domain': 'inbox.dev', 'mx-host': ['mx.posthorn.test'] },
      summary: { 'total-successful-session-count': 5326, 'total-failure-session-count': 303 },
      'failure-details': [
        { 'result-type': 'certificate-expired', 'sending-mta-ip': '2001:db8:abcd:0012::1', 'receiving-mx-hostname': 'mx.posthorn.test', 'failed-session-count': 100 },
        {
          'result-type': 'starttls-not-supported',
          'sending-mta-ip': '2001:db8:abcd:0013::1',
          'receiving-mx-hostname': 'mx.posthorn.test',
          'receiving-ip': '203.0.113.56',
          'failed-session-count': 203,
          'additional-information': 'https://reports.company-x.example/report_info?id=5065427c-23d3#StarttlsNotSupported',
        },
      ],
    },
  ],
  ...overrides,
});

type Attachment = { content: Buffer; contentType: string; filename: string };
/** A report mail as company-x.example makes it, unsigned. */
function reportMail(to: string, attachment: Attachment | null, from = 'TLS Reports <noreply-smtp-tls-reporting@company-x.example>'): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    new MailComposer({
      from,
      to,
      subject: 'Report Domain: inbox.dev Submitter: company-x.example Report-ID: <5065427c@company-x.example>',
      text: 'This is an aggregate TLS report from company-x.example',
      headers: { 'TLS-Report-Domain': 'inbox.dev', 'TLS-Report-Submitter': 'company-x.example' },
      attachments: attachment ? [attachment] : [],
    })
      .compile()
      .build((err, msg) => (err ? reject(err) : resolve(msg))),
  );
}
/** The same, DKIM-signed by company-x.example as RFC 8460 §3 requires. */
const signedReportMail = async (to: string, attachment: Attachment | null) => dkimSignAs(t0.zone, 'company-x.example', await reportMail(to, attachment));
const gz = (json: unknown) => ({ content: gzipSync(JSON.stringify(json)), contentType: 'application/tlsrpt+gzip', filename: 'company-x.example!inbox.dev!1763596800!1763683199.json.gz' });

test.serial('a receiving domain asks for the MTA-STS TXT, the policy host and the TLS-RPT TXT; verification checks them', async (t) => {
  const records = (await t0.request('GET', `/v1/domains/${inbox.id}`)).body.dnsRecords;
  const sts = records.find((r: any) => r.name === '_mta-sts.inbox.dev');
  t.like(sts, { type: 'TXT', recommended: true, status: 'PENDING' });
  t.regex(sts.value, /^v=STSv1; id=[0-9a-f]{20}$/);
  t.like(records.find((r: any) => r.name === 'mta-sts.inbox.dev'), { type: 'CNAME', value: 'mx.posthorn.test', recommended: true });
  t.like(records.find((r: any) => r.name === '_smtp._tls.inbox.dev'), { type: 'TXT', value: `v=TLSRPTv1; rua=mailto:tlsrpt+${inbox.id}@mx.posthorn.test`, recommended: true });
  publishRecords(t0, { dnsRecords: records });
  await t0.request('PUT', `/v1/domains/${inbox.id}/verify`);
  const verified = (await t0.request('GET', `/v1/domains/${inbox.id}`)).body;
  t.is(verified.status, 'SUCCESS');
  for (const name of ['_mta-sts.inbox.dev', 'mta-sts.inbox.dev', '_smtp._tls.inbox.dev']) {
    t.is(verified.dnsRecords.find((r: any) => r.name === name).status, 'SUCCESS', name);
  }
});

test.serial('the policy is served for mta-sts.<domain>, testing by default; the mode is per domain and changes the id', async (t) => {
  const served = await getPolicy('mta-sts.inbox.dev');
  t.is(served.status, 200);
  t.regex(served.type, /^text\/plain/);
  t.is(served.body, 'version: STSv1\r\nmode: testing\r\nmx: mx.posthorn.test\r\nmax_age: 86400\r\n');
  t.like(parseStsPolicy(served.body), { mode: 'testing', mx: ['mx.posthorn.test'] });
  t.is((await getPolicy('MTA-STS.Inbox.dev:8443')).status, 200, 'the Host header is read case-insensitively, without the port');
  t.is((await getPolicy('mta-sts.unknown.dev')).status, 404);
  t.is((await getPolicy('inbox.dev')).status, 404);

  const before = (await t0.request('GET', `/v1/domains/${inbox.id}`)).body;
  const patched = await t0.request('PATCH', `/v1/domains/${inbox.id}`, { body: { mtaStsMode: 'enforce' } });
  t.is(patched.status, 200);
  t.is(patched.body.mtaStsMode, 'enforce');
  const oldTxt = before.dnsRecords.find((r: any) => r.name === '_mta-sts.inbox.dev');
  const newTxt = patched.body.dnsRecords.find((r: any) => r.name === '_mta-sts.inbox.dev');
  t.not(newTxt.value, oldTxt.value, 'a new policy has a new id');
  t.is(newTxt.status, 'PENDING', 'to be published again');
  t.like(parseStsPolicy((await getPolicy('mta-sts.inbox.dev')).body), { mode: 'enforce', maxAgeSeconds: 604800 });
  const bad = await t0.request('PATCH', `/v1/domains/${inbox.id}`, { body: { mtaStsMode: 'strict' } });
  t.is(bad.status, 400);
  t.regex(bad.body.error.message, /mtaStsMode/);
  // Receiving off: no policy any more.
  await t0.request('PATCH', `/v1/domains/${other.id}`, { body: { receiving: false } });
  t.is((await getPolicy('mta-sts.other-inbox.dev')).status, 404);
  await t0.request('PATCH', `/v1/domains/${other.id}`, { body: { receiving: true } });
  await t0.request('PATCH', `/v1/domains/${inbox.id}`, { body: { mtaStsMode: 'testing' } });
});

test.serial('a TLS report mailed to the domain mailbox is parsed, stored once and listed', async (t) => {
  const to = `tlsrpt+${inbox.id}@mx.posthorn.test`;
  const res = await smtpSend({ port, from: 'noreply-smtp-tls-reporting@company-x.example', to: [to], raw: await signedReportMail(to, gz(report())) });
  t.true(res.ok, res.response);
  const id = /queued as (tlsr_\w+)/.exec(res.response)?.[1];
  t.truthy(id);
  const again = await smtpSend({ port, from: 'noreply-smtp-tls-reporting@company-x.example', to: [to], raw: await signedReportMail(to, gz(report())) });
  t.true(again.ok, 'a resend is accepted');
  const list = await t0.request('GET', '/v1/tlsReports');
  t.is(list.status, 200);
  t.like(list.body, { page: 1, limit: 25, total: 1, totalPage: 1, hasMore: false });
  t.like(list.body.tlsReports[0], {
    id,
    domainId: inbox.id,
    organizationName: 'Company-X',
    reportId: '5065427c-23d3-47ca-b6e0-946ea0e8c4be',
    contactInfo: 'sts-reporting@company-x.example',
    dateRange: { start: '2026-11-20T00:00:00.000Z', end: '2026-11-20T23:59:59.000Z' },
    totalSuccessfulSessions: 5326,
    totalFailureSessions: 303,
    mailFrom: 'noreply-smtp-tls-reporting@company-x.example',
  });
  const one = await t0.request('GET', `/v1/tlsReports/${id}`);
  t.is(one.status, 200);
  t.like(one.body.policies[0], { policyType: 'sts', policyDomain: 'inbox.dev', mxHost: ['mx.posthorn.test'], successfulSessions: 5326, failureSessions: 303 });
  t.deepEqual(one.body.policies[0].failureDetails[1], {
    resultType: 'starttls-not-supported',
    sendingMtaIp: '2001:db8:abcd:0013::1',
    receivingMxHostname: 'mx.posthorn.test',
    receivingMxHelo: null,
    receivingIp: '203.0.113.56',
    failedSessions: 203,
    additionalInformation: 'https://reports.company-x.example/report_info?id=5065427c-23d3#StarttlsNotSupported',
    failureReasonCode: null,
  });
  // A plain JSON attachment (application/tlsrpt+json) is read too.
  const json = { content: Buffer.from(JSON.stringify(report({ 'report-id': 'plain-json-1' }))), contentType: 'application/tlsrpt+json', filename: 'r.json' };
  t.true((await smtpSend({ port, from: 'r@company-x.example', to: [to], raw: await signedReportMail(to, json) })).ok);
  t.is((await t0.request('GET', `/v1/tlsReports?domainId=${inbox.id}`)).body.total, 2);
  t.is((await t0.request('GET', `/v1/tlsReports?domainId=${other.id}`)).body.total, 0);
});

test.serial('what is not a TLS report is refused with a reason, and unknown mailboxes at RCPT', async (t) => {
  const to = `tlsrpt+${inbox.id}@mx.posthorn.test`;
  const noAttachment = await smtpSend({ port, from: 'r@company-x.example', to: [to], raw: await signedReportMail(to, null) });
  t.false(noAttachment.ok);
  t.regex(noAttachment.response, /^550 5\.6\.0 .*no TLS report attachment/);
  const notGzip = await smtpSend({ port, from: 'r@company-x.example', to: [to], raw: await signedReportMail(to, { content: Buffer.from('not gzip'), contentType: 'application/tlsrpt+gzip', filename: 'x.json.gz' }) });
  t.regex(notGzip.response, /^550 5\.6\.0 .*not valid gzip/);
  const wrongShape = await smtpSend({ port, from: 'r@company-x.example', to: [to], raw: await signedReportMail(to, gz({ hello: 'world' })) });
  t.regex(wrongShape.response, /^550 5\.6\.0 .*does not follow RFC 8460: organization-name/);
  const unknown = await smtpSend({ port, from: 'r@company-x.example', to: ['tlsrpt+999999@mx.posthorn.test'], raw: await signedReportMail('x@y', gz(report())) });
  t.false(unknown.ok);
  t.regex(unknown.rcptErrors[0] ?? unknown.response, /^550 5\.1\.1 /);
  t.is((await t0.request('GET', '/v1/tlsReports')).body.total, 2);
});

test.serial('an organization-name or report-id too long in UTF-8 is refused with 550, on every store (they key the report: an index entry has room for about 2.7 KB)', async (t) => {
  const to = `tlsrpt+${inbox.id}@mx.posthorn.test`;
  const before = (await t0.request('GET', '/v1/tlsReports')).body.total as number;
  // 500 characters of three UTF-8 bytes each, unlike one another (repeated text would compress in the index).
  const cjk = (offset: number) => Array.from({ length: 500 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919 + offset) % 20000))).join('');
  const send = async (overrides: Record<string, unknown>) =>
    smtpSend({ port, from: 'noreply-smtp-tls-reporting@company-x.example', to: [to], raw: await signedReportMail(to, gz(report(overrides))) });
  // On PostgreSQL both were stored in one index entry too large for it: 451 on every retry.
  const longName = await send({ 'organization-name': cjk(1), 'report-id': cjk(2) });
  t.regex(longName.response, /^550 5\.6\.0 .*does not follow RFC 8460: organization-name: at most 1000 bytes in UTF-8/);
  const longId = await send({ 'report-id': cjk(3) });
  t.regex(longId.response, /^550 5\.6\.0 .*does not follow RFC 8460: report-id: at most 1000 bytes in UTF-8/);
  // 330 such characters (990 bytes) each are within the limit, and stored.
  const fits = await send({ 'organization-name': cjk(5).slice(0, 330), 'report-id': cjk(6).slice(0, 330) });
  t.regex(fits.response, /^250 .*queued as tlsr_/);
  t.is((await t0.request('GET', '/v1/tlsReports')).body.total, before + 1);
});

test.serial('a report without a passing DKIM signature of the reporting domain is refused with 550 5.7.20 and not stored (RFC 8460 §3)', async (t) => {
  const to = `tlsrpt+${inbox.id}@mx.posthorn.test`;
  const total = async () => (await t0.request('GET', '/v1/tlsReports')).body.total as number;
  const before = await total();
  const mail = (reportId: string, from?: string) => reportMail(to, gz(report({ 'report-id': reportId })), from);
  const refused = async (raw: Buffer, why: string) => {
    const res = await smtpSend({ port, from: 'noreply-smtp-tls-reporting@company-x.example', to: [to], raw });
    t.false(res.ok, why);
    t.regex(res.response, /^550 5\.7\.20 TLS reports must carry a valid DKIM signature of the reporting domain \(RFC 8460 section 3\)/, why);
    return res.response;
  };

  t.regex(await refused(await mail('unsigned-1'), 'unsigned'), /not DKIM-signed/);
  t.regex(await refused(await dkimSignAs(t0.zone, 'unrelated.example', await mail('unaligned-1')), 'd= of another domain'), /d=unrelated\.example .*neither the From domain .* nor the TLS-Report-Submitter/);
  t.regex(await refused(await dkimSignAs(t0.zone, 'company-x.example', await mail('l-tag-1'), { bodyLength: 40 }), 'l='), /d=company-x\.example signs only part of the body \(l=\)/);
  const signed = await dkimSignAs(t0.zone, 'company-x.example', await mail('altered-1'));
  const altered = Buffer.from(signed.toString('latin1').replace('This is an aggregate TLS report', 'This is an aggregate TLS REPORT'), 'latin1');
  t.not(altered.toString('latin1'), signed.toString('latin1'));
  t.regex(await refused(altered, 'body altered after signing'), /no signature verifies \(d=company-x\.example: \w+ \(body hash did not verify\)\)/);
  t.is(await total(), before, 'nothing stored');

  // Sent with a receiving address too, the report is still ignored; the received copy is kept.
  const mixed = await smtpSend({ port, from: 'noreply-smtp-tls-reporting@company-x.example', to: [to, 'support@inbox.dev'], raw: await mail('unsigned-mixed-1') });
  t.true(mixed.ok, mixed.response);
  t.notRegex(mixed.response, /tlsr_/);
  t.regex(mixed.response, /queued as re_/);
  t.is(await total(), before);

  // The key cannot be looked up: 451, so the reporter tries again later.
  t0.zone.servfail('reports2026._domainkey.company-x.example');
  try {
    const res = await smtpSend({ port, from: 'noreply-smtp-tls-reporting@company-x.example', to: [to], raw: await dkimSignAs(t0.zone, 'company-x.example', await mail('servfail-1')) });
    t.regex(res.response, /^451 4\.4\.3 /);
  } finally {
    t0.zone.clear('reports2026._domainkey.company-x.example');
  }
  t.is(await total(), before);

  // Accepted: d= a subdomain of the From domain (relaxed alignment), or d= the TLS-Report-Submitter
  // while From is a mailbox at another provider.
  const sub = await smtpSend({ port, from: 'noreply-smtp-tls-reporting@company-x.example', to: [to], raw: await dkimSignAs(t0.zone, 'mail.company-x.example', await mail('subdomain-1')) });
  t.regex(sub.response, /^250 .*queued as tlsr_/);
  const submitter = await smtpSend({ port, from: 'bounces@mailer.example', to: [to], raw: await dkimSignAs(t0.zone, 'company-x.example', await mail('submitter-1', 'Reports <reports@mailer.example>')) });
  t.regex(submitter.response, /^250 .*queued as tlsr_/);
  t.is(await total(), before + 2);
});

test.serial("another team sees none of it; a key bound to another domain neither", async (t) => {
  const keyB = (await twoTeams(t0)).b.key;
  const list = (await t0.request('GET', '/v1/tlsReports')).body.tlsReports;
  t.is((await t0.request('GET', '/v1/tlsReports', { key: keyB })).body.total, 0);
  t.is((await t0.request('GET', `/v1/tlsReports/${list[0].id}`, { key: keyB })).status, 404);
  const bound = (await t0.app.services.apiKeys.create(t0.teamId, { name: 'bound', permission: 'FULL', domainId: other.id })).token;
  t.is((await t0.request('GET', '/v1/tlsReports', { key: bound })).body.total, 0);
  t.is((await t0.request('GET', `/v1/tlsReports/${list[0].id}`, { key: bound })).status, 404);
  const sending = (await t0.app.services.apiKeys.create(t0.teamId, { name: 's', permission: 'SENDING' })).token;
  t.is((await t0.request('GET', '/v1/tlsReports', { key: sending })).status, 403);
});

test.serial('a domain name that changed teams: the policy served for it is the verified new owner’s, not the old team’s', async (t) => {
  // Team A verified the name, receives mail for it and asked for enforce; the name then passed
  // to team B, which published its own DKIM key (at its own selector's host) while A's was taken
  // down (the MX still points here for both).
  const before = await addVerifiedDomain(t0, 'handover.dev');
  t.is((await t0.request('PATCH', `/v1/domains/${before.id}`, { body: { receiving: true, mtaStsMode: 'enforce' } })).status, 200);
  const { b } = await twoTeams(t0, { b: { name: 'New owner', domains: ['handover.dev'] } });
  const [keyB, after] = [b.key, b.domains[0]!];
  removeDkimRecord(t0, before);
  t.is((await t0.request('PATCH', `/v1/domains/${after.id}`, { key: keyB, body: { receiving: true } })).status, 200);
  publishRecords(t0, (await t0.request('GET', `/v1/domains/${after.id}`, { key: keyB })).body);
  await t0.request('PUT', `/v1/domains/${after.id}/verify`, { key: keyB });
  await t0.request('PUT', `/v1/domains/${before.id}/verify`);
  t.not((await t0.request('GET', `/v1/domains/${before.id}`)).body.status, 'SUCCESS');
  t.like(parseStsPolicy((await getPolicy('mta-sts.handover.dev')).body), { mode: 'testing' });
});

test.serial('a report whose text holds NUL characters is stored with U+FFFD in their place, on either store', async (t) => {
  const to = `tlsrpt+${inbox.id}@mx.posthorn.test`;
  const nul = report({ 'organization-name': 'Company\u0000X', 'report-id': 'nul-report-1', 'contact-info': 'ops\u0000@company-x.example' });
  const res = await smtpSend({ port, from: 'noreply-smtp-tls-reporting@company-x.example', to: [to], raw: await signedReportMail(to, gz(nul)) });
  t.true(res.ok, res.response);
  const id = /queued as (tlsr_\w+)/.exec(res.response)?.[1];
  const one = await t0.request('GET', `/v1/tlsReports/${id}`);
  t.is(one.status, 200);
  t.like(one.body, { organizationName: 'Company\uFFFDX', contactInfo: 'ops\uFFFD@company-x.example', reportId: 'nul-report-1' });
});
