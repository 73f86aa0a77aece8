/**
 * Our own stub resolver (RFC 1035 §7 "resolver" talking to a recursive
 * server), built on dns-packet.
 *
 * Why not node:dns: its resolveMx/resolveTxt drop the TTLs we need to cache
 * DKIM/SPF/MX answers correctly, and a Resolver's setServers() cannot be
 * trusted to keep a per-instance non-53 port, which the test suite (a fake
 * authoritative zone on an ephemeral loopback port) and some deployments need.
 *
 * Transport: UDP first, one fresh connected socket per attempt so the kernel
 * picks a random source port and drops datagrams from other peers (RFC 5452
 * §9.2), plus a random 16-bit query id checked against the question. A
 * truncated (TC) answer is retried over TCP with the 2-octet length prefix
 * (RFC 1035 §4.2.2, RFC 7766 §5). Queries carry an EDNS0 OPT record
 * advertising 1232 octets (RFC 6891; the DNS Flag Day 2020 value that avoids
 * IP fragmentation) and fall back to plain RFC 1035 for servers that answer
 * FORMERR without an OPT (RFC 6891 §7).
 *
 * DNSSEC: queries set the DO bit (RFC 3225) and the AD bit (RFC 6840 §5.7), and every answer
 * (and every NXDOMAIN/NODATA) reports whether the resolver set AD, i.e. validated it. We do not
 * validate signatures ourselves: like Postfix with smtp_dns_support_level = dnssec, we trust
 * the AD bit of the configured resolver, which must then be a validating one on a trusted path:
 * by default only one on loopback is believed (TrustAd). DANE (RFC 7672) is only as good as that.
 *
 * No cache here on purpose: callers cache with the ttlSeconds we report.
 */
import { randomInt } from 'node:crypto';
import dgram from 'node:dgram';
import { getServers } from 'node:dns';
import net from 'node:net';
import { domainToASCII } from 'node:url';
import dnsPacket from 'dns-packet';
import type { Answer, DecodedPacket, StringAnswer } from 'dns-packet';
import { DnsError } from './dns-errors.js';
import type { DnsErrorCode } from './dns-errors.js';

export { DnsError } from './dns-errors.js';
export type { DnsErrorCode } from './dns-errors.js';

/** ttlSeconds is the minimum TTL over the answer RRs used, CNAMEs on the way included. */
export interface DnsAnswer<T> {
  records: T[];
  ttlSeconds: number;
  /** The resolver validated the answer with DNSSEC (it set the AD bit). Absent from hand-written fakes: not validated. */
  authenticated?: boolean;
  /** The name the records belong to, when a CNAME chain led there from the name asked for (DANE's expanded name, RFC 7672 2.2.2). */
  canonicalName?: string;
}

/** A TLSA record (RFC 6698 §2.1): certificate usage, selector, matching type and the association data. */
export interface TlsaRecord {
  usage: number;
  selector: number;
  matchingType: number;
  data: Buffer;
}

/** exchange is lowercased without the trailing dot; "" is a null MX (RFC 7505). */
export interface MxRecord {
  exchange: string;
  priority: number;
}

export interface DnsResolver {
  /** Each TXT record as its character-strings (chunks), decoded as UTF-8; join them yourself (RFC 7208 §3.3, RFC 6376 §3.6.2.2). */
  resolveTxt(name: string): Promise<DnsAnswer<string[]>>;
  /** In the order the server gave them; sort by priority yourself (RFC 5321 §5.1). */
  resolveMx(name: string): Promise<DnsAnswer<MxRecord>>;
  resolveCname(name: string): Promise<DnsAnswer<string>>;
  resolve4(name: string): Promise<DnsAnswer<string>>;
  resolve6(name: string): Promise<DnsAnswer<string>>;
  /**
   * Optional so hand-written fakes need not implement it; createDnsClient
   * does. toNodeStyleResolver uses it for mailauth's SPF "ptr" mechanism
   * (RFC 7208 §5.5). Takes the reverse name (4.3.2.1.in-addr.arpa).
   */
  resolvePtr?(name: string): Promise<DnsAnswer<string>>;
  /** TLSA records (RFC 6698), for DANE (RFC 7672); optional for hand-written fakes. */
  resolveTlsa?(name: string): Promise<DnsAnswer<TlsaRecord>>;
}

