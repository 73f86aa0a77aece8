// Minimal SMTP receiver (RFC 5321) for benchmarks only.
//
// smtp-server holds every greeting back by 100 ms (early-talker detection) and
// does per-command work a benchmark does not need, which would make it the
// bottleneck when measuring a fast sender. This one answers at once, supports
// PIPELINING (RFC 2920) by answering every command of a chunk in one write,
// counts messages and throws their bodies away. No TLS, no auth, no relay
// rules: never expose it beyond 127.0.0.1.
import net from 'node:net';

export interface FastSink {
  readonly port: number;
  /** Messages accepted (250 after DATA) so far. */
  readonly received: number;
  /** Resolves once `received >= n`. */
  onCount(n: number): Promise<void>;
  close(): Promise<void>;
}

const HOST = '127.0.0.1';
const SERVER_NAME = 'fast-sink.bench.test';
// Advertised with SIZE (RFC 1870) and checked against MAIL's SIZE= parameter.
// A concrete figure rather than "SIZE 0" (= no limit), which some clients misread.
const MAX_MESSAGE_SIZE_BYTES = 50 * 1024 * 1024;
// RFC 5321 4.5.3.1.4 allows 512 octets per command line; extensions (RFC 1869
// parameters, SMTPUTF8 addresses) push real lines further. Anything longer
// without a CRLF is not SMTP and must not grow the buffer without bound.
const MAX_COMMAND_LINE_BYTES = 4096;

const CRLF = Buffer.from('\r\n');
// End of DATA (RFC 5321 4.1.1.4): a line holding a single dot. Only the exact
// CRLF.CRLF sequence counts, never a bare-LF variant (SMTP smuggling).
const DATA_END = Buffer.from('\r\n.\r\n');
const DATA_END_TAIL_BYTES = DATA_END.length - 1;

/**
 * Finds the end-of-data marker in a stream of DATA chunks. The scanner keeps
 * the last bytes seen (starting as the CRLF that ended the DATA command, so an
 * empty message is a bare ".\r\n"), which catches a marker split across
 * chunks without copying whole chunks. Exported for tests.
 */
export class DataEndScanner {
  private tail: Buffer = CRLF;

  reset(): void {
    this.tail = CRLF;
  }

  /** Index in `chunk` just past the marker, or -1 if the whole chunk is body. */
  push(chunk: Buffer): number {
    // A marker straddling the boundary ends within the first 4 bytes of the
    // chunk, so it always precedes one found wholly inside the chunk.
    const seam = Buffer.concat([this.tail, chunk.subarray(0, DATA_END_TAIL_BYTES)]);
    const atSeam = seam.indexOf(DATA_END);
    if (atSeam !== -1) return atSeam + DATA_END.length - this.tail.length;
    const inside = chunk.indexOf(DATA_END);
    if (inside !== -1) return inside + DATA_END.length;
    if (chunk.length >= DATA_END_TAIL_BYTES) {
      // Copy so the tail does not pin the whole chunk in memory.
      this.tail = Buffer.from(chunk.subarray(chunk.length - DATA_END_TAIL_BYTES));
    } else {
      const joined = Buffer.concat([this.tail, chunk]);
      this.tail = joined.subarray(Math.max(0, joined.length - DATA_END_TAIL_BYTES));
    }
    return -1;
  }
}

/**
 * Listens on 127.0.0.1 on a free port, and on the same port of each of `extraHosts` (other
 * loopback addresses: several MX hosts, one counter).
 */
