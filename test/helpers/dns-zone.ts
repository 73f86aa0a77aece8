/**
 * "The internet's DNS" for the test suite: an in-process server on
 * 127.0.0.1 (UDP, plus TCP on the same port for truncated answers, RFC 7766)
 * speaking real DNS wire format via dns-packet.
 *
 * It plays a recursive resolver that is authoritative for everything it was
 * told about: unknown names are NXDOMAIN, names with other types (or only
 * names below them, RFC 8020 empty non-terminals) are NOERROR/NODATA, and a
 * CNAME is followed inside the answer like a recursive server would (RFC 1034
 * §4.3.2). Answers over 512 octets (or the client's EDNS0 size, RFC 6891) are
 * sent with TC set and no records, so clients must retry over TCP.
 *
 *   const zone = await startDnsZone();
 *   zone.set('example.com', 'MX', [{ exchange: 'mx.example.com', priority: 10 }]);
 *   const dns = createDnsClient({ servers: [zone.server] });
 *   ...
 *
 * DNSSEC is played, not done: zone.sign('example.com') makes every answer (and denial) for that
 * name and the names below it carry the AD bit, as a validating resolver would for a signed
 * zone; zone.sign(name, false) carves an unsigned (insecure) part out of a signed one. Nothing
 * is really signed: the client under test trusts the AD bit of its resolver.
 *   await zone.close();
 */
import dgram from 'node:dgram';
import net from 'node:net';
import dnsPacket from 'dns-packet';
import type { Answer, DecodedPacket, Packet } from 'dns-packet';

/** A TLSA record (RFC 6698): data is the certificate association data (hex or bytes). */
export interface TlsaValue {
  usage: number;
  selector: number;
  matchingType: number;
  data: string | Buffer;
}
/** A/AAAA/CNAME: string; TXT: string (one record; split into 255-octet chunks if longer) or string[] (the chunks of one record); MX: object; TLSA: TlsaValue. */
export type ZoneValue = string | string[] | { exchange: string; priority: number } | TlsaValue;
export type ZoneRecordType = 'A' | 'AAAA' | 'MX' | 'TXT' | 'CNAME' | 'TLSA';

export interface DnsZone {
  /** "127.0.0.1:<port>", ready for createDnsClient({ servers: [zone.server] }). */
  readonly server: string;
  readonly port: number;
  /** Replaces the RRset for name+type. An empty list keeps the name existing with no records (NODATA). */
  set(name: string, type: ZoneRecordType, values: ZoneValue[], ttlSeconds?: number): void;
  /** Drops one RRset, or every RRset of the name when type is omitted. */
  remove(name: string, type?: string): void;
  /**
   * Answers for `name` and every name below it carry the AD bit (a signed zone behind a
   * validating resolver); signed=false marks that part unsigned again. The most specific
   * setting wins.
   */
  sign(name: string, signed?: boolean): void;
  /** Queries received for one name and type (to check what a client caches). */
  queriesFor(name: string, type: string): number;
  /**
   * From now on, NXDOMAIN and NODATA answers carry an SOA in their authority section whose
   * TTL and MINIMUM are `seconds`: the negative-caching TTL of RFC 2308 §5. Off by default.
   */
  setNegativeTtl(seconds: number): void;
  /** Answer SERVFAIL for every query of that name (also when reached through a CNAME) until clear(). */
  servfail(name: string): void;
  /** Answer FORMERR for every query of that name (a broken resolver or middlebox) until clear(). */
  formerr(name: string): void;
  /** Never answer queries for that name, over UDP or TCP, until clear(). */
  blackhole(name: string): void;
  clear(name: string): void;
  /** Queries received (answered or dropped), over both transports. */
  readonly queryCount: number;
  close(): Promise<void>;
}