export interface DnsClientOptions {
  /** "1.2.3.4", "1.2.3.4:5353", "::1", "[::1]:5353"; empty means the system's servers. */
  servers: string[];
  /** Per attempt, default 2000. */
  timeoutMs?: number;
  /** Attempts per server, default 2; attempts rotate through the servers. */
  tries?: number;
  /** Whose AD bit counts (dns.trustAd): a server on loopback only (default), or any. */
  trustAd?: TrustAd;
}

/**
 * 'loopback': the AD bit counts only from a resolver on this host (127.0.0.0/8, ::1), as glibc
 * strips it unless resolv.conf says trust-ad: an answer that crossed a network may be forged, and
 * a forged AD bit would make forged TLSA records authenticate a man in the middle (DANE wins over
 * MTA-STS). 'always': the path to every configured resolver is trusted (an IPsec or private link).
 */
export type TrustAd = 'loopback' | 'always';

const DNS_PORT = 53;
const DEFAULT_TIMEOUT_MS = 2000;
const DEFAULT_TRIES = 2;
/** RFC 6891 §6.2.5 payload size; 1232 is the DNS Flag Day 2020 recommendation. */
const EDNS_UDP_PAYLOAD_BYTES = 1232;
/** RFC 1035 §2.3.4 size limits, in octets of the presentation form without the final dot. */
const MAX_NAME_OCTETS = 253;
const MAX_LABEL_OCTETS = 63;
/** Same bound BIND uses for chains inside one answer; longer is a loop or abuse. */
const MAX_CNAME_HOPS = 16;
/** RFC 2181 §8: a TTL with the top bit set is to be treated as zero. */
const MAX_TTL_SECONDS = 0x7fffffff;
const QUERY_ID_SPACE = 0x10000;
/** RFC 1035 §4.1.1 header flag bits, as read from the raw second header word. */
const HEADER_QR_BIT = 0x8000;
const HEADER_TC_BIT = 0x0200;
const HEADER_BYTES = 12;

type QueryType = 'A' | 'AAAA' | 'MX' | 'TXT' | 'CNAME' | 'PTR' | 'TLSA';

interface ServerAddress {
  host: string;
  port: number;
  family: 4 | 6;
  /** As configured; used in error messages and as the EDNS-fallback key. */
  label: string;
}

interface ExtractedAnswer {
  records: Answer[];
  ttlSeconds: number;
  authenticated?: boolean;
  /** Set when a CNAME chain was followed: the owner name of the records. */
  canonicalName?: string;
}

// ---------------------------------------------------------------- servers

function parseServerEntry(entry: string): ServerAddress {
  const bad = (why: string): Error => new Error(`invalid DNS server "${entry}": ${why}`);
  let host: string;
  let portText: string | undefined;
  if (entry.startsWith('[')) {
    const m = /^\[([^\]]+)\](?::([^:]*))?$/.exec(entry);
    if (!m) throw bad('expected [ipv6] or [ipv6]:port');
    host = m[1]!;
    portText = m[2];
    if (!net.isIPv6(host)) throw bad('not an IPv6 address inside the brackets');
  } else if (net.isIPv6(entry)) {
    // A bare IPv6 address cannot carry a port ("::1:53" is itself an address); brackets are needed for that.
    host = entry;
  } else {
    const m = /^([^:]*)(?::([^:]*))?$/.exec(entry);
    if (!m || !net.isIPv4(m[1]!)) throw bad('expected an IPv4 or IPv6 address, optionally with :port (IPv6 as [addr]:port)');
    host = m[1]!;
    portText = m[2];
  }
  let port = DNS_PORT;
  if (portText !== undefined) {
    if (!/^\d{1,5}$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535) throw bad('port must be 1-65535');
    port = Number(portText);
  }
  return { host, port, family: net.isIPv6(host) ? 6 : 4, label: entry };
}

