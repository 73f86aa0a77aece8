// A misbehaving MX for the fault proofs: a TCP server on its own loopback address that
// either pipes straight through to a good SMTP sink (fault 'none') or plays the front half
// of an SMTP session itself and misbehaves at one chosen point, bridging to the good sink
// for everything it does not break. So "what the good sink received" is the one count of
// what really got through, whatever the fault.
//
// The front half never offers PIPELINING, so the client sends one command at a time and
// the byte stream can be followed line by line (RFC 5321 4.1, RFC 2920 not in play).
import { EventEmitter, once } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import { testCert } from '../../helpers/test-keys.js';
import { listenOn } from '../../helpers/listen.js';

export type MxFault =
  /** Transparent TCP pipe to the good sink (STARTTLS and all, end to end). */
  | 'none'
  /** Accepts the TCP connection and never sends the 220 greeting. */
  | 'silent'
  /** 421 instead of the greeting, then closes (RFC 5321 3.8). */
  | '421-greeting'
  /** 421 in reply to MAIL FROM, then closes: nothing of the message was sent. */
  | '421-mail'
  /** The whole message goes to the sink, but its end (the final dot) is answered 421 and the sink never gets the dot. */
  | '421-data'
  /** The DATA command is never answered; the connection stays open and silent. */
  | 'stall-at-data'
  /** The whole message reaches the sink (which keeps it) but its 250 never comes back. */
  | 'stall-after-dot'
  /** The connection is cut after `dropAfterBytes` bytes of the message. */
  | 'drop-mid-data'
  /** The whole message reaches the sink; the connection is cut as its 250 comes back (the 250 is lost). */
  | 'drop-after-dot'
  /**
   * A tarpit: the whole message reaches the sink, then instead of its 250 the MX dribbles
   * "250-" continuation lines, one every 200 ms, forever: the reply never ends, yet the
   * socket is never idle long enough for an inactivity timeout.
   */
  | 'drip-after-dot'
  /** Like stall-after-dot, until release() answers every held session with the given reply. */
  | 'hold-after-dot'
  /** STARTTLS offered; after "220 Ready" it sends garbage instead of a TLS handshake. */
  | 'tls-garbage'
  /** STARTTLS offered; the handshake presents a self-signed certificate nobody trusts. */
  | 'tls-bad-cert';

export interface FaultyMx {
  readonly host: string;
  readonly port: number;
  /**
   * Applies to connections opened from now on; open ones are cut (the MX changed: a client's
   * idle pooled session must not carry the next message past the new fault), unless keepOpen,
   * in which case their next transactions meet the new fault at DATA.
   */
  setFault(fault: MxFault, opts?: { dropAfterBytes?: number; keepOpen?: boolean }): void;
  /** Connections that reached their fault so far. */
  readonly faultsHit: number;
  /** Connections held open right now by a stall (silent, stall-*, hold-after-dot). */
  readonly stalled: number;
  /** MAIL FROM commands received in plaintext while a TLS fault was set. */
  readonly plaintextMailCommands: number;
  /** Resolves once faultsHit >= n (rejects after timeoutMs). */
  waitForFaults(n: number, timeoutMs?: number): Promise<void>;
  /** hold-after-dot: answers every held session with `reply` (one or more lines, the last one final). */
  release(replyLines?: string[]): number;
  /** Cuts every connection (a stalled client would otherwise hold the server open). */
  dropAll(): void;
  close(): Promise<void>;
}

const TLS_FAULTS = new Set<MxFault>(['tls-garbage', 'tls-bad-cert']);
const DEFAULT_WAIT_MS = 15_000;
const END_OF_DATA = Buffer.from('\r\n.\r\n');
const DRIP_INTERVAL_MS = 200;

