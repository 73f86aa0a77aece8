// A hostile recursive resolver for the fuzz-dns proof: UDP and TCP on one loopback port. It
// asks the test zone for the correct answer to every query (over TCP, so nothing is truncated)
// and, for names under `fuzzSuffix`, mutates it as the current plan says: wrong id or question
// (carrying poison), garbage bytes, an answer cut short, a compression pointer loop, counts larger
// than the records present, records of other types or names, CNAME chains and loops, records
// replaced by generated ones (hundreds of MX or TXT, odd TTLs, binary TXT, null MX, odd
// addresses, garbage TLSA), any RCODE, TC then trouble over TCP, or silence. Other names get the
// zone's answer unchanged. It logs what each query was answered with, so the proof can tell what
// the client may legitimately have concluded.
import dgram from 'node:dgram';
import net from 'node:net';
import dnsPacket from 'dns-packet';
import type { Answer, DecodedPacket } from 'dns-packet';

const LOOPBACK = '127.0.0.1';
const BIND_ATTEMPTS = 5;
const HEADER_TC = 0x0200;
const HEADER_AD = 0x0020;
const RCODE_NXDOMAIN = 3;
/** Names that only a client which used a spoofed (wrong id or question) or out-of-name record would ever ask for. */
export const POISON_NAME = 'poison.hostile-dns.test';
/** An address only a spoofed answer gives; the proof listens there to catch a connection. */
export const POISON_ADDRESS = '127.0.0.66';
export const POISON_TEXT = 'poison-7f3a';

export type TxtChunk = { kind: 'text'; text: string } | { kind: 'bytes'; bytes: number[] };
export type Replacement =
  | { type: 'MX'; records: { exchange: string; preference: number }[] }
  | { type: 'TXT'; records: TxtChunk[][] }
  | { type: 'A' | 'AAAA'; records: string[] }
  | { type: 'TLSA'; records: { usage: number; selector: number; matchingType: number; data: number[] }[] }
  | { type: 'CNAME'; records: string[] };
export type TcpTrouble = 'answer' | 'garbage' | 'close' | 'silent' | 'cut' | 'wrong-id';

export type Mutation =
  | { kind: 'pass' }
  | { kind: 'silent' }
  | { kind: 'rcode'; rcode: number; withQuestion: boolean; extended: number }
  | { kind: 'nodata' }
  | { kind: 'spoof'; how: 'id' | 'question' | 'type'; then: 'answer' | 'silent' }
  | { kind: 'garbage'; bytes: number[] }
  | { kind: 'cut'; fraction: number }
  | { kind: 'pointer-loop' }
  | { kind: 'counts'; section: 'qd' | 'an' | 'ns' | 'ar'; extra: number }
  | { kind: 'other-records'; keepCorrect: boolean }
  | { kind: 'cname'; shape: 'chain' | 'loop' | 'dangling'; hops: number }
  | { kind: 'replace'; replacement: Replacement; ttl: number; ad: boolean }
  | { kind: 'huge'; type: 'MX' | 'TXT'; count: number }
  | { kind: 'ttl'; ttl: number }
  | { kind: 'ad' }
  | { kind: 'tc'; tcp: TcpTrouble; udpRecords: boolean };

/** What the client could take from one reply, as far as this server can tell. */
export type Verdict = 'answer' | 'nxdomain' | 'nodata' | 'null-mx' | 'trouble';

export interface LoggedQuery {
  name: string;
  type: string;
  transport: 'udp' | 'tcp';
  mutation: Mutation['kind'];
  verdict: Verdict;
}

export interface HostileDns {
  readonly server: string;
  readonly port: number;
  /** The mutations for fuzzed names; a query picks one by its name, type and how often it was asked. */
  setPlan(plan: Mutation[], opts?: { signed?: boolean }): void;
  readonly log: LoggedQuery[];
  /** Queries for POISON_NAME or under it: a client used a record it should have ignored. */
  readonly poisonQueries: string[];
  close(): Promise<void>;
}

function lower(name: string): string {
  const n = name.toLowerCase();
  return n.endsWith('.') ? n.slice(0, -1) : n;
}

