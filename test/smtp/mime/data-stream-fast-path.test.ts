import test from 'ava';
import fc from 'fast-check';
import { installDataStreamFastPath, originalTransform, passesUnchanged } from '../../../src/smtp/outbound/data-stream-fast-path.js';
import '../../../src/smtp/outbound/smtp-session.js'; // installs the fast path, as in production

// The fast path must be invisible: whatever nodemailer's DataStream makes of a message, cut
// into chunks any way, the patched stream makes too, byte for byte, and counts the same.

const SEED = Number(process.env.FUZZ_SEED ?? 20261126);
const { default: DataStream } = (await import(new URL('./data-stream.js', import.meta.resolve('nodemailer/lib/smtp-connection')).href)) as {
  default: new () => NodeJS.ReadWriteStream & { inByteCount: number; outByteCount: number; _transform: unknown };
};

async function through(chunks: Buffer[], original: boolean): Promise<{ out: Buffer; inBytes: number; outBytes: number }> {
  const stream = new DataStream();
  if (original) stream._transform = originalTransform!;
  const out: Buffer[] = [];
  stream.on('data', (b: Buffer) => out.push(b));
  const ended = new Promise((resolve) => stream.on('end', resolve));
  for (const c of chunks) stream.write(c);
  stream.end();
  await ended;
  return { out: Buffer.concat(out), inBytes: stream.inByteCount, outBytes: stream.outByteCount };
}

const messageBytes = fc.array(fc.constantFrom('a', 'b', ' ', '.', '..', '\r\n', '\r\n', '\r\n.', '\r', '\n', '\xe9', 'DKIM-Signature: x'), { maxLength: 60 }).map((parts) => Buffer.from(parts.join(''), 'latin1'));

test('the fast path is installed once, and the stream gives what nodemailer gives for any message cut any way', async (t) => {
  installDataStreamFastPath(); // a second install changes nothing
  t.true((DataStream.prototype as unknown as { _transform: { fastPath?: true } })._transform.fastPath);
  let fast = 0;
  await fc.assert(
    fc.asyncProperty(messageBytes, fc.array(fc.nat(), { maxLength: 4 }), async (message, cuts) => {
      if (message.length && passesUnchanged(message, false)) fast++;
      const at = [...new Set(cuts.map((c) => (message.length ? c % message.length : 0)))].sort((a, b) => a - b);
      const chunks = [0, ...at].map((from, i, all) => message.subarray(from, all[i + 1] ?? message.length)).filter((c) => c.length > 0);
      const [patched, original] = await Promise.all([through(chunks, false), through(chunks, true)]);
      return patched.out.equals(original.out) && patched.inBytes === original.inBytes && patched.outBytes === original.outBytes;
    }),
    { seed: SEED, numRuns: 3000 },
  );
  t.true(fast > 100, `${fast} messages took the fast path`);
});

test('a composed, signed message (CRLF lines, no dot at a line start) takes the fast path whole', (t) => {
  const message = Buffer.from('DKIM-Signature: v=1; a=rsa-sha256;\r\n b=abc\r\nFrom: a@example.com\r\nSubject: hi\r\n\r\nHello.\r\nA line. And . another\r\n', 'latin1');
  t.true(passesUnchanged(message, false));
  t.false(passesUnchanged(Buffer.from('a\r\n.b\r\n'), false), 'a dot starts a line');
  t.false(passesUnchanged(Buffer.from('.b\r\n'), false), 'a dot starts the message');
  t.false(passesUnchanged(Buffer.from('a\nb\r\n'), false), 'a bare LF');
  t.false(passesUnchanged(Buffer.from('a\rb\r\n'), false), 'a bare CR');
  t.false(passesUnchanged(Buffer.from('a\r\nb\r'), false), 'a CR at the end of the chunk');
  t.false(passesUnchanged(Buffer.from('\nb\r\n'), 0x0d), 'a line end across the seam');
});
