import { DnsError, type DnsResolver } from '../../lib/dns/dns-client.js';
import type { DomainRecord, DomainStatus } from '../../store/repositories/domains-repository.js';
import { bounceHost, dkimHost, mtaStsPolicyHost, mtaStsTxtHost, mtaStsTxtValue, tlsRptAddress, tlsRptHost } from './dns-records.js';
import { canonicalHost } from './domain-names.js';
import { evaluateSpf } from './spf-evaluation.js';

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
  /** A receiving domain's MTA-STS TXT, policy host and TLS-RPT TXT (recommended). */
  mtaSts: RecordCheck | null;
  mtaStsHost: RecordCheck | null;
  tlsRpt: RecordCheck | null;
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

/**
 * The SPF record at the return-path host, judged as receivers judge mail from this server: it is
 * evaluated (RFC 7208) for every address of the hostname, and each must pass; the server may send
 * from any of them (IPv6 to a receiver reached over IPv6), so a record that leaves one out fails
 * some of its mail. A hostname without A/AAAA (localhost in development) has no address to
 * evaluate for: the record is then read by name (a:, mx, include:, exists: naming the hostname,
 * or +all, before any all).
 */
export async function checkSpf(resolver: DnsResolver, d: DomainRecord, hostname: string): Promise<RecordCheck> {
  const host = bounceHost(d);
  const res = await lookup(async () => (await resolver.resolveTxt(host)).records.map((chunks) => chunks.join('')), `SPF TXT ${host}`);
  if (isCheck(res)) return res;
  const spf = res.records.filter((r) => /^v=spf1(\s|$)/i.test(r.trim()));
  if (spf.length === 0) return { status: 'PENDING', problem: `SPF TXT ${host}: no v=spf1 record found` };
  if (spf.length > 1) return { status: 'FAILED', problem: `SPF TXT ${host}: more than one v=spf1 record (RFC 7208 4.5 makes that a permerror)` };
  const terms = spf[0]!.trim().split(/\s+/).slice(1).map((t) => t.toLowerCase());
  // Mechanisms are evaluated in order and none after "all" ever is (RFC 7208 5.1): ours after
  // "~all" authorises nothing, and receivers softfail every message.
  const end = terms.findIndex((t) => /^[-+~?]?all$/.test(t));
  const add = end < 0 ? `add a:${hostname}` : `add a:${hostname} before its "${terms[end]}"${end < terms.length - 1 ? ': nothing after it is evaluated' : ''}`;

  const addresses = await serverAddresses(resolver, hostname);
  if (isCheck(addresses)) return addresses;
  if (addresses.length === 0) {
    const want = canonicalHost(hostname);
    const evaluated = end < 0 ? terms : terms.slice(0, end);
    const authorises = evaluated.some((t) => {
      const m = /^[+]?(a|include|mx|exists):(.+)$/.exec(t);
      if (m) return canonicalHost(m[2]!.split('/')[0]!) === want;
      return /^[+]?mx(\/[\d/]*)?$/.test(t); // the MX we ask for at this host points at us
    }) || (end >= 0 && /^[+]?all$/.test(terms[end]!));
    return authorises ? ok : { status: 'FAILED', problem: `SPF TXT ${host}: the record does not authorise ${hostname} (${add}; ${hostname} has no A/AAAA record, so the record was read by name, not evaluated)` };
  }

  const results = await Promise.all(addresses.map((ip) => evaluateSpf(resolver, host, hostname, ip)));
  const temp = results.find((r) => r.verdict === 'temperror');
  if (temp) return { status: 'TEMPORARY_FAILURE', problem: `SPF TXT ${host}: evaluating the record for ${temp.ip} failed (temperror${temp.reason ? `: ${temp.reason}` : ''})` };
  const perm = results.find((r) => r.verdict === 'permerror' || r.verdict === 'none');
  if (perm) {
    const limit = /too many/i.test(perm.reason ?? '') ? '; RFC 7208 4.6.4 allows 10 DNS-querying terms, those of includes and redirects counted' : '';
    return { status: 'FAILED', problem: `SPF TXT ${host}: receivers cannot evaluate the record (${perm.verdict}${perm.reason ? `: ${perm.reason}` : ''}${limit}), so mail from ${hostname} fails SPF` };
  }
  const failing = results.filter((r) => r.verdict !== 'pass');
  if (failing.length === 0) return ok;
  const which = failing.map((r) => `${r.ip} (${r.verdict})`).join(', ');
  return { status: 'FAILED', problem: `SPF TXT ${host}: the record does not authorise ${hostname} at ${which} (${add})` };
}

