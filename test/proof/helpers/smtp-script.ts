// A scripted raw SMTP client for the fuzz suite. It sends one line at a time and waits for
// that line's reply (smtp-server answers every command line exactly once, lines split at
// /\r?\n/), so it always knows whether the server is in command mode or in DATA; it can
// upgrade to TLS after a 220 to STARTTLS; and it records every line the server sends, so a
// test can check that each one is a well-formed reply.
import net from 'node:net';
import tls from 'node:tls';

/** Guard against a hung server only; never a timing assertion. */
const GUARD_MS = 20_000;

export class SmtpScript {
  private socket: net.Socket | tls.TLSSocket;
  private buffer = '';
  private waiters: (() => void)[] = [];
  /** Every line the server sent, in order. */
  readonly lines: string[] = [];
  /** Lines that are not SMTP reply lines. */
  readonly malformed: string[] = [];
  closed = false;
  secure = false;
  /** True after a 354: what we send is message content until the final dot. */
  inData = false;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    this.attach(socket);
  }

  static async connect(port: number): Promise<SmtpScript> {
    const socket = net.connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', () => resolve());
      socket.once('error', reject);
    });
    const s = new SmtpScript(socket);
    await s.reply(); // the greeting (or a refusal and close)
    return s;
  }

  private readonly onData = (chunk: Buffer) => {
    this.buffer += chunk.toString('latin1');
    for (const w of this.waiters.splice(0)) w();
  };
  private readonly onClose = () => {
    this.closed = true;
    for (const w of this.waiters.splice(0)) w();
  };

  private attach(socket: net.Socket | tls.TLSSocket) {
    socket.on('data', this.onData);
    socket.on('close', this.onClose);
    socket.on('error', () => {}); // resets after the server closes are ordinary
  }

  /** The next complete reply (its lines), or null once the connection is closed without one. */
  async reply(): Promise<string[] | null> {
    const deadline = Date.now() + GUARD_MS;
    const collected: string[] = [];
    for (;;) {
      let nl: number;
      while ((nl = this.buffer.indexOf('\r\n')) >= 0) {
        const line = this.buffer.slice(0, nl);
        this.buffer = this.buffer.slice(nl + 2);
        this.lines.push(line);
        if (!/^\d{3}([ -]|$)/.test(line)) this.malformed.push(line);
        collected.push(line);
        if (!/^\d{3}-/.test(line)) {
          if (/^354/.test(line)) this.inData = true;
          return collected;
        }
      }
      if (this.closed) {
        if (this.buffer) {
          this.malformed.push(`unterminated: ${this.buffer}`);
          this.buffer = '';
        }
        return collected.length ? collected : null;
      }
      if (Date.now() > deadline) throw new Error(`no SMTP reply within the guard; lines so far: ${JSON.stringify(this.lines.slice(-5))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, GUARD_MS);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  write(bytes: Buffer | string): void {
    if (!this.closed) this.socket.write(bytes);
  }

  /**
   * Sends text as command lines, one at a time, each waiting for its reply. Once a line opens
   * DATA (354), the rest is written as message content. Returns the replies.
   */
  async commands(text: Buffer): Promise<string[][]> {
    const replies: string[][] = [];
    const lines = text.toString('latin1').split(/\r?\n/);
    for (let i = 0; i < lines.length; i++) {
      if (this.closed) break;
      if (this.inData) {
        this.write(Buffer.from(lines.slice(i).join('\r\n'), 'latin1'));
        break;
      }
      this.write(Buffer.from(`${lines[i]}\r\n`, 'latin1'));
      const r = await this.reply();
      if (!r) break;
      replies.push(r);
      if (/^220/.test(r[r.length - 1]!) && /^\s*starttls\s*$/i.test(lines[i]!)) await this.upgrade();
    }
    return replies;
  }

  /**
   * Pipelining (RFC 2920) with no regard for which commands may be grouped: every line in one
   * write, then one reply per line is awaited, until a 354 turns the rest into message content
   * or the server hangs up. (STARTTLS is left out: the server rightly drops what follows it.)
   */
  async pipeline(text: Buffer): Promise<void> {
    const lines = text
      .toString('latin1')
      .split(/\r?\n/)
      .filter((l) => !/starttls/i.test(l));
    if (this.inData || this.closed) {
      this.write(Buffer.from(lines.join('\r\n'), 'latin1'));
      return;
    }
    this.write(Buffer.from(lines.map((l) => `${l}\r\n`).join(''), 'latin1'));
    for (let i = 0; i < lines.length && !this.closed && !this.inData; i++) await this.reply();
  }

  /** Ends DATA with the final dot (dot-stuffing nothing) and returns the reply. */
  async endData(): Promise<string[] | null> {
    if (!this.inData) return null;
    this.inData = false;
    this.write('\r\n.\r\n');
    return this.reply();
  }

  /** TLS over the same connection after a 220 to STARTTLS (RFC 3207). */
  async upgrade(): Promise<void> {
    const raw = this.socket as net.Socket;
    raw.off('data', this.onData);
    raw.off('close', this.onClose);
    const secure = tls.connect({ socket: raw, rejectUnauthorized: false, servername: 'mx.posthorn.test' });
    this.socket = secure;
    this.attach(secure);
    await new Promise<void>((resolve) => {
      secure.once('secureConnect', () => {
        this.secure = true;
        resolve();
      });
      secure.once('close', () => resolve());
    });
  }

  /**
   * After STARTTLS was accepted and we sent no handshake: whatever comes back is TLS (an alert
   * record), not SMTP. Ends our input and waits for the server to hang up, discarding it.
   */
  async drainTls(): Promise<void> {
    this.endInput();
    while (!this.closed) {
      this.buffer = '';
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, GUARD_MS);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    this.buffer = '';
  }

  /** Half-closes: no more bytes from us, the server sees end of input. */
  endInput(): void {
    if (!this.closed) this.socket.end();
  }

  /** Drops the connection on the spot (a client vanishing mid-command or mid-DATA). */
  abort(): void {
    this.socket.destroy();
    this.closed = true;
  }

  /**
   * Ends the session whatever state it is in: a lone dot ends DATA (or is an unknown command),
   * then QUIT; waits for the server to close.
   */
  async finish(): Promise<void> {
    if (this.closed) return;
    this.inData = false;
    this.write('\r\n.\r\nQUIT\r\n');
    while (!this.closed) await this.reply();
  }
}
