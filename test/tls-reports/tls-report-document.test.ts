import test from 'ava';
import { buildTlsReport, parseTlsRptTxt } from '../../src/core/tls-reports/tls-report-document.js';

// RFC 8460 §3: where a domain wants its reports.

test('rua: mailto and https targets; other schemes, queries and duplicates dropped', (t) => {
  t.deepEqual(parseTlsRptTxt([['v=TLSRPTv1; rua=mailto:tls@example.com,https://reports.example.com/tlsrpt']]), ['mailto:tls@example.com', 'https://reports.example.com/tlsrpt']);
  t.deepEqual(parseTlsRptTxt([['v=TLSRPTv1;', 'rua=mailto:tls@example.com?subject=x, ftp://x.example, mailto:tls@example.com']]), ['mailto:tls@example.com']);
  t.deepEqual(parseTlsRptTxt([['v=TLSRPTv1;rua=http://plain.example/r']]), [], 'https only');
  t.deepEqual(parseTlsRptTxt([['v=TLSRPTv1; rua=https://user:pw@reports.example.com/']]), [], 'no credentials in URLs');
  t.deepEqual(parseTlsRptTxt([['v=TLSRPTv1; rua=mailto:not-an-address']]), []);
});

// A report address on an internationalised domain (RFC 6068 §2: written in UTF-8, raw or
// percent-encoded) was dropped as no address, and the domain got no report at all.
test('rua: a mailto: address on an internationalised domain is kept, its domain in A-labels', (t) => {
  t.deepEqual(parseTlsRptTxt([['v=TLSRPTv1; rua=mailto:tlsrpt@bücher.example']]), ['mailto:tlsrpt@xn--bcher-kva.example']);
  t.deepEqual(parseTlsRptTxt([['v=TLSRPTv1; rua=mailto:tlsrpt@B%C3%BCcher.example']]), ['mailto:tlsrpt@xn--bcher-kva.example']);
  t.deepEqual(parseTlsRptTxt([['v=TLSRPTv1; rua=mailto:tlsrpt@xn--bcher-kva.example']]), ['mailto:tlsrpt@xn--bcher-kva.example']);
  t.deepEqual(parseTlsRptTxt([['v=TLSRPTv1; rua=mailto:tlsrpt@b%C3cher.example']]), [], 'not UTF-8');
  t.deepEqual(parseTlsRptTxt([['v=TLSRPTv1; rua=mailto:tlsrpt@bü cher.example']]), [], 'no host name');
  t.deepEqual(parseTlsRptTxt([['v=TLSRPTv1; rua=mailto:tlsrpt@-x.example']]), [], 'no host name');
});

test('rua: exactly one v=TLSRPTv1 record, or no reports', (t) => {
  t.deepEqual(parseTlsRptTxt([]), []);
  t.deepEqual(parseTlsRptTxt([['v=spf1 -all'], ['v=TLSRPTv1; rua=mailto:a@example.com']]), ['mailto:a@example.com']);
  t.deepEqual(parseTlsRptTxt([['v=TLSRPTv1; rua=mailto:a@example.com'], ['v=TLSRPTv1; rua=mailto:b@example.com']]), []);
  t.deepEqual(parseTlsRptTxt([['v=TLSRPTv2; rua=mailto:a@example.com']]), []);
});

test('the report: one policy entry per policy, successes summed, failures detailed, empty fields left out', (t) => {
  const base = { policy_domain: 'example.com', day: '2026-11-20', sending_ip: '', mx_host: '', receiving_ip: '', reason_code: '' };
  const report = buildTlsReport({
    organizationName: 'Org',
    contactInfo: 'postmaster@mx.example.net',
    reportId: 'r1@mx.example.net',
    day: '2026-11-20',
    rows: [
      { ...base, policy_key: 'k1', policy_type: 'no-policy-found', policy_json: '{"strings":[],"mxHosts":[]}', result: 'success', count: 4 },
      { ...base, policy_key: 'k1', policy_type: 'no-policy-found', policy_json: '{"strings":[],"mxHosts":[]}', result: 'starttls-not-supported', mx_host: 'mx.example.com', receiving_ip: '192.0.2.1', sending_ip: '198.51.100.1', count: 2 },
      { ...base, policy_key: 'k2', policy_type: 'tlsa', policy_json: '{"strings":["3 1 1 AB"],"mxHosts":["mx.example.com"]}', result: 'success', count: 1 },
    ],
  });
  t.deepEqual(report, {
    'organization-name': 'Org',
    'date-range': { 'start-datetime': '2026-11-20T00:00:00Z', 'end-datetime': '2026-11-20T23:59:59Z' },
    'contact-info': 'postmaster@mx.example.net',
    'report-id': 'r1@mx.example.net',
    policies: [
      {
        policy: { 'policy-type': 'no-policy-found', 'policy-domain': 'example.com' },
        summary: { 'total-successful-session-count': 4, 'total-failure-session-count': 2 },
        'failure-details': [{ 'result-type': 'starttls-not-supported', 'sending-mta-ip': '198.51.100.1', 'receiving-mx-hostname': 'mx.example.com', 'receiving-ip': '192.0.2.1', 'failed-session-count': 2 }],
      },
      {
        policy: { 'policy-type': 'tlsa', 'policy-string': ['3 1 1 AB'], 'policy-domain': 'example.com', 'mx-host': ['mx.example.com'] },
        summary: { 'total-successful-session-count': 1, 'total-failure-session-count': 0 },
      },
    ],
  });
});