/**
 * Parses a comma list such as POSTHORN_DNS_SERVERS. Entries are trimmed,
 * empty ones dropped; any invalid entry throws an Error naming it. Returns
 * the trimmed entries as written (no normalisation).
 */
export function parseDnsServers(list: string): string[] {
  const entries = list
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  for (const entry of entries) parseServerEntry(entry);
  return entries;
}

function isLoopbackAddress(host: string): boolean {
  const v4 = host.toLowerCase().replace(/^::ffff:/, '');
  return (net.isIPv4(v4) && v4.startsWith('127.')) || host === '::1' || host === '0:0:0:0:0:0:0:1';
}

/** Whether answers from the resolver `entry` ("ip", "ip:port", "[ipv6]:port") may be believed when they say AD. */
export function adTrusted(entry: string, mode: TrustAd): boolean {
  return mode === 'always' || isLoopbackAddress(parseServerEntry(entry).host);
}

function systemServers(): ServerAddress[] {
  const found = getServers().map(parseServerEntry);
  // Same default c-ares applies when resolv.conf lists nothing.
  return found.length > 0 ? found : [parseServerEntry('127.0.0.1')];
}

// ---------------------------------------------------------------- names

/** Strips one trailing dot, lowercases, IDNA-encodes non-ASCII, and enforces RFC 1035 §2.3.4 sizes. */
function normalizeName(name: string, rrtype: string): string {
  let n = name.endsWith('.') ? name.slice(0, -1) : name;
  n = n.toLowerCase();
  if (/[^\x00-\x7f]/.test(n)) {
    // RFC 5890 A-labels: what a U-label name is called on the wire.
    const ascii = domainToASCII(n);
    if (!ascii) throw new DnsError('FORMERR', name, rrtype, 'not a valid internationalised domain name');
    n = ascii;
  }
  if (n.length === 0) throw new DnsError('FORMERR', name, rrtype, 'empty domain name');
  if (Buffer.byteLength(n) > MAX_NAME_OCTETS) throw new DnsError('FORMERR', name, rrtype, `name longer than ${MAX_NAME_OCTETS} octets`);
  for (const label of n.split('.')) {
    if (label.length === 0) throw new DnsError('FORMERR', name, rrtype, 'empty label');
    if (Buffer.byteLength(label) > MAX_LABEL_OCTETS) throw new DnsError('FORMERR', name, rrtype, `label longer than ${MAX_LABEL_OCTETS} octets`);
  }
  return n;
}

