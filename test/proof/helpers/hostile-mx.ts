// A scriptable hostile MX for the outbound fuzz (fuzz-mx): a raw TCP server on its own loopback
// address that answers every stage of each session (greeting, EHLO/HELO, STARTTLS, MAIL, each
// RCPT, DATA, the end of data, anything else) with the reply its script gives, written as the
// script says (split across writes, dripped, followed by a close or cut halfway), and keeps a log
// of what it saw and said: the oracle the fuzz judges Posthorn's recorded outcomes against.
//
// A session is "in step" while every reply it wrote was exactly one well-framed reply (the
// client then reads each reply as the answer to the command it was written for). Once a reply
// was not (unsolicited extra replies, a '-' on the last line, an empty line, a reply over the
// client's size limit), which answer the client took for which command is no longer known, and
// the log says so.
import net from 'node:net';
import tls from 'node:tls';
import { testCert } from '../../helpers/test-keys.js';
import { listenOn } from '../../helpers/listen.js';

/** One reply as the script wants it written. */
export interface ReplySpec {
  /** Every byte of the reply, line ends included (extra unsolicited replies too). */
  bytes: Buffer;
  /** Written in this many pieces. */
  pieces: number;
  /** Pause between pieces (a slow drip, well inside the client's timeouts). */
  dripMs: number;
  /** After the reply: keep going, close the connection, or cut it halfway through the reply. */
  after: 'stay' | 'close' | 'cut-mid';
}

export interface SessionScript {
  /** 'drop': the connection is closed before any greeting. */
  greeting: ReplySpec | 'drop';
  ehlo: ReplySpec;
  helo: ReplySpec;
  starttls: ReplySpec;
  /** After a 2xx to STARTTLS: a real TLS session, garbage, or nothing (the MX stays in plaintext). */
  afterStarttls: 'tls' | 'garbage' | 'plain';
  /** Per transaction of the session (cycled). */
  mail: ReplySpec[];
  /** Per RCPT command of the session (cycled). */
  rcpt: ReplySpec[];
  data: ReplySpec[];
  eod: ReplySpec[];
  /** RSET, NOOP, QUIT and anything else. */
  other: ReplySpec;
  /** The connection is cut once this many message bytes arrived in the session's first DATA. */
  dataCut: number | null;
}

/** What a reply means, read as the client reads it (RFC 5321 4.2: the first digit decides). */
export interface ReplyRead {
  text: string;
  /** The first byte is '2' (for DATA: '2' or '3'). */
  positive: boolean;
  /** Written whole (not cut halfway). */
  whole: boolean;
  /** Exactly one well-framed reply: the client reads it as the answer to this command. */
  clean: boolean;
}

export interface Transaction {
  session: number;
  /** Order among all transactions of the MX's life. */
  seq: number;
  mailFrom: string;
  /** The email id in the VERP return path (bounces+<id>_<tag>@...). */
  emailId: string | null;
  mail: ReplyRead | null;
  rcpts: { address: string; reply: ReplyRead | null }[];
  data: ReplyRead | null;
  /** The end of data arrived. */
  ended: boolean;
  eod: ReplyRead | null;
  /** The session was in step from its start through this transaction's last reply. */
  inStep: boolean;
}

export interface SessionLog {
  id: number;
  inStep: boolean;
  transactions: Transaction[];
  /**
   * The RCPT TO addresses the session saw once out of step, in commands and inside what it took
   * for message text (out of step, the MX may read the client's next commands as a message).
   */
  recipientsOutOfStep: Set<string>;
}

/** Exactly one reply, framed as nodemailer frames it (lines split on LF; '<digits>-' continues). */
export function isCleanReply(bytes: Buffer): boolean {
  if (bytes.length === 0 || bytes.length > 900_000 || bytes[bytes.length - 1] !== 0x0a) return false;
  const lines = bytes.toString('latin1').split(/\r?\n/);
  lines.pop();
  if (lines.length === 0) return false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === '') return false;
    const continues = /^\d+-/.test(line);
    if (continues !== (i < lines.length - 1)) return false;
  }
  return true;
}

