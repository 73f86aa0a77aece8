// A hostile HTTP(S) server for the fuzz-https proof: raw sockets on 127.0.0.1 port 0 (one plain
// listener, one that speaks TLS), whose answer to each request fast-check wrote
// (https-arbitraries.ts): any bytes as the head (every status class, 1xx before or instead of
// the answer, odd, duplicate, huge and invalid headers), bodies of any length and content with
// honest or lying framing, endless bodies, answers written before the request body is read,
// dripped or cut anywhere, silence, resets; and on the TLS listener a good certificate, one for
// another name, an untrusted one, garbage instead of a handshake, a close or silence. It reads
// each request's head before it answers, so every exchange is attributed (Host, path, the
// webhook's event id header), and it logs what it answered and how much it wrote, so the proof
// can tell what the client may legitimately have concluded.
import net from 'node:net';
import tls from 'node:tls';

export type TlsMode = 'good' | 'wrong-name' | 'untrusted' | 'garbage' | 'close' | 'silent';

export interface Answer {
  /** What the TLS listener does with a connection this answer opens (the plain listener ignores it). */
  tls: TlsMode;
  /** Answer once the request's head is read, or once its whole body is. */
  when: 'after-head' | 'after-body';
  /** answer: write `bytes` (then `stream`); hang: never answer; reset / close: end the connection instead. */
  action: 'answer' | 'hang' | 'reset' | 'close';
  /** Everything a finite answer writes: interim 1xx heads, the head, the body. */
  bytes: Buffer;
  /** After `bytes`, a body that never ends (until the client goes, or STREAM_CAP_BYTES). */
  stream: null | { chunked: boolean };
  /** The final status as written, when its status line is well-formed (the client may read it). */
  status: number | null;
  /** Head and framing well-formed and honest, nothing cut: the client owes the right conclusion. */
  clean: boolean;
  /** Leaves bytes behind on the connection that no request asked for (a length that lies short, an extra answer). */
  desync: boolean;
  /** Destroy the connection after writing this many bytes of the answer. */
  cutAt: number | null;
  pieces: number;
  dripMs: number;
  after: 'stay' | 'close' | 'reset';
  /** A short name for the stats. */
  label: string;
  /** The policy text in the body, when the body is one (MTA-STS). */
  policy?: string;
  /** The body as served, when finite (how large a policy really was). */
  bodyBytes?: number;
  contentType?: string | null;
  /** In the log: the length of `bytes`, which keeps only their start (a log of megabyte answers would be the memory the proof measures). */
  size?: number;
}

export interface Exchange {
  conn: number;
  tls: TlsMode | null;
  sni: string | null;
  method: string;
  path: string;
  host: string;
  headers: Record<string, string>;
  answer: Answer;
  /** The connection was out of step before this exchange (an earlier answer left bytes behind). */
  outOfStep: boolean;
  /** Bytes of the answer written. */
  written: number;
  /** The connection closed before the server was done writing (the client went). */
  clientWent: boolean;
  /** An endless body reached STREAM_CAP_BYTES: the client never stopped reading. */
  streamCapped: boolean;
}

export interface Connection {
  id: number;
  tls: TlsMode | null;
  sni: string | null;
  /** TLS connections: whether the handshake completed. */
  handshake: boolean;
  exchanges: Exchange[];
}

export interface HostileHttp {
  readonly httpPort: number;
  readonly httpsPort: number;
  readonly connections: Connection[];
  readonly exchanges: Exchange[];
  /** The answers for what comes next, taken in turn (a connection's first request takes the one its TLS mode came from). */
  setAnswers(answers: Answer[]): void;
  /** TLS contexts: a certificate the client trusts for the names it asks, one for another name, one nobody trusts. */
  setCertificates(certs: { good: { key: string; cert: string }; wrongName: { key: string; cert: string }; untrusted: { key: string; cert: string } }): void;
  dropAll(): void;
  close(): Promise<void>;
}