/** Presentation form we hand out: lowercase, no trailing dot, "" for the root. */
function cleanTarget(name: string): string {
  const lower = name.toLowerCase();
  if (lower === '.' || lower === '') return '';
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

// ---------------------------------------------------------------- wire

function buildQuery(id: number, qname: string, qtype: QueryType, edns: boolean): Buffer {
  return dnsPacket.encode({
    type: 'query',
    id,
    // AD in a query asks for the AD bit in the answer (RFC 6840 §5.7); DO asks for DNSSEC
    // records, and a validating resolver sets AD only for a DO query on some implementations.
    flags: dnsPacket.RECURSION_DESIRED | dnsPacket.AUTHENTIC_DATA,
    questions: [{ type: qtype, name: qname, class: 'IN' }],
    additionals: edns
      ? [{ type: 'OPT', name: '.', udpPayloadSize: EDNS_UDP_PAYLOAD_BYTES, extendedRcode: 0, ednsVersion: 0, flags: dnsPacket.DNSSEC_OK, flag_do: true, options: [] }]
      : [],
  });
}

/** RCODE from the header's low 4 bits (RFC 1035 §4.1.1) extended by the OPT record's upper 8 bits (RFC 6891 §6.1.3). */
function rcodeOf(packet: DecodedPacket): number {
  const low = (packet.flags ?? 0) & 0xf;
  const opt = packet.additionals?.find((a) => a.type === 'OPT');
  const high = opt && 'extendedRcode' in opt ? opt.extendedRcode : 0;
  return (high << 4) | low;
}

function hasOpt(packet: DecodedPacket): boolean {
  return packet.additionals?.some((a) => a.type === 'OPT') ?? false;
}

const RCODE_NOERROR = 0;
const RCODE_FORMERR = 1;
const RCODE_SERVFAIL = 2;
const RCODE_NXDOMAIN = 3;
const RCODE_REFUSED = 5;

/**
 * RFC 5452 §9.1: only accept a response carrying our id and echoing our
 * question. Some servers drop the question from error responses, so a
 * question-less reply is accepted only when it is not an answer.
 */
function matchesQuery(packet: DecodedPacket, id: number, qname: string, qtype: QueryType): boolean {
  if (packet.type !== 'response' || packet.id !== id) return false;
  const questions = packet.questions ?? [];
  if (questions.length === 0) {
    const rcode = rcodeOf(packet);
    return rcode !== RCODE_NOERROR && rcode !== RCODE_NXDOMAIN;
  }
  if (questions.length !== 1) return false;
  const q = questions[0]!;
  return q.name.toLowerCase() === qname && q.type === qtype && (q.class ?? 'IN') === 'IN';
}

type UdpOutcome = { kind: 'packet'; packet: DecodedPacket } | { kind: 'truncated' };

interface Exchange {
  server: ServerAddress;
  query: Buffer;
  id: number;
  qname: string;
  qtype: QueryType;
  timeoutMs: number;
}

function networkError(err: NodeJS.ErrnoException, ex: Exchange, transport: string): DnsError {
  // ICMP port unreachable / TCP RST: nothing listens there. Not the REFUSED rcode, but equally "ask someone else".
  const code: DnsErrorCode = err.code === 'ECONNREFUSED' ? 'REFUSED' : 'TIMEOUT';
  return new DnsError(code, ex.qname, ex.qtype, `${transport} ${ex.server.label}: ${err.code ?? err.message}`, { cause: err });
}

function udpExchange(ex: Exchange): Promise<UdpOutcome> {
  return new Promise((resolve, reject) => {
    const socket = dgram.createSocket(ex.server.family === 6 ? 'udp6' : 'udp4');
    let settled = false;
    let sawMalformed = false;

    const finish = (outcome: UdpOutcome | DnsError): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const settle = (): void => (outcome instanceof DnsError ? reject(outcome) : resolve(outcome));
      // Settle only once the handle is gone, so a resolved query never leaves a socket keeping the process alive.
      try {
        socket.close(settle);
      } catch {
        settle(); // already closed after an error
      }
    };

    const timer = setTimeout(() => {
      const code: DnsErrorCode = sawMalformed ? 'BADRESPONSE' : 'TIMEOUT';
      finish(new DnsError(code, ex.qname, ex.qtype, `no ${sawMalformed ? 'valid ' : ''}answer from ${ex.server.label} within ${ex.timeoutMs} ms`));
    }, ex.timeoutMs);

    socket.on('error', (err) => finish(networkError(err, ex, 'udp')));
    socket.on('message', (msg) => {
      let packet: DecodedPacket;
      try {
        packet = dnsPacket.decode(msg);
      } catch {
        // A truncated reply may have been cut mid-record by a sloppy server (RFC 2181 §9 asks for whole RRsets);
        // the header alone is enough to know we must go to TCP.
        if (msg.length >= HEADER_BYTES && msg.readUInt16BE(0) === ex.id && (msg.readUInt16BE(2) & (HEADER_QR_BIT | HEADER_TC_BIT)) === (HEADER_QR_BIT | HEADER_TC_BIT)) {
          finish({ kind: 'truncated' });
          return;
        }
        sawMalformed = true; // keep listening: it may be noise, the real answer can still come
        return;
      }
      if (!matchesQuery(packet, ex.id, ex.qname, ex.qtype)) return;
      finish(packet.flag_tc ? { kind: 'truncated' } : { kind: 'packet', packet });
    });
    // Node hands a failed connect (ENETUNREACH, EACCES) to this callback, not to 'error'; sending on
    // the unconnected socket then would throw out of a nextTick and take the process down.
    socket.connect(ex.server.port, ex.server.host, (err?: Error) => {
      if (settled) return;
      if (err) {
        finish(networkError(err, ex, 'udp'));
        return;
      }
      socket.send(ex.query, (err) => {
        if (err) finish(networkError(err, ex, 'udp'));
      });
    });
  });
}

