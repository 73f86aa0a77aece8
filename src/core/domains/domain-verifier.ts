import { DnsError, type DnsResolver } from '../../lib/dns/dns-client.js';
import type { DomainRecord, DomainStatus } from '../../store/repositories/domains-repository.js';
import { bounceHost, dkimHost } from './dns-records.js';
import { canonicalHost } from './domain-names.js';

// Looks every record up through the configured resolver and judges each one. Matching is
// tolerant the way real DNS is: TXT character-strings are joined (RFC 7208 3.3, RFC 6376
// 3.6.2.2), host names compare case-insensitively without the trailing dot, tag lists ignore
// whitespace, and an SPF record may carry more mechanisms than ours.

export interface RecordCheck {
  status: DomainStatus; // SUCCESS, PENDING (missing), FAILED (present but wrong), TEMPORARY_FAILURE
  problem: string | null;
}

export interface DomainCheck {
  dkim: RecordCheck;
  spf: RecordCheck;
  mx: RecordCheck;
  dmarc: RecordCheck;
  tracking: RecordCheck | null;
  receivingMx: RecordCheck | null;
}

const ok: RecordCheck = { status: 'SUCCESS', problem: null };

async function lookup<T>(fn: () => Promise<T[]>, what: string): Promise<{ records: T[] } | RecordCheck> {
  try {
    return { records: await fn() };
  } catch (err) {
    if (err instanceof DnsError && !err.temporary) return { status: 'PENDING', problem: `${what}: no record found` };
    const code = err instanceof DnsError ? err.code : (err as Error).message;
    return { status: 'TEMPORARY_FAILURE', problem: `${what}: DNS lookup failed (${code})` };
  }
}

function isCheck(v: unknown): v is RecordCheck {
  return typeof v === 'object' && v !== null && 'status' in v;
}

/** Parses a DKIM/DMARC style tag list ("v=DKIM1; k=rsa; p=...") into lowercased tag -> value. */
export function parseTags(record: string): Map<string, string> {
  const tags = new Map<string, string>();
  for (const part of record.split(';')) {
    const idx = part.indexOf('=');
    if (idx < 0) continue;
    tags.set(part.slice(0, idx).trim().toLowerCase(), part.slice(idx + 1).replace(/\s+/g, ''));
  }
  return tags;
}

export async function checkDkim(resolver: DnsResolver, d: DomainRecord): Promise<RecordCheck> {
  const host = dkimHost(d);
  const res = await lookup(async () => (await resolver.resolveTxt(host)).records.map((chunks) => chunks.join('')), `DKIM TXT ${host}`);
  if (isCheck(res)) return res;
  for (const txt of res.records) {
    if (parseTags(txt).get('p') === d.publicKey) return ok;
  }
  return { status: 'FAILED', problem: `DKIM TXT ${host}: found, but no record carries this domain's public key` };
}

export async function checkSpf(resolver: DnsResolver, d: DomainRecord, hostname: string): Promise<RecordCheck> {
  const host = bounceHost(d);
  const res = await lookup(async () => (await resolver.resolveTxt(host)).records.map((chunks) => chunks.join('')), `SPF TXT ${host}`);
  if (isCheck(res)) return res;
  const spf = res.records.filter((r) => /^v=spf1(\s|$)/i.test(r.trim()));
  if (spf.length === 0) return { status: 'PENDING', problem: `SPF TXT ${host}: no v=spf1 record found` };
  if (spf.length > 1) return { status: 'FAILED', problem: `SPF TXT ${host}: more than one v=spf1 record (RFC 7208 4.5 makes that a permerror)` };
  const want = canonicalHost(hostname);
  const terms = spf[0]!.trim().split(/\s+/).slice(1).map((t) => t.toLowerCase());
  const authorises = terms.some((t) => {
    const m = /^[+]?(a|include|mx|exists):(.+)$/.exec(t);
    if (m) return canonicalHost(m[2]!.split('/')[0]!) === want;
    return t === 'mx' || t === '+mx'; // the MX we ask for at this host points at us
  });
  return authorises ? ok : { status: 'FAILED', problem: `SPF TXT ${host}: the record does not authorise ${hostname} (add a:${hostname})` };
}

async function checkMxTo(resolver: DnsResolver, host: string, hostname: string, what: string): Promise<RecordCheck> {
  const res = await lookup(async () => (await resolver.resolveMx(host)).records, `${what} ${host}`);
  if (isCheck(res)) return res;
  const want = canonicalHost(hostname);
  return res.records.some((mx) => canonicalHost(mx.exchange) === want)
    ? ok
    : { status: 'FAILED', problem: `${what} ${host}: no MX points at ${hostname}` };
}

export async function checkDmarc(resolver: DnsResolver, d: DomainRecord): Promise<RecordCheck> {
  const host = `_dmarc.${d.name}`;
  const res = await lookup(async () => (await resolver.resolveTxt(host)).records.map((chunks) => chunks.join('')), `DMARC TXT ${host}`);
  if (isCheck(res)) return res;
  return res.records.some((r) => /^v=DMARC1\s*(;|$)/i.test(r.trim())) ? ok : { status: 'PENDING', problem: `DMARC TXT ${host}: no v=DMARC1 record` };
}

export async function checkCname(resolver: DnsResolver, host: string, hostname: string): Promise<RecordCheck> {
  const res = await lookup(async () => (await resolver.resolveCname(host)).records, `CNAME ${host}`);
  if (isCheck(res)) return res;
  return res.records.some((c) => canonicalHost(c) === canonicalHost(hostname))
    ? ok
    : { status: 'FAILED', problem: `CNAME ${host}: does not point at ${hostname}` };
}

export async function checkDomainDns(resolver: DnsResolver, d: DomainRecord, hostname: string): Promise<DomainCheck> {
  const [dkim, spf, mx, dmarc, tracking, receivingMx] = await Promise.all([
    checkDkim(resolver, d),
    checkSpf(resolver, d, hostname),
    checkMxTo(resolver, bounceHost(d), hostname, 'MX'),
    checkDmarc(resolver, d),
    d.trackingDomain ? checkCname(resolver, d.trackingDomain, hostname) : Promise.resolve(null),
    d.receiving ? checkMxTo(resolver, d.name, hostname, 'receiving MX') : Promise.resolve(null),
  ]);
  return { dkim, spf, mx, dmarc, tracking, receivingMx };
}
