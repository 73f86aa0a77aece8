// A fast path for nodemailer's DATA stream (smtp-connection/data-stream.js).
//
// Before a message goes out as SMTP DATA, nodemailer's DataStream looks at every byte in
// JavaScript: a dot that starts a line is doubled (RFC 5321 4.5.2) and a bare CR or LF becomes
// CRLF. On the main thread that loop was ~2.5% of all its time in the realistic benchmark. The
// messages the engine sends were composed and signed here: CRLF throughout, and a dot starts a
// line only where a body has one. For a chunk that needs no change, which this decides with
// native searches (Buffer.indexOf), the stream passes the chunk on as the original would; any
// other chunk goes to the original, which stays the only code that rewrites bytes. A property
// test checks that the output is the original's, byte for byte, for any input cut any way.
import type DataStreamClass from 'nodemailer/lib/smtp-connection/data-stream';

// nodemailer does not export the module: it is loaded by its file, next to the SMTP
// connection's own (the same module instance, so the class SMTPConnection uses). Should a
// nodemailer release move it, messages go through the original and a test says so.
const DataStream = await import(new URL('./data-stream.js', import.meta.resolve('nodemailer/lib/smtp-connection')).href)
  .then((m: { default: typeof DataStreamClass }) => m.default)
  .catch(() => undefined);

const CR = 0x0d;
const LF = 0x0a;
const DOT = 0x2e;
const LF_DOT = Buffer.from('\n.');

type Transform = (this: DataStreamState, chunk: unknown, encoding: BufferEncoding, done: (err?: Error | null) => void) => void;
interface DataStreamState {
  inByteCount: number;
  outByteCount: number;
  /** The last byte of the previous chunk; false before the first. */
  lastByte: number | false;
  push(chunk: Buffer): boolean;
}
interface Patchable {
  _transform: Transform & { fastPath?: true };
}

const proto = (DataStream as unknown as { prototype: Patchable } | undefined)?.prototype;

/** The unpatched transform, captured before anything installs the fast path (tests compare with it). */
export const originalTransform: Transform | undefined = proto?._transform;

/** True when the original would pass `chunk` on unchanged after `lastByte`. */
export function passesUnchanged(chunk: Buffer, lastByte: number | false): boolean {
  const first = chunk[0]!;
  const last = chunk[chunk.length - 1]!;
  // a line end split between this chunk and the one before or after, and a dot that starts
  // the first line (false: the message's first chunk): left to the original
  if (lastByte === CR || last === CR || first === LF) return false;
  if (first === DOT && (lastByte === LF || lastByte === false)) return false;
  if (chunk.indexOf(LF_DOT) !== -1) return false;
  // every LF after a CR, and as many CRs as LFs: then no CR is bare either
  let lines = 0;
  for (let i = chunk.indexOf(LF); i !== -1; i = chunk.indexOf(LF, i + 1)) {
    if (chunk[i - 1] !== CR) return false;
    lines++;
  }
  let crs = 0;
  for (let i = chunk.indexOf(CR); i !== -1; i = chunk.indexOf(CR, i + 1)) crs++;
  return crs === lines;
}

export function installDataStreamFastPath(): void {
  if (!proto || proto._transform.fastPath) return;
  const original = proto._transform;
  if (typeof original !== 'function') return; // nodemailer changed: send as it does
  const fast: Transform & { fastPath?: true } = function (this: DataStreamState, chunk, encoding, done) {
    if (!Buffer.isBuffer(chunk) || chunk.length === 0 || !passesUnchanged(chunk, this.lastByte)) {
      original.call(this, chunk, encoding, done);
      return;
    }
    this.inByteCount += chunk.length;
    this.outByteCount += chunk.length;
    this.push(chunk);
    this.lastByte = chunk[chunk.length - 1]!;
    done();
  };
  fast.fastPath = true;
  proto._transform = fast;
}