/** RFC 7766: same query over TCP, each message prefixed by its 2-octet length (RFC 1035 §4.2.2). */
function tcpExchange(ex: Exchange): Promise<DecodedPacket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: ex.server.host, port: ex.server.port });
    let settled = false;
    let closed = false;
    let outcome: DecodedPacket | DnsError | undefined;
    let pending = Buffer.alloc(0);

    const settle = (): void => {
      if (outcome instanceof DnsError) reject(outcome);
      else resolve(outcome!);
    };
    const finish = (result: DecodedPacket | DnsError): void => {
      if (settled) return;
      settled = true;
      outcome = result;
      clearTimeout(timer);
      if (closed) settle();
      else socket.destroy(); // 'close' settles, so no handle outlives the promise
    };

    const timer = setTimeout(() => {
      finish(new DnsError('TIMEOUT', ex.qname, ex.qtype, `no answer over tcp from ${ex.server.label} within ${ex.timeoutMs} ms`));
    }, ex.timeoutMs);

    socket.on('close', () => {
      closed = true;
      if (settled) settle();
      else finish(new DnsError('BADRESPONSE', ex.qname, ex.qtype, `tcp ${ex.server.label} closed before answering`));
    });
    socket.on('error', (err) => finish(networkError(err, ex, 'tcp')));
    socket.on('connect', () => {
      const prefix = Buffer.alloc(2);
      prefix.writeUInt16BE(ex.query.length);
      socket.write(Buffer.concat([prefix, ex.query]));
    });
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (!settled && pending.length >= 2) {
        const length = pending.readUInt16BE(0);
        if (pending.length < 2 + length) return;
        const msg = pending.subarray(2, 2 + length);
        pending = pending.subarray(2 + length);
        let packet: DecodedPacket;
        try {
          packet = dnsPacket.decode(msg);
        } catch (err) {
          // Unlike UDP nobody can inject into this connection, so garbage is the server's.
          finish(new DnsError('BADRESPONSE', ex.qname, ex.qtype, `undecodable tcp answer from ${ex.server.label}`, { cause: err }));
          return;
        }
        if (matchesQuery(packet, ex.id, ex.qname, ex.qtype)) finish(packet);
      }
    });
  });
}

// ---------------------------------------------------------------- answers

function ttlOf(a: Answer): number {
  const ttl = 'ttl' in a && typeof a.ttl === 'number' ? a.ttl : 0;
  return ttl > MAX_TTL_SECONDS ? 0 : ttl;
}

/**
 * Walks the CNAME chain inside the answer section (RFC 1034 §3.6.2, §4.3.2
 * step 3a): a recursive server answers "A www" with "www CNAME x" + "x A ...".
 * Returns undefined when the chain ends without data of the asked type.
 */
function extractAnswer(packet: DecodedPacket, qname: string, qtype: QueryType): ExtractedAnswer | undefined {
  const answers = (packet.answers ?? []).filter((a) => a.type !== 'OPT' && ('class' in a ? (a.class ?? 'IN') === 'IN' : true));
  let current = qname;
  let chainTtl = Number.POSITIVE_INFINITY;
  const visited = new Set<string>([qname]);
  for (let hop = 0; hop <= MAX_CNAME_HOPS; hop++) {
    const matching = answers.filter((a) => a.type === qtype && a.name.toLowerCase() === current);
    if (matching.length > 0) {
      return { records: matching, ttlSeconds: Math.min(chainTtl, ...matching.map(ttlOf)), ...(current !== qname ? { canonicalName: current } : {}) };
    }
    if (qtype === 'CNAME') return undefined;
    const cname = answers.find((a): a is StringAnswer => a.type === 'CNAME' && a.name.toLowerCase() === current);
    if (!cname || typeof cname.data !== 'string') return undefined;
    chainTtl = Math.min(chainTtl, ttlOf(cname));
    current = cleanTarget(cname.data);
    if (visited.has(current)) {
      throw new DnsError('BADRESPONSE', qname, qtype, `CNAME loop at ${current}`);
    }
    visited.add(current);
  }
  throw new DnsError('BADRESPONSE', qname, qtype, `CNAME chain longer than ${MAX_CNAME_HOPS}`);
}