function hash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

function txtData(chunks: TxtChunk[]): Buffer[] {
  return chunks.map((c) => (c.kind === 'text' ? Buffer.from(c.text, 'utf8') : Buffer.from(c.bytes)));
}

function replacementAnswers(name: string, r: Replacement, ttl: number): Answer[] {
  switch (r.type) {
    case 'MX':
      return r.records.map((d) => ({ type: 'MX', name, ttl, class: 'IN', data: { exchange: d.exchange, preference: d.preference } }) as Answer);
    case 'TXT':
      return r.records.map((chunks) => ({ type: 'TXT', name, ttl, class: 'IN', data: txtData(chunks) }) as Answer);
    case 'A':
    case 'AAAA':
      return r.records.map((data) => ({ type: r.type, name, ttl, class: 'IN', data }) as Answer);
    case 'TLSA':
      return r.records.map((d) => ({ type: 'TLSA', name, ttl, class: 'IN', data: { usage: d.usage, selector: d.selector, matchingType: d.matchingType, certificate: Buffer.from(d.data) } }) as unknown as Answer);
    case 'CNAME':
      return r.records.map((data) => ({ type: 'CNAME', name, ttl, class: 'IN', data }) as Answer);
  }
}

/** A record of the asked type carrying poison, for spoofed and out-of-name answers. */
function poisonAnswer(name: string, type: string): Answer {
  switch (type) {
    case 'MX':
      return { type: 'MX', name, ttl: 3600, class: 'IN', data: { exchange: POISON_NAME, preference: 0 } } as Answer;
    case 'A':
      return { type: 'A', name, ttl: 3600, class: 'IN', data: POISON_ADDRESS } as Answer;
    case 'AAAA':
      return { type: 'AAAA', name, ttl: 3600, class: 'IN', data: `::ffff:${POISON_ADDRESS}` } as Answer;
    case 'TLSA':
      return { type: 'TLSA', name, ttl: 3600, class: 'IN', data: { usage: 3, selector: 1, matchingType: 1, certificate: Buffer.alloc(32, 0x66) } } as unknown as Answer;
    case 'CNAME':
    case 'PTR':
      return { type: type as 'CNAME', name, ttl: 3600, class: 'IN', data: POISON_NAME } as Answer;
    default:
      return { type: 'TXT', name, ttl: 3600, class: 'IN', data: [Buffer.from(`v=spf1 include:${POISON_NAME} ${POISON_TEXT} -all`)] } as Answer;
  }
}

/** Follows CNAMEs inside an answer section like the client does, and says what it shows. */
function verdictOf(packet: DecodedPacket, qname: string, qtype: string): Verdict {
  const rcode = (packet.flags ?? 0) & 0xf;
  if (rcode === RCODE_NXDOMAIN) return 'nxdomain';
  if (rcode !== 0) return 'trouble';
  const answers = packet.answers ?? [];
  let current = qname;
  const seen = new Set<string>([current]);
  for (let hop = 0; hop <= 16; hop++) {
    const matching = answers.filter((a) => a.type === qtype && lower(a.name) === current);
    if (matching.length) {
      if (qtype === 'MX' && matching.every((a) => lower((a as { data: { exchange: string } }).data.exchange) === '')) return 'null-mx';
      return 'answer';
    }
    const cname = answers.find((a) => a.type === 'CNAME' && lower(a.name) === current) as { data: string } | undefined;
    if (!cname || qtype === 'CNAME') return 'nodata';
    current = lower(cname.data);
    if (seen.has(current)) return 'trouble';
    seen.add(current);
  }
  return 'trouble';
}

interface Reply {
  /** Datagrams (UDP) or messages (TCP) to send, in order. */
  messages: Buffer[];
  verdict: Verdict;
  /** For TC: what the TCP retry of this query gets. */
  tcp?: TcpTrouble;
  /** TCP only: close the connection without (or after a part of) an answer. */
  closeAfter?: boolean;
}

