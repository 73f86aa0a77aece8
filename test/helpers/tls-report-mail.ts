import { gzipSync } from 'node:zlib';
import MailComposer from 'nodemailer/lib/mail-composer';
import type { DnsZone } from './dns-zone.js';
import { dkimSignAs } from './reporter-dkim.js';

/** An RFC 8460 aggregate report (§4.4) about `domain`, as another sender would make it. */
export function sampleTlsReport(domain: string, opts: { organization?: string; reportId?: string } = {}) {
  return {
    'organization-name': opts.organization ?? 'Company-X',
    'date-range': { 'start-datetime': '2026-11-20T00:00:00Z', 'end-datetime': '2026-11-20T23:59:59Z' },
    'contact-info': 'sts-reporting@company-x.example',
    'report-id': opts.reportId ?? '5065427c-23d3-47ca-b6e0-946ea0e8c4be',
    policies: [
      {
        policy: { 'policy-type': 'sts', 'policy-string': ['version: STSv1', 'mode: testing', 'mx: mx.posthorn.test', 'max_age: 86400'], 'policy-domain': domain, 'mx-host': ['mx.posthorn.test'] },
        summary: { 'total-successful-session-count': 5326, 'total-failure-session-count': 303 },
        'failure-details': [
          { 'result-type': 'certificate-expired', 'sending-mta-ip': '2001:db8:abcd:0012::1', 'receiving-mx-hostname': 'mx.posthorn.test', 'failed-session-count': 100, 'failure-reason-code': 'X509_V_ERR_CERT_HAS_EXPIRED' },
          {
            'result-type': 'starttls-not-supported',
            'sending-mta-ip': '2001:db8:abcd:0013::1',
            'receiving-mx-hostname': 'mx.posthorn.test',
            'receiving-mx-helo': 'mx.posthorn.test',
            'receiving-ip': '203.0.113.56',
            'failed-session-count': 203,
            'additional-information': 'https://reports.company-x.example/report_info?id=5065427c-23d3#StarttlsNotSupported',
          },
        ],
      },
    ],
  };
}

/** The mail a reporter sends (RFC 8460 §5.3), unsigned: the report gzipped as application/tlsrpt+gzip, or no attachment. */
export function tlsReportMail(to: string, report: unknown | null, attachment?: { content: Buffer; contentType: string; filename: string }): Promise<Buffer> {
  const attachments = attachment ? [attachment] : report === null ? [] : [{ content: gzipSync(JSON.stringify(report)), contentType: 'application/tlsrpt+gzip', filename: 'company-x.example!report.json.gz' }];
  return new Promise((resolve, reject) =>
    new MailComposer({
      from: 'TLS Reports <noreply-smtp-tls-reporting@company-x.example>',
      to,
      subject: 'Report Domain: example Submitter: company-x.example Report-ID: <5065427c@company-x.example>',
      text: 'This is an aggregate TLS report from company-x.example',
      headers: { 'TLS-Report-Submitter': 'company-x.example' },
      attachments,
    })
      .compile()
      .build((err, msg) => (err ? reject(err) : resolve(msg))),
  );
}

/** That mail as a reporter must send it (RFC 8460 §3): DKIM-signed by its domain, company-x.example, whose key goes into the zone. */
export async function signedTlsReportMail(zone: DnsZone, to: string, report: unknown | null): Promise<Buffer> {
  return dkimSignAs(zone, 'company-x.example', await tlsReportMail(to, report));
}