const LOOPBACK = '127.0.0.1';
const DEFAULT_TTL_SECONDS = 300;
/** RFC 1035 §4.2.1 limit for clients without EDNS0. */
const CLASSIC_UDP_PAYLOAD_BYTES = 512;
/** What we advertise back in our OPT record (RFC 6891 §6.2.5). */
const SERVER_UDP_PAYLOAD_BYTES = 1232;
/** RFC 1035 §3.3: a <character-string> is one length octet plus up to 255 octets. */
const MAX_TXT_CHUNK_BYTES = 255;
const MAX_CNAME_HOPS = 8;
/** The UDP port is picked by the OS; TCP may find it taken, so a few fresh tries. */
const BIND_ATTEMPTS = 5;

const RCODE_FORMERR = 1;
const RCODE_SERVFAIL = 2;
const RCODE_NXDOMAIN = 3;

interface RRset {
  values: ZoneValue[];
  ttlSeconds: number;
}

function normalizeName(name: string): string {
  const lower = name.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/** Splits on code point boundaries so every chunk stays valid UTF-8 on its own. */
function splitTxt(text: string): string[] {
  if (Buffer.byteLength(text) <= MAX_TXT_CHUNK_BYTES) return [text];
  const chunks: string[] = [];
  let current = '';
  let currentBytes = 0;
  for (const ch of text) {
    const bytes = Buffer.byteLength(ch);
    if (currentBytes + bytes > MAX_TXT_CHUNK_BYTES) {
      chunks.push(current);
      current = '';
      currentBytes = 0;
    }
    current += ch;
    currentBytes += bytes;
  }
  chunks.push(current);
  return chunks;
}

function validate(name: string, type: ZoneRecordType, values: ZoneValue[]): void {
  const bad = (why: string): TypeError => new TypeError(`dns-zone set(${name}, ${type}): ${why}`);
  if (!Array.isArray(values)) throw bad('values must be an array');
  if (type === 'CNAME' && values.length > 1) throw bad('a name has at most one CNAME (RFC 1034 §3.6.2)');
  for (const v of values) {
    switch (type) {
      case 'A':
        if (typeof v !== 'string' || !net.isIPv4(v)) throw bad(`${JSON.stringify(v)} is not an IPv4 address`);
        break;
      case 'AAAA':
        if (typeof v !== 'string' || !net.isIPv6(v)) throw bad(`${JSON.stringify(v)} is not an IPv6 address`);
        break;
      case 'CNAME':
        if (typeof v !== 'string' || v.length === 0) throw bad('CNAME target must be a non-empty string');
        break;
      case 'TXT':
        if (typeof v !== 'string' && !(Array.isArray(v) && v.every((c) => typeof c === 'string'))) throw bad('TXT value must be a string or string[]');
        break;
      case 'MX':
        if (typeof v !== 'object' || Array.isArray(v) || !('exchange' in v) || typeof v.exchange !== 'string' || !Number.isInteger(v.priority) || v.priority < 0 || v.priority > 0xffff) {
          throw bad('MX value must be { exchange: string, priority: 0..65535 }');
        }
        break;
      case 'TLSA': {
        const ok = typeof v === 'object' && !Array.isArray(v) && 'usage' in v && [v.usage, v.selector, v.matchingType].every((n) => Number.isInteger(n) && n >= 0 && n <= 255);
        if (!ok) throw bad('TLSA value must be { usage, selector, matchingType: 0..255, data: hex string or Buffer }');
        break;
      }
      default:
        throw bad('unsupported type');
    }
  }
}

function toAnswers(owner: string, type: ZoneRecordType, rrset: RRset): Answer[] {
  const ttl = rrset.ttlSeconds;
  return rrset.values.map((v): Answer => {
    switch (type) {
      case 'A':
      case 'AAAA':
        return { type, name: owner, ttl, class: 'IN', data: v as string };
      case 'CNAME':
        return { type, name: owner, ttl, class: 'IN', data: normalizeName(v as string) };
      case 'TXT': {
        const chunks = typeof v === 'string' ? splitTxt(v) : (v as string[]).flatMap(splitTxt);
        return { type, name: owner, ttl, class: 'IN', data: chunks.map((c) => Buffer.from(c, 'utf8')) };
      }
      case 'MX': {
        const mx = v as { exchange: string; priority: number };
        // "" or "." is the null MX of RFC 7505: the root name on the wire.
        const exchange = mx.exchange === '' || mx.exchange === '.' ? '.' : normalizeName(mx.exchange);
        return { type, name: owner, ttl, class: 'IN', data: { exchange, preference: mx.priority } };
      }
      case 'TLSA': {
        const r = v as TlsaValue;
        const certificate = Buffer.isBuffer(r.data) ? r.data : Buffer.from(r.data, 'hex');
        return { type, name: owner, ttl, class: 'IN', data: { usage: r.usage, selector: r.selector, matchingType: r.matchingType, certificate } };
      }
    }
  });
}

class Zone implements DnsZone {
  readonly server: string;
  readonly port: number;
  private readonly records = new Map<string, Map<string, RRset>>();
  private readonly servfailNames = new Set<string>();
  private readonly blackholeNames = new Set<string>();
  private readonly formerrNames = new Set<string>();
  /** Names set signed (true) or unsigned (false) with sign(). */
  private readonly signedNames = new Map<string, boolean>();
  private readonly queriesByKey = new Map<string, number>();
  private negativeTtlSeconds: number | undefined;
  private readonly tcpSockets = new Set<net.Socket>();
  private queries = 0;
  private closing: Promise<void> | undefined;

  constructor(
    private readonly udp: dgram.Socket,
    private readonly tcp: net.Server,
    port: number,
  ) {
    this.port = port;
    this.server = `${LOOPBACK}:${port}`;
    udp.on('message', (msg, rinfo) => {
      const reply = this.handle(msg, 'udp');
      if (reply && !this.closing) udp.send(reply, rinfo.port, rinfo.address);
    });
    udp.on('error', () => {
      // A test DNS server must never take the test process down; the client sees a timeout instead.
    });
    tcp.on('connection', (socket) => this.serveTcp(socket));
  }

  get queryCount(): number {
    return this.queries;
  }

  set(name: string, type: ZoneRecordType, values: ZoneValue[], ttlSeconds = DEFAULT_TTL_SECONDS): void {
    validate(name, type, values);
    if (!Number.isInteger(ttlSeconds) || ttlSeconds < 0) throw new TypeError(`dns-zone set(${name}, ${type}): ttlSeconds must be a non-negative integer`);
    const key = normalizeName(name);
    let node = this.records.get(key);
    if (!node) {
      node = new Map();
      this.records.set(key, node);
    }
    node.set(type, { values: structuredClone(values), ttlSeconds });
  }

  remove(name: string, type?: string): void {
    const key = normalizeName(name);
    if (type === undefined) {
      this.records.delete(key);
      return;
    }
    const node = this.records.get(key);
    node?.delete(type.toUpperCase());
    if (node && node.size === 0) this.records.delete(key);
  }

  sign(name: string, signed = true): void {
    this.signedNames.set(normalizeName(name), signed);
  }

  setNegativeTtl(seconds: number): void {
    this.negativeTtlSeconds = seconds;
  }

  queriesFor(name: string, type: string): number {
    return this.queriesByKey.get(`${normalizeName(name)} ${type.toUpperCase()}`) ?? 0;
  }

  /** The most specific sign() setting at or above the name; unsigned when none. */
  private isSigned(name: string): boolean {
    for (let n = name; ; ) {
      const setting = this.signedNames.get(n);
      if (setting !== undefined) return setting;
      const dot = n.indexOf('.');
      if (dot < 0) return false;
      n = n.slice(dot + 1);
    }
  }

  servfail(name: string): void {
    this.servfailNames.add(normalizeName(name));
  }

  blackhole(name: string): void {
    this.blackholeNames.add(normalizeName(name));
  }

  formerr(name: string): void {
    this.formerrNames.add(normalizeName(name));
  }

  clear(name: string): void {
    const key = normalizeName(name);
    this.servfailNames.delete(key);
    this.blackholeNames.delete(key);
    this.formerrNames.delete(key);
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const socket of this.tcpSockets) socket.destroy();
      await Promise.all([
        new Promise<void>((resolve) => this.udp.close(() => resolve())),
        new Promise<void>((resolve) => this.tcp.close(() => resolve())),
      ]);
    })();
    return this.closing;
  }

  /** RFC 8020: a name exists if it owns records or any name below it does. */
  private exists(name: string): boolean {
    if (this.records.has(name)) return true;
    const suffix = `.${name}`;
    for (const key of this.records.keys()) if (key.endsWith(suffix)) return true;
    return false;
  }

  /** Returns the encoded reply, or undefined to stay silent. */
  private handle(msg: Buffer, transport: 'udp' | 'tcp'): Buffer | undefined {
    let query: DecodedPacket;
    try {
      query = dnsPacket.decode(msg);
    } catch {
      return undefined; // not DNS; nothing sensible to echo an id to
    }
    if (query.type !== 'query') return undefined; // never answer answers (reflection loops)
    this.queries++;

    const question = query.questions?.[0];
    const clientOpt = query.additionals?.find((a) => a.type === 'OPT');
    const reply: Packet = {
      type: 'response',
      id: query.id ?? 0,
      flags: dnsPacket.AUTHORITATIVE_ANSWER | dnsPacket.RECURSION_AVAILABLE | ((query.flags ?? 0) & dnsPacket.RECURSION_DESIRED),
      questions: query.questions ?? [],
      answers: [],
      authorities: [],
      // RFC 6891 §7: answer an EDNS query with an OPT of our own.
      additionals: clientOpt
        ? [{ type: 'OPT', name: '.', udpPayloadSize: SERVER_UDP_PAYLOAD_BYTES, extendedRcode: 0, ednsVersion: 0, flags: 0, flag_do: false, options: [] }]
        : [],
    };
    const withRcode = (rcode: number): Packet => ({ ...reply, flags: (reply.flags ?? 0) | rcode });

    if (!question || query.questions!.length !== 1) return dnsPacket.encode(withRcode(RCODE_FORMERR));
    const queryKey = `${normalizeName(question.name)} ${question.type}`;
    this.queriesByKey.set(queryKey, (this.queriesByKey.get(queryKey) ?? 0) + 1);

    const answers: Answer[] = [];
    let rcode = 0;
    let current = normalizeName(question.name);
    // AD only when every name on the way (CNAMEs included) is signed (RFC 4035 3.2.3), and only
    // to a client that asked with DO or AD (RFC 6840 5.7).
    const wantsAd = (clientOpt !== undefined && 'flag_do' in clientOpt && clientOpt.flag_do) || ((query.flags ?? 0) & dnsPacket.AUTHENTIC_DATA) !== 0;
    let secure = wantsAd;
    for (let hop = 0; hop <= MAX_CNAME_HOPS; hop++) {
      if (this.blackholeNames.has(current)) return undefined;
      if (this.servfailNames.has(current)) return dnsPacket.encode(withRcode(RCODE_SERVFAIL));
      if (this.formerrNames.has(current)) return dnsPacket.encode(withRcode(RCODE_FORMERR));
      secure &&= this.isSigned(current);
      const node = this.records.get(current);
      const rrset = node?.get(question.type);
      if (rrset) {
        answers.push(...toAnswers(current, question.type as ZoneRecordType, rrset));
        break;
      }
      const cname = node?.get('CNAME');
      if (cname && cname.values.length > 0) {
        answers.push(...toAnswers(current, 'CNAME', cname));
        current = normalizeName(cname.values[0] as string);
        continue;
      }
      // RFC 6604: after a CNAME the rcode describes the last name of the chain.
      if (!this.exists(current)) rcode = RCODE_NXDOMAIN;
      break;
    }

    if (secure) reply.flags = (reply.flags ?? 0) | dnsPacket.AUTHENTIC_DATA;
    if (answers.length === 0 && this.negativeTtlSeconds !== undefined) {
      // RFC 2308 §3: a negative answer's authority section holds the zone's SOA.
      const ttl = this.negativeTtlSeconds;
      const soa = { mname: 'ns.zone.test', rname: 'hostmaster.zone.test', serial: 1, refresh: 3600, retry: 600, expire: 86400, minimum: ttl };
      reply.authorities = [{ type: 'SOA', name: current.split('.').slice(-2).join('.'), ttl, class: 'IN', data: soa }];
    }
    const full = dnsPacket.encode({ ...withRcode(rcode), answers });
    if (transport === 'tcp') return full;
    const limit = clientOpt && 'udpPayloadSize' in clientOpt ? Math.max(CLASSIC_UDP_PAYLOAD_BYTES, clientOpt.udpPayloadSize) : CLASSIC_UDP_PAYLOAD_BYTES;
    if (full.length <= limit) return full;
    // RFC 2181 §9: drop whole RRsets rather than send a partial one; we drop them all and set TC.
    return dnsPacket.encode({ ...withRcode(rcode), flags: ((reply.flags ?? 0) | rcode | dnsPacket.TRUNCATED_RESPONSE) });
  }

  /** RFC 1035 §4.2.2 framing; pipelined queries on one connection are all answered (RFC 7766 §6.2.1.1). */
  private serveTcp(socket: net.Socket): void {
    if (this.closing) {
      socket.destroy();
      return;
    }
    this.tcpSockets.add(socket);
    socket.unref();
    socket.on('close', () => this.tcpSockets.delete(socket));
    socket.on('error', () => {
      // The client hanging up mid-answer is its business.
    });
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 2) {
        const length = pending.readUInt16BE(0);
        if (pending.length < 2 + length) return;
        const msg = pending.subarray(2, 2 + length);
        pending = pending.subarray(2 + length);
        const reply = this.handle(msg, 'tcp');
        if (!reply || socket.destroyed) continue;
        const prefix = Buffer.alloc(2);
        prefix.writeUInt16BE(reply.length);
        socket.write(Buffer.concat([prefix, reply]));
      }
    });
  }
}