export function startFastSink(opts: { extraHosts?: string[] } = {}): Promise<FastSink> {
  let received = 0;
  const waiters: { n: number; resolve: () => void }[] = [];
  const sockets = new Set<net.Socket>();

  const messageAccepted = (): void => {
    received++;
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (received >= waiters[i].n) {
        waiters[i].resolve();
        waiters.splice(i, 1);
      }
    }
  };

  const handler = (socket: net.Socket): void => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    // Resets from clients that vanish are normal in benchmarks.
    socket.on('error', () => {});
    socket.setNoDelay(true);

    let greeted = false;
    let mailFrom = false;
    let rcptCount = 0;
    let inData = false;
    const dataEnd = new DataEndScanner();
    let pending: Buffer = Buffer.alloc(0); // partial command line
    let closing = false;

    const resetTransaction = (): void => {
      mailFrom = false;
      rcptCount = 0;
    };

    // Returns the replies for one command line; sets `closing` on QUIT.
    const command = (line: string, out: string[]): void => {
      const verb = line.slice(0, 4).toUpperCase();
      const arg = line.slice(4);
      switch (verb) {
        case 'EHLO':
          greeted = true;
          resetTransaction(); // RFC 5321 4.1.4: EHLO implies RSET
          out.push(
            `250-${SERVER_NAME}\r\n250-PIPELINING\r\n250-8BITMIME\r\n250-SMTPUTF8\r\n250 SIZE ${MAX_MESSAGE_SIZE_BYTES}\r\n`,
          );
          return;
        case 'HELO':
          greeted = true;
          resetTransaction();
          out.push(`250 ${SERVER_NAME}\r\n`);
          return;
        case 'MAIL': {
          if (!greeted) return void out.push('503 5.5.1 Send EHLO/HELO first\r\n');
          if (mailFrom) return void out.push('503 5.5.1 Nested MAIL command\r\n');
          if (!/^ FROM:/i.test(arg)) return void out.push('501 5.5.4 Syntax: MAIL FROM:<address>\r\n');
          const size = /\sSIZE=(\d+)/i.exec(arg);
          if (size && Number(size[1]) > MAX_MESSAGE_SIZE_BYTES) {
            return void out.push('552 5.3.4 Message size exceeds fixed maximum message size\r\n');
          }
          mailFrom = true;
          return void out.push('250 2.1.0 OK\r\n');
        }
        case 'RCPT':
          if (!mailFrom) return void out.push('503 5.5.1 Need MAIL command\r\n');
          if (!/^ TO:/i.test(arg)) return void out.push('501 5.5.4 Syntax: RCPT TO:<address>\r\n');
          rcptCount++;
          return void out.push('250 2.1.5 OK\r\n');
        case 'DATA':
          // RFC 2920 3.1: with pipelining, DATA after only failed RCPTs gets 503/554.
          if (rcptCount === 0) return void out.push('503 5.5.1 Need RCPT command\r\n');
          inData = true;
          dataEnd.reset();
          return void out.push('354 End data with <CR><LF>.<CR><LF>\r\n');
        case 'RSET':
          resetTransaction();
          return void out.push('250 2.0.0 OK\r\n');
        case 'NOOP':
          return void out.push('250 2.0.0 OK\r\n');
        case 'QUIT':
          closing = true;
          return void out.push('221 2.0.0 Bye\r\n');
        default:
          return void out.push('502 5.5.2 Command not implemented\r\n');
      }
    };

    socket.on('data', (chunk: Buffer) => {
      if (closing) return;
      const out: string[] = [];
      let buf = chunk;
      while (buf.length > 0 && !closing) {
        if (inData) {
          const end = dataEnd.push(buf);
          if (end === -1) break;
          inData = false;
          resetTransaction();
          messageAccepted();
          out.push('250 2.0.0 OK queued\r\n');
          buf = buf.subarray(end);
          continue;
        }
        const input = pending.length > 0 ? Buffer.concat([pending, buf]) : buf;
        const lf = input.indexOf(0x0a);
        if (lf === -1) {
          if (input.length > MAX_COMMAND_LINE_BYTES) {
            pending = Buffer.alloc(0);
            out.push('500 5.5.6 Line too long\r\n');
          } else {
            pending = Buffer.from(input);
          }
          break;
        }
        pending = Buffer.alloc(0);
        // Tolerate a bare LF in commands; CRLF is what RFC 5321 2.3.8 requires.
        const lineEnd = lf > 0 && input[lf - 1] === 0x0d ? lf - 1 : lf;
        command(input.toString('utf8', 0, lineEnd), out);
        buf = input.subarray(lf + 1);
      }
      if (out.length > 0) socket.write(out.join(''));
      if (closing) socket.end();
    });

    socket.write(`220 ${SERVER_NAME} ESMTP fast-sink\r\n`);
  };
  const server = net.createServer(handler);
  const servers = [server];
  const listen = (srv: net.Server, port: number, host: string) =>
    new Promise<number>((resolve, reject) => {
      srv.once('error', reject);
      srv.listen(port, host, () => {
        srv.off('error', reject);
        const address = srv.address();
        if (address === null || typeof address === 'string') return reject(new Error('fast sink: unexpected listen address'));
        resolve(address.port);
      });
    });

  return (async (): Promise<FastSink> => {
    const port = await listen(server, 0, HOST);
    for (const host of opts.extraHosts ?? []) {
      const extra = net.createServer(handler);
      servers.push(extra);
      await listen(extra, port, host);
    }
    return {
      port,
      get received() {
        return received;
      },
      onCount(n) {
        if (received >= n) return Promise.resolve();
        return new Promise<void>((done) => waiters.push({ n, resolve: done }));
      },
      close() {
        const closed = Promise.all(servers.map((srv) => new Promise<void>((done) => srv.close(() => done())))).then(() => undefined);
        for (const socket of sockets) socket.destroy();
        return closed;
      },
    };
  })();
}