export async function startFaultyMx(opts: {
  /** Loopback address to bind (its own, e.g. 127.0.0.6), and the port (the outbound port is global). */
  host: string;
  port: number;
  /** The MX name: greeting, and the name in the bad certificate. */
  name: string;
  /** The good sink everything that gets through is bridged to. */
  upstream: { host: string; port: number };
}): Promise<FaultyMx> {
  let fault: MxFault = 'none';
  let dropAfterBytes = 200;
  let faultsHit = 0;
  let stalled = 0;
  let plaintextMailCommands = 0;
  const events = new EventEmitter();
  const sockets = new Set<net.Socket>();
  const held = new Set<{ resume(lines: string[]): void }>();
  const badCert = testCert({ hostnames: [opts.name], ips: [opts.host] }, 'untrusted');
  badCert.catch(() => {});

  const hit = () => {
    faultsHit++;
    events.emit('hit');
  };
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on('error', () => {});
    s.once('close', () => sockets.delete(s));
  };
  const holdOpen = (client: net.Socket) => {
    stalled++;
    client.once('close', () => stalled--);
  };

  const server = net.createServer((client) => {
    track(client);
    const f = fault;
    const dropAfter = dropAfterBytes;
    if (f === 'none') {
      const up = net.connect(opts.upstream.port, opts.upstream.host);
      track(up);
      client.pipe(up);
      up.pipe(client);
      client.once('close', () => up.destroy());
      up.once('close', () => client.destroy());
      return;
    }
    if (f === 'silent') {
      hit();
      holdOpen(client);
      return;
    }
    if (f === '421-greeting') {
      hit();
      client.end(`421 4.3.2 ${opts.name} Service not available, closing transmission channel\r\n`);
      return;
    }
    client.write(`220 ${opts.name} ESMTP faulty-mx\r\n`);
    frontHalf(client, f, dropAfter, false);
  });

  /**
   * Plays EHLO and (for TLS faults, before TLS) STARTTLS; bridges to the sink at MAIL FROM.
   * `secured`: this is the session inside our (bad-certificate) TLS, so no STARTTLS again.
   */
  function frontHalf(client: net.Socket, f: MxFault, dropAfter: number, secured: boolean): void {
    let buffered = Buffer.alloc(0);
    let helo = 'client';
    let done = false;
    const offerTls = TLS_FAULTS.has(f) && !secured;
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        if (done) return;
        const eol = buffered.indexOf('\r\n');
        if (eol < 0) return;
        const line = buffered.subarray(0, eol).toString('latin1');
        buffered = buffered.subarray(eol + 2);
        const verb = line.split(' ')[0]!.toUpperCase();
        if (verb === 'EHLO' || verb === 'HELO') {
          helo = line.slice(5).trim() || helo;
          const ext = ['8BITMIME', 'SMTPUTF8', 'ENHANCEDSTATUSCODES', ...(offerTls ? ['STARTTLS'] : []), 'HELP'];
          client.write(verb === 'HELO' ? `250 ${opts.name}\r\n` : [`${opts.name} Hello ${helo}`, ...ext].map((l, i, a) => `250${i === a.length - 1 ? ' ' : '-'}${l}\r\n`).join(''));
        } else if (verb === 'STARTTLS' && offerTls) {
          done = true;
          client.off('data', onData);
          hit();
          client.write('220 2.0.0 Ready to start TLS\r\n');
          if (f === 'tls-garbage') {
            // Not a ServerHello: the client's handshake must fail.
            client.end('HTTP/1.1 400 Bad Request\r\nthis is not TLS\r\n\r\n');
          } else {
            void badCert.then(({ key, cert }) => {
              const secure = new tls.TLSSocket(client, { isServer: true, secureContext: tls.createSecureContext({ key, cert }) });
              secure.on('error', () => client.destroy());
              // A client that accepts any certificate (OPPORTUNISTIC, RFC 7435) goes on inside
              // this TLS session; RFC 3207 4.2: it starts over with EHLO, no new greeting.
              frontHalf(secure, f, dropAfter, true);
            });
          }
          return;
        } else if (verb === 'STARTTLS') {
          client.write('502 5.5.1 STARTTLS not offered\r\n');
        } else if (verb === 'MAIL') {
          if (f === '421-mail') {
            done = true;
            hit();
            client.end('421 4.3.2 Too busy, closing transmission channel\r\n');
            return;
          }
          if (TLS_FAULTS.has(f) && !secured) plaintextMailCommands++;
          done = true;
          client.off('data', onData);
          bridge(client, f, dropAfter, helo, Buffer.concat([Buffer.from(`${line}\r\n`, 'latin1'), buffered]));
          return;
        } else if (verb === 'RSET' || verb === 'NOOP') {
          client.write('250 2.0.0 OK\r\n');
        } else if (verb === 'QUIT') {
          done = true;
          client.end('221 2.0.0 Bye\r\n');
          return;
        } else {
          client.write('502 5.5.2 Command not recognized\r\n');
        }
      }
    };
    client.on('data', onData);
  }

  /** Opens the sink session (its own greeting and EHLO, in plaintext), then relays with the fault applied. */
  function bridge(client: net.Socket, f: MxFault, dropAfter: number, helo: string, pending: Buffer): void {
    client.pause();
    let queued = pending;
    const collect = (c: Buffer) => (queued = Buffer.concat([queued, c]));
    client.on('data', collect);
    client.resume();
    const up = net.connect(opts.upstream.port, opts.upstream.host);
    track(up);
    client.once('close', () => up.destroy());
    up.once('close', () => client.destroy());
    let greeting = '';
    let phase: 'greeting' | 'ehlo' = 'greeting';
    const handshake = (chunk: Buffer) => {
      greeting += chunk.toString('latin1');
      for (;;) {
        const eol = greeting.indexOf('\r\n');
        if (eol < 0) return;
        const line = greeting.slice(0, eol);
        greeting = greeting.slice(eol + 2);
        if (phase === 'greeting' && /^220 /.test(line)) {
          phase = 'ehlo';
          up.write(`EHLO ${helo}\r\n`);
        } else if (phase === 'ehlo' && /^250 /.test(line)) {
          up.off('data', handshake);
          client.off('data', collect);
          relay(client, up, f, dropAfter, queued);
          return;
        } else if (!/^2\d\d[- ]/.test(line)) {
          client.destroy();
          return;
        }
      }
    };
    up.on('data', handshake);
  }

  function relay(client: net.Socket, up: net.Socket, f: MxFault, dropAfter: number, first: Buffer): void {
    let state: 'cmd' | 'data' | 'stalled' = 'cmd';
    let line = Buffer.alloc(0);
    let tail = Buffer.alloc(0);
    let dataBytes = 0;
    let swallowReplies = false;
    /**
     * hold-after-dot: the sink's reply to the held message is dropped whenever it comes, before
     * or after release() answers in its place. Let through after release(), it would be an extra
     * line, and every later reply of the session would answer the command before it.
     */
    let heldReplyPending = false;
    let upstreamLine = Buffer.alloc(0);
    let dropOnReply = false;
    up.on('data', (c: Buffer) => {
      if (dropOnReply) {
        up.destroy();
        client.destroy();
        return;
      }
      if (swallowReplies) return;
      if (heldReplyPending) {
        upstreamLine = Buffer.concat([upstreamLine, c]);
        const final = /(?:^|\r\n)\d{3} [^\r\n]*\r\n/.exec(upstreamLine.toString('latin1'));
        if (!final) return;
        c = upstreamLine.subarray(final.index + final[0].length);
        upstreamLine = Buffer.alloc(0);
        heldReplyPending = false;
        if (!c.length) return;
      }
      client.write(c);
    });

    const endOfData = (chunk: Buffer): number => {
      // Where the terminator ends in (tail + chunk), mapped back into chunk; -1 if not there.
      const joined = Buffer.concat([tail, chunk]);
      const at = joined.indexOf(END_OF_DATA);
      tail = joined.subarray(Math.max(0, joined.length - (END_OF_DATA.length - 1)));
      return at < 0 ? -1 : at + END_OF_DATA.length - (joined.length - chunk.length);
    };

    const feed = (chunk: Buffer): void => {
      while (chunk.length) {
        if (state === 'stalled') return;
        if (state === 'cmd') {
          const eol = Buffer.concat([line, chunk]).indexOf('\r\n');
          if (eol < 0) {
            line = Buffer.concat([line, chunk]);
            return;
          }
          const all = Buffer.concat([line, chunk]);
          const cmd = all.subarray(0, eol + 2);
          chunk = all.subarray(eol + 2);
          line = Buffer.alloc(0);
          if (/^DATA\r\n$/i.test(cmd.toString('latin1'))) {
            // Each transaction meets the fault set now (a session kept open by setFault's keepOpen changes with it).
            f = fault;
            dropAfter = dropAfterBytes;
            if (f === 'stall-at-data') {
              hit();
              holdOpen(client);
              state = 'stalled';
              return;
            }
            state = 'data';
            tail = Buffer.from('\r\n'); // the message may be empty: ".\r\n" right away ends it
            dataBytes = 0;
          }
          up.write(cmd);
          continue;
        }
        // state === 'data'
        if (f === 'drop-mid-data' && dataBytes + chunk.length > dropAfter) {
          up.write(chunk.subarray(0, dropAfter - dataBytes));
          hit();
          up.destroy();
          client.destroy();
          state = 'stalled';
          return;
        }
        const end = endOfData(chunk);
        if (end < 0) {
          dataBytes += chunk.length;
          up.write(chunk);
          return;
        }
        const body = chunk.subarray(0, end);
        chunk = chunk.subarray(end);
        if (f === '421-data') {
          // Everything but the final ".\r\n": the sink never completes the message.
          up.write(body.subarray(0, body.length - 3));
          hit();
          up.destroy();
          client.end('421 4.3.0 Local error in processing, closing transmission channel\r\n');
          state = 'stalled';
          return;
        }
        up.write(body);
        state = 'cmd';
        if (f === 'drop-after-dot') {
          hit();
          dropOnReply = true;
          state = 'stalled';
          return;
        }
        if (f === 'stall-after-dot' || f === 'hold-after-dot' || f === 'drip-after-dot') {
          if (f === 'hold-after-dot') heldReplyPending = true;
          else swallowReplies = true;
          hit();
          holdOpen(client);
          if (f === 'drip-after-dot') {
            const drip = setInterval(() => client.write('250-still working on it\r\n'), DRIP_INTERVAL_MS);
            client.once('close', () => clearInterval(drip));
          }
          if (f === 'stall-after-dot' || f === 'drip-after-dot') {
            state = 'stalled';
            return;
          }
          // Held: the sink's 250 is swallowed; release() answers instead and the session goes on.
          const entry = {
            resume(lines: string[]) {
              held.delete(entry);
              client.write(lines.map((l) => `${l}\r\n`).join(''));
            },
          };
          held.add(entry);
          state = 'stalled';
          const rest = chunk;
          const later: Buffer[] = [rest];
          const waiting = (c: Buffer) => later.push(c);
          client.on('data', waiting);
          const resume = entry.resume;
          entry.resume = (lines) => {
            resume(lines);
            client.off('data', waiting);
            state = 'cmd';
            for (const c of later) feed(c);
          };
          return;
        }
      }
    };
    client.on('data', (c: Buffer) => feed(c));
    feed(first);
  }

  server.on('error', () => {});
  const port = await listenOn(server, opts.port, opts.host);

  return {
    host: opts.host,
    port,
    setFault(f, o = {}) {
      fault = f;
      if (!o.keepOpen) for (const s of sockets) s.destroy();
      if (o.dropAfterBytes !== undefined) dropAfterBytes = o.dropAfterBytes;
    },
    get faultsHit() {
      return faultsHit;
    },
    get stalled() {
      return stalled;
    },
    get plaintextMailCommands() {
      return plaintextMailCommands;
    },
    async waitForFaults(n, timeoutMs = DEFAULT_WAIT_MS) {
      if (faultsHit >= n) return;
      const ac = new AbortController();
      const timer = setTimeout(() => ac.abort(), timeoutMs);
      try {
        while (faultsHit < n) await once(events, 'hit', { signal: ac.signal });
      } catch (err) {
        if (ac.signal.aborted) throw new Error(`faulty MX: expected ${n} fault(s) within ${timeoutMs} ms, got ${faultsHit}`);
        throw err;
      } finally {
        clearTimeout(timer);
      }
    },
    release(replyLines = ['250 2.0.0 Ok: queued']) {
      const all = [...held];
      for (const h of all) h.resume(replyLines);
      return all.length;
    },
    dropAll() {
      for (const s of sockets) s.destroy();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
