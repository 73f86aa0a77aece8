import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import type { ParsedMail } from 'mailparser';

// Finds the report in a TLS report mail (RFC 8460 §5.3): an attachment of type
// application/tlsrpt+gzip (or a .json.gz name) holding gzipped JSON, or application/tlsrpt+json
// (or .json) holding it plain. Decompression is bounded: a small gzip can expand without limit.

const gunzipAsync = promisify(gunzip);
/** A day of reports from a large sender is kilobytes; this leaves room and stops a bomb. */
const MAX_REPORT_BYTES = 16 * 1024 * 1024;

export async function tlsReportJsonOf(parsed: ParsedMail): Promise<{ json: string } | { error: string }> {
  const attachments = parsed.attachments ?? [];
  const isGzip = (a: (typeof attachments)[number]) =>
    /^application\/(tlsrpt\+gzip|gzip|x-gzip)$/i.test(a.contentType) || /\.json\.gz$/i.test(a.filename ?? '');
  const isJson = (a: (typeof attachments)[number]) => /^application\/(tlsrpt\+json|json)$/i.test(a.contentType) || /\.json$/i.test(a.filename ?? '');
  const candidate = attachments.find(isGzip) ?? attachments.find(isJson);
  if (!candidate) return { error: 'no TLS report attachment (application/tlsrpt+gzip or application/tlsrpt+json) in the message' };
  if (!isGzip(candidate)) return { json: candidate.content.toString('utf8') };
  try {
    const raw = await gunzipAsync(candidate.content, { maxOutputLength: MAX_REPORT_BYTES });
    return { json: raw.toString('utf8') };
  } catch (err) {
    return { error: `the TLS report attachment is not valid gzip (or larger than ${MAX_REPORT_BYTES} bytes): ${(err as Error).message}` };
  }
}