/** The hostname's A and AAAA addresses; none when it has neither; a check when a lookup failed for a while. */
async function serverAddresses(resolver: DnsResolver, hostname: string): Promise<string[] | RecordCheck> {
  const [v4, v6] = await Promise.all([
    lookup(async () => (await resolver.resolve4(hostname)).records, `A ${hostname}`),
    lookup(async () => (await resolver.resolve6(hostname)).records, `AAAA ${hostname}`),
  ]);
  const failed = [v4, v6].find((r): r is RecordCheck => isCheck(r) && r.status === 'TEMPORARY_FAILURE');
  if (failed) return { status: 'TEMPORARY_FAILURE', problem: `SPF: the server's addresses: ${failed.problem}` };
  return [v4, v6].flatMap((r) => (isCheck(r) ? [] : r.records));
}

async function checkMxTo(resolver: DnsResolver, host: string, hostname: string, what: string): Promise<RecordCheck> {
  const res = await lookup(async () => (await resolver.resolveMx(host)).records, `${what} ${host}`);
  if (isCheck(res)) return res;
  const want = canonicalHost(hostname);
  return res.records.some((mx) => canonicalHost(mx.exchange) === want)
    ? ok
    : { status: 'FAILED', problem: `${what} ${host}: no MX points at ${hostname}` };
}

/**
 * A subdomain without a record of its own is covered by its organisational domain's (RFC 7489
 * 6.6.3: receivers fall back on it and apply its sp=), so news.example.com need not publish one
 * when example.com has. More than one v=DMARC1 record at a name is no policy at all (6.6.3).
 */
export async function checkDmarc(resolver: DnsResolver, d: DomainRecord): Promise<RecordCheck> {
  const own = await dmarcAt(resolver, d.name);
  if (own.status !== 'PENDING' || !d.subdomain) return own;
  const organisational = d.name.slice(d.subdomain.length + 1);
  return (await dmarcAt(resolver, organisational)).status === 'SUCCESS' ? ok : own;
}

async function dmarcAt(resolver: DnsResolver, name: string): Promise<RecordCheck> {
  const host = `_dmarc.${name}`;
  const res = await lookup(async () => (await resolver.resolveTxt(host)).records.map((chunks) => chunks.join('')), `DMARC TXT ${host}`);
  if (isCheck(res)) return res;
  const records = res.records.filter((r) => /^v=DMARC1\s*(;|$)/i.test(r.trim()));
  if (records.length === 0) return { status: 'PENDING', problem: `DMARC TXT ${host}: no v=DMARC1 record` };
  if (records.length > 1) return { status: 'FAILED', problem: `DMARC TXT ${host}: more than one v=DMARC1 record (receivers then apply none)` };
  return ok;
}

/** Hops of a CNAME chain followed before it is taken as not reaching the server. */
const MAX_CNAME_HOPS = 8;

/**
 * The host's CNAME, followed along a chain (a CNAME query answers only its own name's record):
 * a chain that ends at the server brings requests for the host to it as well as a direct one.
 */