/** An endless body stops here if the client never stops reading: far past every cap Posthorn has. */
export const STREAM_CAP_BYTES = 24 * 1024 * 1024;
const MAX_HEAD_BYTES = 64 * 1024;
const STREAM_CHUNK = Buffer.alloc(16 * 1024, 0x61);
/** A host name in a ClientHello (its SNI), read without a TLS stack: the names the proof uses. */
const SNI_IN_HELLO = /(?:mta-sts|reports|hook)[a-z0-9.-]*\.test/;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

export async function startHostileHttp(): Promise<HostileHttp> {
  const connections: Connection[] = [];
  const exchanges: Exchange[] = [];
  const sockets = new Set<net.Socket>();
  let answers: Answer[] = [];
  let next = 0;
  let contexts: Record<'good' | 'wrong-name' | 'untrusted', tls.SecureContext> | null = null;
  const take = (): Answer => answers[next++ % answers.length]!;

  function track(s: net.Socket): void {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
  }

  function serve(sock: net.Socket, conn: Connection, first: Answer, raw: net.Socket = sock): void {
    // A TLS socket cannot send a TCP reset itself: the socket under it does.
    const reset = () => (raw.destroyed ? sock.destroy() : raw.resetAndDestroy());
    let buffered = Buffer.alloc(0);
    let wake: (() => void) | null = null;
    let gone = false;
    let outOfStep = false;
    sock.on('data', (c: Buffer) => {
      buffered = Buffer.concat([buffered, c]);
      wake?.();
    });
    sock.on('close', () => {
      gone = true;
      wake?.();
    });
    const more = () =>
      new Promise<void>((resolve) => {
        wake = () => {
          wake = null;
          resolve();
        };
      });
    const write = (b: Buffer): Promise<boolean> =>
      new Promise((resolve) => {
        if (gone || sock.destroyed) return resolve(false);
        const ok = sock.write(b, (err) => {
          if (err) resolve(false);
          else if (ok) resolve(true);
        });
        if (!ok) sock.once('drain', () => resolve(!gone));
      });

    async function answer(a: Answer, ex: Exchange): Promise<boolean> {
      if (a.action === 'hang') return false;
      if (a.action === 'reset') {
        reset();
        return false;
      }
      if (a.action === 'close') {
        sock.end();
        return false;
      }
      const limit = a.cutAt ?? Infinity;
      const bytes = a.bytes.subarray(0, Math.min(a.bytes.length, limit));
      const pieces = Math.max(1, Math.min(a.pieces, bytes.length));
      const size = Math.ceil(bytes.length / pieces) || 0;
      for (let at = 0; at < bytes.length; at += size) {
        if (!(await write(bytes.subarray(at, at + size)))) {
          ex.clientWent = true;
          return false;
        }
        ex.written += Math.min(size, bytes.length - at);
        if (a.dripMs > 0 && at + size < bytes.length) await sleep(a.dripMs);
      }
      if (a.cutAt !== null && a.cutAt <= a.bytes.length) {
        sock.destroy();
        return false;
      }
      if (a.stream) {
        for (;;) {
          if (ex.written >= STREAM_CAP_BYTES) {
            ex.streamCapped = true;
            sock.destroy();
            return false;
          }
          const chunk = a.stream.chunked ? Buffer.concat([Buffer.from(`${STREAM_CHUNK.length.toString(16)}\r\n`), STREAM_CHUNK, Buffer.from('\r\n')]) : STREAM_CHUNK;
          if (!(await write(chunk))) {
            ex.clientWent = true;
            return false;
          }
          ex.written += chunk.length;
          if (a.cutAt !== null && ex.written >= a.cutAt) {
            sock.destroy();
            return false;
          }
          if (a.dripMs > 0) await sleep(a.dripMs);
        }
      }
      if (a.after === 'close') {
        sock.end();
        return false;
      }
      if (a.after === 'reset') {
        reset();
        return false;
      }
      return true;
    }

    void (async () => {
      let a: Answer | null = first;
      for (;;) {
        // The request's head.
        let headEnd: number;
        while ((headEnd = buffered.indexOf('\r\n\r\n')) < 0) {
          if (gone || buffered.length > MAX_HEAD_BYTES) return;
          await more();
        }
        const lines = buffered.subarray(0, headEnd).toString('latin1').split('\r\n');
        buffered = buffered.subarray(headEnd + 4);
        const [method = '', path = ''] = lines[0]!.split(' ');
        const headers: Record<string, string> = {};
        for (const l of lines.slice(1)) {
          const colon = l.indexOf(':');
          if (colon > 0) headers[l.slice(0, colon).trim().toLowerCase()] = l.slice(colon + 1).trim();
        }
        const length = Number(headers['content-length'] ?? 0) || 0;
        const current: Answer = a ?? take();
        a = null;
        const logged: Answer = { ...current, bytes: Buffer.from(current.bytes.subarray(0, 200)), size: current.bytes.length };
        const ex: Exchange = { conn: conn.id, tls: conn.tls, sni: conn.sni, method, path, host: (headers.host ?? '').replace(/:\d+$/, '').toLowerCase(), headers, answer: logged, outOfStep, written: 0, clientWent: false, streamCapped: false };
        conn.exchanges.push(ex);
        exchanges.push(ex);
        const readBody = async () => {
          while (buffered.length < length) {
            if (gone) return false;
            await more();
          }
          buffered = buffered.subarray(length);
          return true;
        };
        if (current.when === 'after-body' && !(await readBody())) return;
        const stays = await answer(current, ex);
        if (current.desync) outOfStep = true;
        if (current.action === 'hang') {
          // Held until the client gives up; whatever else comes on this connection is not read.
          return;
        }
        if (!stays) return;
        if (current.when === 'after-head' && !(await readBody())) return;
      }
    })();
  }

  const plain = net.createServer((sock) => {
    track(sock);
    const conn: Connection = { id: connections.length, tls: null, sni: null, handshake: false, exchanges: [] };
    connections.push(conn);
    serve(sock, conn, take());
  });

  const secure = net.createServer((raw) => {
    track(raw);
    const first = take();
    const conn: Connection = { id: connections.length, tls: first.tls, sni: null, handshake: false, exchanges: [] };
    connections.push(conn);
    if (first.tls === 'garbage' || first.tls === 'close' || first.tls === 'silent' || !contexts) {
      raw.once('data', (hello: Buffer) => {
        conn.sni = SNI_IN_HELLO.exec(hello.toString('latin1'))?.[0] ?? null;
        if (first.tls === 'garbage') raw.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
        else if (first.tls === 'close' || !contexts) raw.destroy();
        // silent: the handshake never gets an answer
      });
      return;
    }
    const ctx = contexts[first.tls];
    const s = new tls.TLSSocket(raw, {
      isServer: true,
      secureContext: ctx,
      SNICallback: (name, cb) => {
        conn.sni = name.toLowerCase();
        cb(null, ctx);
      },
    });
    track(s);
    raw.once('close', () => s.destroy());
    s.once('secure', () => {
      conn.handshake = true;
    });
    serve(s, conn, first, raw);
  });

  const listen = (server: net.Server) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port));
    });
  const httpPort = await listen(plain);
  const httpsPort = await listen(secure);
  plain.on('error', () => {});
  secure.on('error', () => {});
  const dropAll = () => {
    for (const s of sockets) s.destroy();
  };
  return {
    httpPort,
    httpsPort,
    connections,
    exchanges,
    setAnswers(list) {
      answers = list;
      next = 0;
    },
    setCertificates(certs) {
      contexts = {
        good: tls.createSecureContext(certs.good),
        'wrong-name': tls.createSecureContext(certs.wrongName),
        untrusted: tls.createSecureContext(certs.untrusted),
      };
    },
    dropAll,
    async close() {
      dropAll();
      await Promise.all([plain, secure].map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    },
  };
}