class Hostile implements HostileDns {
  readonly server: string;
  readonly log: LoggedQuery[] = [];
  readonly poisonQueries: string[] = [];
  private plan: Mutation[] = [{ kind: 'pass' }];
  /** Every fuzzed answer carries the AD bit, as from a signed zone (DANE's TLSA lookups follow). */
  private signed = false;
  private readonly asked = new Map<string, number>();
  /** TC sent for these "id name type": the TCP retry's trouble. */
  private readonly tcpTrouble = new Map<string, TcpTrouble>();
  private readonly sockets = new Set<net.Socket>();
  private closing: Promise<void> | undefined;

  constructor(
    private readonly udp: dgram.Socket,
    private readonly tcp: net.Server,
    readonly port: number,
    private readonly zonePort: number,
    private readonly fuzzSuffix: string,
  ) {
    this.server = `${LOOPBACK}:${port}`;
    udp.on('message', (msg, rinfo) => {
      void this.answer(msg, 'udp').then(
        (reply) => {
          if (!reply || this.closing) return;
          for (const m of reply.messages) udp.send(m, rinfo.port, rinfo.address);
        },
        () => {},
      );
    });
    udp.on('error', () => {});
    tcp.on('connection', (socket) => this.serveTcp(socket));
  }

  setPlan(plan: Mutation[], opts: { signed?: boolean } = {}): void {
    this.plan = plan.length ? plan : [{ kind: 'pass' }];
    this.signed = opts.signed ?? false;
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const s of this.sockets) s.destroy();
      await Promise.all([new Promise<void>((r) => this.udp.close(() => r())), new Promise<void>((r) => this.tcp.close(() => r()))]);
    })();
    return this.closing;
  }

  private fuzzed(name: string): boolean {
    return name === this.fuzzSuffix || name.endsWith(`.${this.fuzzSuffix}`);
  }

  /** The zone's answer to the same query bytes, over TCP: whole, never truncated. */
  private askZone(msg: Buffer): Promise<Buffer | undefined> {
    return new Promise((resolve) => {
      const socket = net.connect(this.zonePort, LOOPBACK);
      let pending = Buffer.alloc(0);
      const done = (b: Buffer | undefined) => {
        socket.destroy();
        resolve(b);
      };
      socket.setTimeout(5000, () => done(undefined));
      socket.on('error', () => done(undefined));
      socket.on('connect', () => {
        const prefix = Buffer.alloc(2);
        prefix.writeUInt16BE(msg.length);
        socket.write(Buffer.concat([prefix, msg]));
      });
      socket.on('data', (c: Buffer) => {
        pending = Buffer.concat([pending, c]);
        if (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) done(pending.subarray(2, 2 + pending.readUInt16BE(0)));
      });
      socket.on('close', () => done(undefined));
    });
  }

  private pick(key: string): Mutation {
    const n = this.asked.get(key) ?? 0;
    this.asked.set(key, n + 1);
    return this.plan[(hash(key) + n) % this.plan.length]!;
  }

  private async answer(msg: Buffer, transport: 'udp' | 'tcp'): Promise<Reply | undefined> {
    let query: DecodedPacket;
    try {
      query = dnsPacket.decode(msg);
    } catch {
      return undefined;
    }
    const question = query.questions?.[0];
    if (query.type !== 'query' || !question) return undefined;
    const qname = lower(question.name);
    const qtype = question.type;
    if (qname === POISON_NAME || qname.endsWith(`.${POISON_NAME}`)) this.poisonQueries.push(`${qtype} ${qname}`);
    const zoneBytes = await this.askZone(msg);
    if (!zoneBytes) return undefined;
    const correct = dnsPacket.decode(zoneBytes);
    const log = (mutation: Mutation['kind'], verdict: Verdict) => this.log.push({ name: qname, type: qtype, transport, mutation, verdict });
    const plain = (): Reply => ({ messages: [zoneBytes], verdict: verdictOf(correct, qname, qtype) });

    const tcpKey = `${query.id} ${qname} ${qtype}`;
    if (transport === 'tcp' && this.tcpTrouble.has(tcpKey)) {
      const trouble = this.tcpTrouble.get(tcpKey)!;
      this.tcpTrouble.delete(tcpKey);
      const reply = this.tcpReply(trouble, zoneBytes, correct, qname, qtype);
      log('tc', reply.verdict);
      return reply;
    }
    if (!this.fuzzed(qname)) {
      const reply = plain();
      log('pass', reply.verdict);
      return reply;
    }
    const m = this.pick(`${qname} ${qtype}`);
    const reply = this.mutate(m, query, zoneBytes, correct, qname, qtype, transport);
    if (reply.tcp) this.tcpTrouble.set(tcpKey, reply.tcp);
    if (this.signed) for (const b of reply.messages) if (b.length >= 4) b.writeUInt16BE(b.readUInt16BE(2) | HEADER_AD, 2);
    log(m.kind, reply.verdict);
    return reply;
  }

  private tcpReply(trouble: TcpTrouble, zoneBytes: Buffer, correct: DecodedPacket, qname: string, qtype: string): Reply {
    switch (trouble) {
      case 'answer':
        return { messages: [zoneBytes], verdict: verdictOf(correct, qname, qtype) };
      case 'garbage':
        return { messages: [Buffer.from('\u0000\u0007garbage, not DNS at all')], verdict: 'trouble' };
      case 'close':
        return { messages: [], verdict: 'trouble', closeAfter: true };
      case 'silent':
        return { messages: [], verdict: 'trouble' };
      case 'cut':
        return { messages: [zoneBytes.subarray(0, Math.max(2, zoneBytes.length >> 1))], verdict: 'trouble', closeAfter: true };
      case 'wrong-id': {
        const spoof = Buffer.from(zoneBytes);
        spoof.writeUInt16BE((spoof.readUInt16BE(0) + 1) & 0xffff, 0);
        return { messages: [spoof], verdict: 'trouble' };
      }
    }
  }

  private mutate(m: Mutation, query: DecodedPacket, zoneBytes: Buffer, correct: DecodedPacket, qname: string, qtype: string, transport: 'udp' | 'tcp'): Reply {
    const verdict = (p: DecodedPacket) => verdictOf(p, qname, qtype);
    const reply = (packet: DecodedPacket, flags = 0): Reply => {
      const p = { ...packet, flags: (packet.flags ?? 0) | flags };
      return { messages: [dnsPacket.encode(p)], verdict: verdict(p) };
    };
    switch (m.kind) {
      case 'pass':
        return { messages: [zoneBytes], verdict: verdict(correct) };
      case 'silent':
        return { messages: [], verdict: 'trouble' };
      case 'rcode': {
        const flags = ((correct.flags ?? 0) & ~0xf) | m.rcode;
        const additionals = (correct.additionals ?? []).map((a) => (a.type === 'OPT' ? { ...a, extendedRcode: m.extended } : a));
        const p = { ...correct, flags, answers: [], questions: m.withQuestion ? correct.questions : [], additionals } as DecodedPacket;
        const full = ((m.extended << 4) | m.rcode) >>> 0;
        const hasOpt = additionals.some((a) => a.type === 'OPT');
        const effective = hasOpt ? full : m.rcode;
        // Without the question only an error rcode is taken (RFC 5452 9.1, dns-client.ts).
        const v: Verdict = effective === RCODE_NXDOMAIN && m.withQuestion ? 'nxdomain' : effective === 0 && m.withQuestion ? 'nodata' : 'trouble';
        return { messages: [dnsPacket.encode(p)], verdict: v };
      }
      case 'nodata':
        return reply({ ...correct, answers: [] });
      case 'spoof': {
        const poison = { ...correct, answers: [poisonAnswer(qname, qtype), ...(correct.answers ?? []).filter((a) => a.type === 'CNAME')] } as DecodedPacket;
        let spoofed: Buffer;
        if (m.how === 'id') {
          spoofed = dnsPacket.encode({ ...poison, answers: [poisonAnswer(qname, qtype)] });
          spoofed.writeUInt16BE(((query.id ?? 0) + 1 + (hash(qname) % 1000)) & 0xffff, 0);
        } else if (m.how === 'question') {
          spoofed = dnsPacket.encode({ ...poison, questions: [{ type: qtype as 'A', name: `x.${qname}`, class: 'IN' }], answers: [poisonAnswer(qname, qtype)] });
        } else {
          const otherType = qtype === 'TXT' ? 'MX' : 'TXT';
          spoofed = dnsPacket.encode({ ...poison, questions: [{ type: otherType, name: qname, class: 'IN' }], answers: [poisonAnswer(qname, qtype)] });
        }
        return { messages: m.then === 'answer' ? [spoofed, zoneBytes] : [spoofed], verdict: m.then === 'answer' ? verdict(correct) : 'trouble' };
      }
      case 'garbage': {
        const bytes = Buffer.from(m.bytes);
        // Some garbage starts with the right id, so only the decoder can tell.
        if (bytes.length >= 2) bytes.writeUInt16BE(query.id ?? 0, 0);
        return { messages: [bytes], verdict: 'trouble' };
      }
      case 'cut': {
        const at = Math.max(0, Math.min(zoneBytes.length - 1, Math.floor(zoneBytes.length * m.fraction)));
        return { messages: [zoneBytes.subarray(0, at)], verdict: 'trouble' };
      }
      case 'pointer-loop': {
        // The answer's owner name is a pointer to itself.
        const b = Buffer.alloc(12);
        zoneBytes.copy(b, 0, 0, 12);
        b.writeUInt16BE(0, 4);
        b.writeUInt16BE(1, 6);
        b.writeUInt16BE(0, 8);
        b.writeUInt16BE(0, 10);
        const rr = Buffer.from([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 66]);
        return { messages: [Buffer.concat([b, rr])], verdict: 'trouble' };
      }
      case 'counts': {
        const b = Buffer.from(zoneBytes);
        const offset = { qd: 4, an: 6, ns: 8, ar: 10 }[m.section];
        b.writeUInt16BE(Math.min(0xffff, b.readUInt16BE(offset) + m.extra), offset);
        return { messages: [b], verdict: 'trouble' };
      }
      case 'other-records': {
        const others: Answer[] = [
          { type: 'A', name: qtype === 'A' ? `other.${qname}` : qname, ttl: 60, class: 'IN', data: POISON_ADDRESS } as Answer,
          { type: 'TXT', name: qtype === 'TXT' ? `other.${qname}` : qname, ttl: 60, class: 'IN', data: [Buffer.from(POISON_TEXT)] } as Answer,
          poisonAnswer(`other.${qname}`, qtype),
          poisonAnswer(POISON_NAME, qtype),
        ];
        return reply({ ...correct, answers: m.keepCorrect ? [...others, ...(correct.answers ?? [])] : others });
      }
      case 'cname': {
        const hops = Math.max(1, m.hops);
        const names = Array.from({ length: hops }, (_, i) => `c${i}.${qname}`);
        const chain: Answer[] = [];
        let from = qname;
        for (const to of names) {
          chain.push({ type: 'CNAME', name: from, ttl: 60, class: 'IN', data: to } as Answer);
          from = to;
        }
        if (m.shape === 'loop') chain.push({ type: 'CNAME', name: from, ttl: 60, class: 'IN', data: qname } as Answer);
        const end = m.shape === 'chain' ? (correct.answers ?? []).filter((a) => a.type === qtype).map((a) => ({ ...a, name: from }) as Answer) : [];
        const p = { ...correct, answers: [...chain, ...end] } as DecodedPacket;
        return { messages: [dnsPacket.encode(p)], verdict: hops > 16 || m.shape === 'loop' ? 'trouble' : verdict(p) };
      }
      case 'replace': {
        const answers = m.replacement.type === qtype ? replacementAnswers(qname, m.replacement, m.ttl) : [];
        return this.sized(reply({ ...correct, answers: answers.length ? answers : (correct.answers ?? []) }, m.ad ? HEADER_AD : 0), transport);
      }
      case 'huge': {
        if (m.type !== qtype) return { messages: [zoneBytes], verdict: verdict(correct) };
        const answers: Answer[] = Array.from({ length: m.count }, (_, i) =>
          m.type === 'MX'
            ? ({ type: 'MX', name: qname, ttl: 60, class: 'IN', data: { exchange: `mx${i}.${qname}`, preference: i % 7 } } as Answer)
            : ({ type: 'TXT', name: qname, ttl: 60, class: 'IN', data: [Buffer.alloc(200, 0x61 + (i % 26))] } as Answer),
        );
        return this.sized(reply({ ...correct, answers }), transport);
      }
      case 'ttl':
        return reply({ ...correct, answers: (correct.answers ?? []).map((a) => ({ ...a, ttl: m.ttl }) as Answer) });
      case 'ad':
        return reply(correct, HEADER_AD);
      case 'tc': {
        if (transport === 'tcp') return { messages: [zoneBytes], verdict: verdict(correct) };
        const p = { ...correct, answers: m.udpRecords ? (correct.answers ?? []).slice(0, 1) : [], flags: (correct.flags ?? 0) | HEADER_TC } as DecodedPacket;
        const r = this.tcpReply(m.tcp, zoneBytes, correct, qname, qtype);
        return { messages: [dnsPacket.encode(p)], verdict: r.verdict, tcp: m.tcp };
      }
    }
  }

  /** A reply too large for one datagram goes out as TC (then whole over TCP, under 64 KiB). */
  private sized(r: Reply, transport: 'udp' | 'tcp'): Reply {
    const bytes = r.messages[0]!;
    if (bytes.length > 0xffff) return { messages: [], verdict: 'trouble' };
    if (transport === 'udp' && bytes.length > 60_000) {
      const b = Buffer.alloc(12);
      bytes.copy(b, 0, 0, 12);
      b.writeUInt16BE(b.readUInt16BE(2) | HEADER_TC, 2);
      b.writeUInt16BE(0, 4);
      b.writeUInt16BE(0, 6);
      b.writeUInt16BE(0, 8);
      b.writeUInt16BE(0, 10);
      return { messages: [b], verdict: 'trouble' };
    }
    return r;
  }

  private serveTcp(socket: net.Socket): void {
    if (this.closing) {
      socket.destroy();
      return;
    }
    this.sockets.add(socket);
    socket.unref();
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => {});
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
        const msg = pending.subarray(2, 2 + pending.readUInt16BE(0));
        pending = pending.subarray(2 + msg.length);
        void this.answer(Buffer.from(msg), 'tcp').then(
          (reply) => {
            if (!reply || socket.destroyed) return;
            for (const m of reply.messages) {
              // A message is framed unless it is a deliberately cut one (which already holds half a frame).
              if (reply.closeAfter) socket.write(m);
              else {
                const prefix = Buffer.alloc(2);
                prefix.writeUInt16BE(m.length);
                socket.write(Buffer.concat([prefix, m]));
              }
            }
            if (reply.closeAfter) socket.end();
          },
          () => socket.destroy(),
        );
      }
    });
  }
}

/** A hostile resolver in front of the zone on `zonePort`; names under `fuzzSuffix` are mutated. */
export async function startHostileDns(opts: { zonePort: number; fuzzSuffix: string }): Promise<HostileDns> {
  let lastError: unknown;
  for (let attempt = 0; attempt < BIND_ATTEMPTS; attempt++) {
    const udp = dgram.createSocket('udp4');
    await new Promise<void>((resolve, reject) => {
      udp.once('error', reject);
      udp.bind(0, LOOPBACK, () => resolve());
    });
    const port = udp.address().port;
    try {
      const tcp = await new Promise<net.Server>((resolve, reject) => {
        const server = net.createServer();
        server.once('error', reject);
        server.listen(port, LOOPBACK, () => resolve(server));
      });
      udp.unref();
      tcp.unref();
      return new Hostile(udp, tcp, port, opts.zonePort, lower(opts.fuzzSuffix));
    } catch (err) {
      lastError = err;
      await new Promise<void>((r) => udp.close(() => r()));
    }
  }
  throw new Error('hostile-dns: could not bind UDP+TCP on one loopback port', { cause: lastError });
}