export async function checkCname(resolver: DnsResolver, host: string, hostname: string): Promise<RecordCheck> {
  const want = canonicalHost(hostname);
  const wrong: RecordCheck = { status: 'FAILED', problem: `CNAME ${host}: does not point at ${hostname}` };
  const seen = new Set<string>([canonicalHost(host)]);
  let current = host;
  for (let hop = 0; hop < MAX_CNAME_HOPS; hop++) {
    const res = await lookup(async () => (await resolver.resolveCname(current)).records, `CNAME ${current}`);
    if (isCheck(res)) return hop > 0 && res.status === 'PENDING' ? wrong : res; // the chain ends at a name that is no alias
    const targets = res.records.map(canonicalHost);
    if (targets.includes(want)) return ok;
    const next = targets[0];
    if (!next || seen.has(next)) return wrong; // none, the root, or a loop
    seen.add(next);
    current = next;
  }
  return wrong;
}

/** RFC 8461 3.1: exactly one v=STSv1 record, with the id of the policy we serve. */
export async function checkMtaStsTxt(resolver: DnsResolver, d: DomainRecord, hostname: string): Promise<RecordCheck> {
  const host = mtaStsTxtHost(d);
  const res = await lookup(async () => (await resolver.resolveTxt(host)).records.map((chunks) => chunks.join('')), `MTA-STS TXT ${host}`);
  if (isCheck(res)) return res;
  const sts = res.records.filter((r) => r.startsWith('v=STSv1'));
  if (sts.length === 0) return { status: 'PENDING', problem: `MTA-STS TXT ${host}: no v=STSv1 record` };
  if (sts.length > 1) return { status: 'FAILED', problem: `MTA-STS TXT ${host}: more than one v=STSv1 record (senders then ignore them all)` };
  const want = parseTags(mtaStsTxtValue(d, hostname)).get('id');
  return parseTags(sts[0]!).get('id') === want ? ok : { status: 'FAILED', problem: `MTA-STS TXT ${host}: the id is not ${want} (the policy changed: publish the new id)` };
}

/** RFC 8460 3: one v=TLSRPTv1 record whose rua names our mailbox for the domain. */
export async function checkTlsRpt(resolver: DnsResolver, d: DomainRecord, hostname: string): Promise<RecordCheck> {
  const host = tlsRptHost(d);
  const res = await lookup(async () => (await resolver.resolveTxt(host)).records.map((chunks) => chunks.join('')), `TLS-RPT TXT ${host}`);
  if (isCheck(res)) return res;
  const rpt = res.records.filter((r) => /^v=TLSRPTv1\s*(;|$)/.test(r));
  if (rpt.length === 0) return { status: 'PENDING', problem: `TLS-RPT TXT ${host}: no v=TLSRPTv1 record` };
  const want = `mailto:${tlsRptAddress(d, hostname)}`.toLowerCase();
  const rua = (parseTags(rpt[0]!).get('rua') ?? '').toLowerCase().split(',');
  return rpt.length === 1 && rua.includes(want) ? ok : { status: 'FAILED', problem: `TLS-RPT TXT ${host}: rua does not include ${want}` };
}

export async function checkDomainDns(resolver: DnsResolver, d: DomainRecord, hostname: string): Promise<DomainCheck> {
  const [dkim, spf, mx, dmarc, tracking, receivingMx, mtaSts, mtaStsHost, tlsRpt] = await Promise.all([
    checkDkim(resolver, d),
    checkSpf(resolver, d, hostname),
    checkMxTo(resolver, bounceHost(d), hostname, 'MX'),
    checkDmarc(resolver, d),
    d.trackingDomain ? checkCname(resolver, d.trackingDomain, hostname) : Promise.resolve(null),
    d.receiving ? checkMxTo(resolver, d.name, hostname, 'receiving MX') : Promise.resolve(null),
    d.receiving ? checkMtaStsTxt(resolver, d, hostname) : Promise.resolve(null),
    d.receiving ? checkCname(resolver, mtaStsPolicyHost(d), hostname) : Promise.resolve(null),
    d.receiving ? checkTlsRpt(resolver, d, hostname) : Promise.resolve(null),
  ]);
  return { dkim, spf, mx, dmarc, tracking, receivingMx, mtaSts, mtaStsHost, tlsRpt };
}