function readOf(spec: ReplySpec, forData = false): ReplyRead {
  const first = spec.bytes.length ? String.fromCharCode(spec.bytes[0]!) : '';
  const decoded = spec.bytes.toString('utf8');
  return {
    text: decoded.includes('\uFFFD') ? spec.bytes.toString('latin1') : decoded,
    positive: first === '2' || (forData && first === '3'),
    whole: spec.after !== 'cut-mid',
    clean: isCleanReply(spec.bytes) && spec.after !== 'cut-mid',
  };
}

const END_OF_DATA = Buffer.from('\r\n.\r\n');

export interface HostileMx {
  readonly host: string;
  readonly port: number;
  readonly sessions: SessionLog[];
  readonly transactions: Transaction[];
  /** Scripts for the connections from now on, in turn (cycled); open connections are cut. */
  setScripts(scripts: SessionScript[]): void;
  dropAll(): void;
  close(): Promise<void>;
}

export async function startHostileMx(opts: { host: string; port: number; name: string }): Promise<HostileMx> {
  let scripts: SessionScript[] = [];
  let next = 0;
  let seq = 0;
  const sessions: SessionLog[] = [];
  const transactions: Transaction[] = [];
  const sockets = new Set<net.Socket>();
  const { key, cert } = await testCert({ hostnames: [opts.name], ips: [opts.host] }, 'hostile');
  const secureContext = tls.createSecureContext({ key, cert });

  const server = net.createServer((raw) => {
    sockets.add(raw);
    raw.on('error', () => {});
    raw.once('close', () => sockets.delete(raw));
    if (!scripts.length) return void raw.destroy();
    const script = scripts[next++ % scripts.length]!;
    const log: SessionLog = { id: sessions.length, inStep: true, transactions: [], recipientsOutOfStep: new Set() };
    sessions.push(log);
    void runSession(raw, script, log);
  });

  async function runSession(raw: net.Socket, script: SessionScript, log: SessionLog): Promise<void> {
    let sock: net.Socket = raw;
    let buffered = Buffer.alloc(0);
    let waiting: (() => void) | null = null;
    let gone = false;
    let secured = false;
    const counts = { mail: 0, rcpt: 0, data: 0, eod: 0 };
    let dataBytes = 0;
    let dataCut = script.dataCut;
    let tx: Transaction | null = null;
    const onData = (c: Buffer) => {
      buffered = Buffer.concat([buffered, c]);
      waiting?.();
    };
    const onGone = () => {
      gone = true;
      waiting?.();
    };
    const attach = (s: net.Socket) => {
      s.on('data', onData);
      s.once('close', onGone);
      s.on('error', () => {});
    };
    attach(sock);
    const more = () => new Promise<void>((resolve) => (waiting = () => ((waiting = null), resolve())));
    const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

    /** Writes a reply as scripted; false once the connection is gone. */
    const say = async (spec: ReplySpec): Promise<boolean> => {
      if (!isCleanReply(spec.bytes) || spec.after === 'cut-mid') log.inStep = false;
      const bytes = spec.after === 'cut-mid' ? spec.bytes.subarray(0, Math.max(1, Math.floor(spec.bytes.length / 2))) : spec.bytes;
      const size = Math.ceil(bytes.length / spec.pieces) || 1;
      for (let at = 0; at < bytes.length; at += size) {
        if (gone) return false;
        if (at > 0 && spec.dripMs > 0) await pause(spec.dripMs);
        if (gone) return false;
        sock.write(bytes.subarray(at, at + size));
      }
      if (spec.after === 'cut-mid') {
        // Let the half reply reach the client before the reset.
        await new Promise<void>((resolve) => sock.write('', () => resolve()));
        sock.destroy();
        return false;
      }
      if (spec.after === 'close') {
        sock.end();
        return false;
      }
      return !gone;
    };
    const pick = (list: ReplySpec[], n: number) => list[n % list.length]!;
    const noteRecipients = (text: Buffer) => {
      if (log.inStep) return;
      for (const m of text.toString('latin1').matchAll(/RCPT TO:<([^>]*)>/gi)) log.recipientsOutOfStep.add(m[1]!);
    };
    const endTx = () => {
      if (!tx) return;
      tx.inStep = log.inStep;
      if (!log.inStep) for (const r of tx.rcpts) log.recipientsOutOfStep.add(r.address);
    };

    if (script.greeting === 'drop') return void sock.destroy();
    if (!(await say(script.greeting))) return;
    let mode: 'cmd' | 'data' = 'cmd';
    for (;;) {
      if (gone) return endTx();
      if (mode === 'data') {
        const at = buffered.indexOf(END_OF_DATA);
        if (dataCut !== null && dataBytes + (at < 0 ? buffered.length : at) > dataCut) {
          endTx();
          return void sock.destroy();
        }
        if (at < 0) {
          // keep the tail: the terminator may be split across chunks
          const keep = Math.min(buffered.length, END_OF_DATA.length - 1);
          noteRecipients(buffered.subarray(0, buffered.length - keep));
          dataBytes += buffered.length - keep;
          buffered = buffered.subarray(buffered.length - keep);
          await more();
          continue;
        }
        noteRecipients(buffered.subarray(0, at));
        buffered = buffered.subarray(at + END_OF_DATA.length);
        mode = 'cmd';
        dataCut = null;
        const spec = pick(script.eod, counts.eod++);
        if (tx) {
          tx.ended = true;
          tx.eod = readOf(spec);
        }
        const ok = await say(spec);
        endTx();
        tx = null;
        if (!ok) return;
        continue;
      }
      const eol = buffered.indexOf(0x0a);
      if (eol < 0) {
        await more();
        continue;
      }
      const line = buffered.subarray(0, eol).toString('latin1').replace(/\r$/, '');
      buffered = buffered.subarray(eol + 1);
      const verb = line.split(' ')[0]!.replace(/:.*/, '').toUpperCase();
      let spec: ReplySpec;
      if (verb === 'EHLO') spec = script.ehlo;
      else if (verb === 'HELO') spec = script.helo;
      else if (verb === 'STARTTLS' && !secured) {
        const ok = await say(script.starttls);
        if (!ok) return;
        if (!script.starttls.bytes.subarray(0, 1).equals(Buffer.from('2'))) continue;
        if (script.afterStarttls === 'garbage') {
          sock.end('this is not a TLS handshake\r\n');
          return;
        }
        if (script.afterStarttls === 'tls') {
          sock.off('data', onData);
          sock.off('close', onGone);
          const secure = new tls.TLSSocket(sock, { isServer: true, secureContext });
          sockets.add(secure);
          secure.once('close', () => sockets.delete(secure));
          sock.once('close', () => secure.destroy());
          buffered = Buffer.alloc(0);
          sock = secure;
          secured = true;
          attach(secure);
        }
        continue;
      } else if (verb === 'MAIL') {
        endTx();
        const m = /<([^>]*)>/.exec(line);
        const mailFrom = m?.[1] ?? '';
        spec = pick(script.mail, counts.mail++);
        tx = {
          session: log.id,
          seq: seq++,
          mailFrom,
          emailId: /^bounces\+(em_[0-9a-z]+)_/i.exec(mailFrom)?.[1] ?? null,
          mail: readOf(spec),
          rcpts: [],
          data: null,
          ended: false,
          eod: null,
          inStep: log.inStep,
        };
        log.transactions.push(tx);
        transactions.push(tx);
      } else if (verb === 'RCPT') {
        spec = pick(script.rcpt, counts.rcpt++);
        const address = /<([^>]*)>/.exec(line)?.[1] ?? line;
        if (!log.inStep) log.recipientsOutOfStep.add(address);
        tx?.rcpts.push({ address, reply: readOf(spec) });
      } else if (verb === 'DATA') {
        spec = pick(script.data, counts.data++);
        const read = readOf(spec, true);
        if (tx) tx.data = read;
        if (read.positive) {
          mode = 'data';
          dataBytes = 0;
          // The message may be empty: ".\r\n" right away ends it.
          buffered = Buffer.concat([Buffer.from('\r\n'), buffered]);
        }
      } else {
        spec = script.other;
      }
      if (!(await say(spec))) return endTx();
      if (verb === 'QUIT') {
        sock.end();
        return endTx();
      }
    }
  }

  server.on('error', () => {});
  const port = await listenOn(server, opts.port, opts.host);
  const dropAll = () => {
    for (const s of sockets) s.destroy();
  };
  return {
    host: opts.host,
    port,
    sessions,
    transactions,
    setScripts(s) {
      dropAll();
      scripts = s;
      next = 0;
    },
    dropAll,
    async close() {
      dropAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