/** RFC 2308 §5: a denial may be cached for min(SOA TTL, SOA MINIMUM) of the SOA in its authority section. */
function denial(packet: DecodedPacket, authenticated: boolean): { authenticated: boolean; negativeTtlSeconds?: number } {
  const soa = (packet.authorities ?? []).find((a) => a.type === 'SOA') as { ttl?: number; data?: { minimum?: number } } | undefined;
  if (!soa || typeof soa.data?.minimum !== 'number') return { authenticated };
  return { authenticated, negativeTtlSeconds: Math.min(soa.ttl ?? 0, soa.data.minimum) };
}

function txtChunks(data: unknown): string[] {
  const parts = Array.isArray(data) ? data : [data];
  return parts.map((p) => (Buffer.isBuffer(p) ? p.toString('utf8') : String(p)));
}

// ---------------------------------------------------------------- client

function rcodeError(rcode: number, ex: Exchange): DnsError {
  const where = `from ${ex.server.label}`;
  switch (rcode) {
    case RCODE_SERVFAIL:
      return new DnsError('SERVFAIL', ex.qname, ex.qtype, `SERVFAIL ${where}`);
    case RCODE_REFUSED:
      return new DnsError('REFUSED', ex.qname, ex.qtype, `REFUSED ${where}`);
    case RCODE_FORMERR:
      // The server's, not our encoder's: temporary (dns-errors.ts).
      return new DnsError('FORMERR', ex.qname, ex.qtype, `FORMERR ${where}`, { temporary: true });
    default:
      // NOTIMP and friends: this server cannot help with a plain QUERY; another might.
      return new DnsError('BADRESPONSE', ex.qname, ex.qtype, `rcode ${rcode} ${where}`);
  }
}

function positiveNumber(value: number | undefined, fallback: number, what: string, integer: boolean): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw new RangeError(`DNS client ${what} must be a positive ${integer ? 'integer' : 'number'}, got ${value}`);
  }
  return value;
}