function bindUdp(): Promise<dgram.Socket> {
  return new Promise((resolve, reject) => {
    const udp = dgram.createSocket('udp4');
    udp.once('error', reject);
    udp.bind(0, LOOPBACK, () => {
      udp.off('error', reject);
      resolve(udp);
    });
  });
}

function listenTcp(port: number): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const tcp = net.createServer();
    tcp.once('error', reject);
    tcp.listen(port, LOOPBACK, () => {
      tcp.off('error', reject);
      resolve(tcp);
    });
  });
}

export async function startDnsZone(): Promise<DnsZone> {
  let lastError: unknown;
  for (let attempt = 0; attempt < BIND_ATTEMPTS; attempt++) {
    const udp = await bindUdp();
    const port = udp.address().port;
    try {
      const tcp = await listenTcp(port);
      // Unref'd: a test that forgets close() must not keep the process alive; a pending client query keeps it alive anyway.
      udp.unref();
      tcp.unref();
      return new Zone(udp, tcp, port);
    } catch (err) {
      lastError = err; // TCP side of this port is taken by someone else; try another port
      await new Promise<void>((resolve) => udp.close(() => resolve()));
    }
  }
  throw new Error(`dns-zone: could not bind UDP+TCP on one loopback port after ${BIND_ATTEMPTS} attempts`, { cause: lastError });
}
