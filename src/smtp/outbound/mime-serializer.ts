// Writes a compiled nodemailer MIME tree out to bytes synchronously.
//
// MimeNode.build() streams the tree: a PassThrough per content part, stream.pipeline
// per encoder (whose finish aborts an AbortController, building a DOMException with a
// stack trace every time), setImmediate between parts, and a LastNewline stage. For the
// strings and Buffers Posthorn composes from, that machinery was ~2/3 of composing
// (profiled: 0.9 ms -> 0.32 ms of CPU per message). This walks the same tree in the
// same order and calls the same code nodemailer would: buildHeaders(),
// getTransferEncoding() and nodemailer's own QP and base64 Encoder transforms, fed
// their whole input in one chunk, which is what the PassThrough hands them. So the
// bytes are nodemailer's; test/smtp/mime/mime-serializer.test.ts checks that they are
// identical to build()'s over generated messages. Anything else (raw nodes, stream or
// file content, transforms) returns undefined and the caller uses build().
import type { Transform } from 'node:stream';
import type MimeNode from 'nodemailer/lib/mime-node';
import { Encoder as Base64Encoder } from 'nodemailer/lib/base64';
import { Encoder as QpEncoder } from 'nodemailer/lib/qp';

/** The parts of MimeNode that are not in its type declarations. */
interface MimeNodeInternals {
  _raw?: unknown;
  _transforms?: unknown[];
  _processFuncs?: unknown[];
}

const LF = 0x0a;
const CR = 0x0d;

/** The message bytes exactly as `node.build()` would produce them, or undefined when the tree holds something only the streaming path handles. */
export function serializeMimeTree(node: MimeNode): Buffer | undefined {
  const root = node as MimeNode & MimeNodeInternals;
  if (root._transforms?.length || root._processFuncs?.length || root.newline) return undefined;
  const out: Buffer[] = [];
  if (!writeNode(node, out)) return undefined;
  // nodemailer's LastNewline stage: the message ends with a line break (judged by the last byte written).
  let lastByte: number | undefined;
  for (let i = out.length - 1; i >= 0 && lastByte === undefined; i--) if (out[i]!.length) lastByte = out[i]![out[i]!.length - 1];
  if (lastByte !== LF) out.push(Buffer.from(lastByte === CR ? '\n' : '\r\n'));
  return Buffer.concat(out);
}

/** MimeNode.stream() for string and Buffer content, appending to `out`; false when it can not. */
function writeNode(node: MimeNode, out: Buffer[]): boolean {
  if ((node as MimeNode & MimeNodeInternals)._raw) return false;
  const content = node.content;
  if (content && typeof content !== 'string' && !Buffer.isBuffer(content)) return false;
  out.push(Buffer.from(`${node.buildHeaders()}\r\n\r\n`));
  if (content) {
    // The PassThrough nodemailer feeds an encoder with writes a string as UTF-8.
    const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
    const transferEncoding = node.getTransferEncoding();
    if (transferEncoding === 'base64') encodeInto(new Base64Encoder({}), bytes, out);
    // outside of text a lone CR or LF is data (nodemailer's own rule in stream())
    else if (transferEncoding === 'quoted-printable') encodeInto(new QpEncoder({ binary: !/^text\//i.test(node.contentType || '') }), bytes, out);
    else out.push(bytes);
  }
  if (node.multipart) {
    for (let i = 0; i < node.childNodes.length; i++) {
      out.push(Buffer.from(`${i > 0 ? '\r\n' : ''}--${node.boundary}\r\n`));
      if (!writeNode(node.childNodes[i]!, out)) return false;
    }
    out.push(Buffer.from(`\r\n--${node.boundary}--\r\n`));
  }
  return true;
}

/**
 * Runs a Transform's own _transform and _flush on one chunk, collecting what it pushes.
 * Both encoders are synchronous; nothing here is a stream that anyone reads.
 */
function encodeInto(encoder: Transform, input: Buffer, out: Buffer[]): void {
  const fail = (err?: Error | null) => {
    if (err) throw err;
  };
  encoder.push = (chunk: unknown, encoding?: BufferEncoding) => {
    if (chunk !== null && chunk !== undefined) out.push(typeof chunk === 'string' ? Buffer.from(chunk, encoding) : (chunk as Buffer));
    return true;
  };
  encoder._transform(input, 'buffer' as BufferEncoding, fail);
  encoder._flush?.(fail);
}