export function createDnsClient(opts: DnsClientOptions): DnsResolver {
  const servers = opts.servers.length > 0 ? opts.servers.map(parseServerEntry) : systemServers();
  const timeoutMs = positiveNumber(opts.timeoutMs, DEFAULT_TIMEOUT_MS, 'timeoutMs', false);
  const tries = positiveNumber(opts.tries, DEFAULT_TRIES, 'tries', true);
  const trustAd = opts.trustAd ?? 'loopback';
  /** Servers that answered an EDNS query with an OPT-less FORMERR (RFC 6891 §7); they get plain queries from then on. */
  const noEdnsServers = new Set<string>();

  /** One attempt against one server: UDP, TCP if truncated, EDNS-less retry if needed. */
  async function ask(server: ServerAddress, qname: string, qtype: QueryType): Promise<{ packet: DecodedPacket; ex: Exchange }> {
    const edns = !noEdnsServers.has(server.label);
    const id = randomInt(QUERY_ID_SPACE);
    const ex: Exchange = { server, query: buildQuery(id, qname, qtype, edns), id, qname, qtype, timeoutMs };
    const udp = await udpExchange(ex);
    const packet = udp.kind === 'packet' ? udp.packet : await tcpExchange(ex);
    if (edns && rcodeOf(packet) === RCODE_FORMERR && !hasOpt(packet)) {
      noEdnsServers.add(server.label);
      return ask(server, qname, qtype);
    }
    return { packet, ex };
  }

  /**
   * Rotates through the servers, `tries` rounds. Timeouts and network errors
   * are retried; a server that answered with an error rcode is not asked
   * again for this query (it would only repeat itself, RFC 2308 §7.1 / RFC
   * 9520 cache such failures), the next one is.
   */
  async function exchange(qname: string, qtype: QueryType): Promise<{ packet: DecodedPacket; server: ServerAddress }> {
    const gaveErrorRcode = new Set<number>();
    let lastError: DnsError | undefined;
    const attempts = tries * servers.length;
    for (let attempt = 0; attempt < attempts && gaveErrorRcode.size < servers.length; attempt++) {
      const index = attempt % servers.length;
      if (gaveErrorRcode.has(index)) continue;
      try {
        const { packet, ex } = await ask(servers[index]!, qname, qtype);
        const rcode = rcodeOf(packet);
        if (rcode === RCODE_NOERROR || rcode === RCODE_NXDOMAIN) return { packet, server: servers[index]! };
        gaveErrorRcode.add(index);
        lastError = rcodeError(rcode, ex);
      } catch (err) {
        if (!(err instanceof DnsError)) throw err;
        lastError = err;
      }
    }
    throw lastError ?? new DnsError('TIMEOUT', qname, qtype, 'no servers to ask');
  }

  async function lookup(name: string, qtype: QueryType): Promise<ExtractedAnswer> {
    const qname = normalizeName(name, qtype);
    const { packet, server } = await exchange(qname, qtype);
    const authenticated = packet.flag_ad === true && (trustAd === 'always' || isLoopbackAddress(server.host));
    if (rcodeOf(packet) === RCODE_NXDOMAIN) {
      // RFC 6604: with a CNAME chain the NXDOMAIN is about its end, which is what callers of a
      // resolver want; a chain that loops or runs too long is a broken answer, not a denial (the
      // walk throws BADRESPONSE), since a name that does not exist now bounces mail at once.
      extractAnswer(packet, qname, qtype);
      throw new DnsError('NOTFOUND', qname, qtype, 'NXDOMAIN', denial(packet, authenticated));
    }
    const found = extractAnswer(packet, qname, qtype);
    if (!found) throw new DnsError('NODATA', qname, qtype, `no ${qtype} records`, denial(packet, authenticated));
    return { ...found, authenticated };
  }

  const strings = async (name: string, qtype: QueryType, clean: (s: string) => string): Promise<DnsAnswer<string>> => {
    const { records, ttlSeconds, authenticated, canonicalName } = await lookup(name, qtype);
    return { records: records.map((a) => clean(String((a as { data: unknown }).data))), ttlSeconds, authenticated, ...(canonicalName ? { canonicalName } : {}) };
  };
  const asIs = (s: string): string => s;

  return {
    async resolveTxt(name) {
      const { records, ttlSeconds, authenticated } = await lookup(name, 'TXT');
      return { records: records.map((a) => txtChunks((a as { data: unknown }).data)), ttlSeconds, authenticated };
    },
    async resolveMx(name) {
      const { records, ttlSeconds, authenticated } = await lookup(name, 'MX');
      return {
        records: records.map((a) => {
          const data = (a as { data: { exchange: string; preference?: number } }).data;
          return { exchange: cleanTarget(data.exchange), priority: data.preference ?? 0 };
        }),
        ttlSeconds,
        authenticated,
      };
    },
    async resolveTlsa(name) {
      const { records, ttlSeconds, authenticated } = await lookup(name, 'TLSA');
      return {
        records: records.map((a) => {
          const data = (a as { data: { usage: number; selector: number; matchingType: number; certificate: Buffer } }).data;
          return { usage: data.usage, selector: data.selector, matchingType: data.matchingType, data: Buffer.from(data.certificate) };
        }),
        ttlSeconds,
        authenticated,
      };
    },
    resolveCname: (name) => strings(name, 'CNAME', cleanTarget),
    resolve4: (name) => strings(name, 'A', asIs),
    resolve6: (name) => strings(name, 'AAAA', asIs),
    resolvePtr: (name) => strings(name, 'PTR', cleanTarget),
  };
}
