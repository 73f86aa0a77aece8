// Real SMTP clients for the inbound and submission tests: nodemailer's SMTPConnection (what
// MTAs built on Node use) for envelope-level control, and raw sockets for protocol abuse.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import SMTPConnection from 'nodemailer/lib/smtp-connection';

export interface SendResult {
  ok: boolean;
  accepted: string[];
  rejected: string[];
  /** Final reply (250 ... on success, the error reply otherwise). */
  response: string;
  responseCode?: number;
  /** Replies to refused RCPT commands, in order. */
  rcptErrors: string[];
  secure: boolean;
}

export interface SendOptions {
  port: number;
  /** '' sends the null reverse-path (MAIL FROM:<>), as DSNs do (RFC 5321 4.5.5). */
  from: string;
  to: string[];
  raw: Buffer | string;
  /** Skip STARTTLS. */
  plaintext?: boolean;
}

/** One SMTP transaction like a remote MTA would make it: opportunistic STARTTLS, no AUTH. */
export async function smtpSend(o: SendOptions): Promise<SendResult> {
  const conn = new SMTPConnection({
    host: '127.0.0.1',
    port: o.port,
    name: 'mta.remote.test',
    ignoreTLS: !!o.plaintext,
    // Opportunistic TLS between MTAs (RFC 7435) does not verify the peer's certificate.
    tls: { rejectUnauthorized: false },
    connectionTimeout: 5_000,
    greetingTimeout: 5_000,
    socketTimeout: 20_000,
  });
  const errors: Error[] = [];
  conn.on('error', (err) => errors.push(err));
  await new Promise<void>((resolve, reject) => conn.connect((err) => (err ? reject(err) : resolve())));
  try {
    const raw = typeof o.raw === 'string' ? Buffer.from(o.raw) : o.raw;
    return await new Promise<SendResult>((resolve) => {
      conn.send({ from: o.from, to: o.to }, raw, (err, info) => {
        const secure = !!(conn as unknown as { secure: boolean }).secure;
        if (err) {
          const e = err as SMTPConnection.SMTPError & { rejected?: string[]; rejectedErrors?: SMTPConnection.SMTPError[] };
          resolve({
            ok: false,
            accepted: [],
            rejected: e.rejected ?? o.to,
            response: e.response ?? e.message,
            responseCode: e.responseCode,
            rcptErrors: (e.rejectedErrors ?? []).map((x) => x.response ?? x.message),
            secure,
          });
          return;
        }
        resolve({
          ok: true,
          accepted: info.accepted,
          rejected: info.rejected,
          response: info.response,
          rcptErrors: (info.rejectedErrors ?? []).map((x) => x.response ?? x.message),
          secure,
        });
      });
    });
  } finally {
    conn.quit();
  }
}

/** A raw TCP session: write lines, read replies (for malformed SMTP). */
export async function rawSession(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  let buffer = '';
  const waiters: (() => void)[] = [];
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => {
    buffer += d;
    for (const w of waiters.splice(0)) w();
  });
  let closed = false;
  socket.on('close', () => {
    closed = true;
    for (const w of waiters.splice(0)) w();
  });
  socket.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  /** Waits until the buffer holds a complete final reply line ("ddd " line) and returns the text read since the last call. */
  async function reply(timeoutMs = 5_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = /(^|\r\n)(\d{3}) [^\r\n]*\r\n/.exec(buffer);
      if (m) {
        const end = m.index + m[0].length;
        const out = buffer.slice(0, end);
        buffer = buffer.slice(end);
        return out;
      }
      if (closed) return buffer;
      if (Date.now() > deadline) throw new Error(`no SMTP reply; got ${JSON.stringify(buffer)}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 50);
        waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }
  return {
    socket,
    reply,
    write(data: string | Buffer) {
      socket.write(data);
    },
    async command(line: string) {
      socket.write(`${line}\r\n`);
      return reply();
    },
    get closed() {
      return closed;
    },
    close() {
      socket.destroy();
    },
  };
}

const FIXTURES = join(fileURLToPath(new URL('.', import.meta.url)), '../../../../test/fixtures/inbound');

/** A fixture with {{NAME}} placeholders filled in; line endings become CRLF (RFC 5322 2.1). */
export function fixture(name: string, values: Record<string, string>): Buffer {
  let text = readFileSync(join(FIXTURES, name), 'utf8');
  text = text.replace(/\{\{([A-Z_]+)\}\}/g, (whole, key: string) => {
    if (!(key in values)) throw new Error(`fixture ${name}: no value for ${whole}`);
    return values[key]!;
  });
  return Buffer.from(text.replace(/\r?\n/g, '\r\n'));
}

/** The header block of a message (RFC 5322 2.1), without the blank line. */
export function headersOf(raw: Buffer | string): string {
  const text = raw.toString();
  const end = text.search(/\r?\n\r?\n/);
  return end < 0 ? text : text.slice(0, end);
}

/** One plain message from someone@example.org to `to` through an inbound listener on `port`. */
export function receiveOne(port: number, to: string): Promise<SendResult> {
  const raw = ['From: someone@example.org', `To: ${to}`, 'Subject: hi', 'Message-ID: <m1@example.org>', '', 'hello', ''].join('\r\n');
  return smtpSend({ port, from: 'someone@example.org', to: [to], raw });
}

/** A raw SMTP client from the source address `from`: reads each reply, can upgrade with STARTTLS. */
export async function rawSmtpSession(port: number, from = '127.0.0.1') {
  let socket: net.Socket | tls.TLSSocket = net.connect({ port, host: '127.0.0.1', localAddress: from });
  let buffer = '';
  let closed = false;
  let wake: (() => void) | undefined;
  const onData = (d: Buffer) => {
    buffer += d.toString('latin1');
    wake?.();
  };
  const onClose = () => {
    closed = true;
    wake?.();
  };
  socket.on('data', onData);
  socket.on('close', onClose);
  socket.on('error', () => {});
  async function reply(): Promise<string> {
    for (;;) {
      const m = /(^|\r\n)(\d{3}) [^\r\n]*\r\n/.exec(buffer);
      if (m) {
        const out = buffer.slice(0, m.index + m[0].length);
        buffer = buffer.slice(out.length);
        return out;
      }
      if (closed) return '(closed)';
      await new Promise<void>((resolve) => (wake = resolve));
    }
  }
  const greeting = await reply();
  const client = {
    greeting,
    async command(line: string) {
      socket.write(`${line}\r\n`);
      return reply();
    },
    /** Waits until the server has closed the connection. */
    async closedByServer() {
      while (!closed) await new Promise<void>((resolve) => (wake = resolve));
    },
    async starttls() {
      await client.command('EHLO client.test');
      await client.command('STARTTLS');
      const plain = socket;
      plain.off('data', onData);
      plain.off('close', onClose);
      socket = tls.connect({ socket: plain as net.Socket, rejectUnauthorized: false });
      await new Promise((resolve) => socket.once('secureConnect', resolve));
      socket.on('data', onData);
      socket.on('close', onClose);
      socket.on('error', () => {});
      await client.command('EHLO client.test');
    },
    async quit() {
      await client.command('QUIT');
      await client.closedByServer();
    },
    close: () => socket.destroy(),
  };
  return client;
}
