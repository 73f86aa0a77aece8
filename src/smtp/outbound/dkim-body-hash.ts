// The DKIM body hash with "relaxed" body canonicalization (RFC 6376 3.4.4, 3.7).
//
// mailauth's RelaxedHash walks the body a byte at a time in JavaScript and also scans it for
// MIME structure that only a verifier needs: ~130 µs for a 5 KB body, about a fifth of signing
// a message and more than half of it besides the RSA operation. Messages here are CRLF text
// already (the signer normalizes bare LF), and for those the canonicalization is three
// regular-expression passes over a latin1 string (one character per byte), which V8 runs
// natively. Anything else (a lone CR or LF, a last line without CRLF) goes to mailauth's
// hasher, whose handling of those defines the result; a test checks that the two agree on
// every input it generates.
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';

interface BodyHasher {
  update(chunk: Buffer): void;
  digest(encoding: 'base64'): string;
}

const requireCjs = createRequire(import.meta.url);
/** mailauth's hasher, loaded the first time a body needs it (most never do). */
const dkimBody = (...args: [canonicalization: 'relaxed', hashAlgo: 'sha256', maxBodyLength: false]): BodyHasher =>
  (requireCjs('mailauth/lib/dkim/body/index.js') as { dkimBody(...a: typeof args): BodyHasher }).dkimBody(...args);

const CR = 0x0d;
const LF = 0x0a;
/** A CR not followed by LF, or an LF not preceded by CR. */
const LONE_CR_OR_LF = /\r(?!\n)|(?<!\r)\n/;
/** a.2: a run of WSP (SP, HTAB) within a line becomes one SP (a single SP, the usual run, is left alone). */
const WSP_RUN = /[ \t]{2,}|\t/g;
/** a.1: whitespace at the end of a line is ignored (runs are single SPs by then). */
const SP_BEFORE_CRLF = / \r\n/g;

/**
 * The canonical body as a latin1 string, without the CRLF that b.2 adds to a non-empty one;
 * undefined for a body this fast path leaves to mailauth.
 */
export function relaxedCanonicalBody(text: string): string | undefined {
  if ((text.length && !text.endsWith('\r\n')) || LONE_CR_OR_LF.test(text)) return undefined;
  const lines = text.replace(WSP_RUN, ' ').replace(SP_BEFORE_CRLF, '\r\n');
  // b.1: empty lines at the end of the body are ignored (a loop: an anchored regular
  // expression would be quadratic in a long run of them)
  let end = lines.length;
  while (end >= 2 && lines.charCodeAt(end - 1) === LF && lines.charCodeAt(end - 2) === CR) end -= 2;
  return lines.slice(0, end);
}

/** base64 SHA-256 of the body (the part after the header block's empty line), relaxed. */
export function relaxedBodyHash(body: Buffer): string {
  const canonical = relaxedCanonicalBody(body.toString('latin1'));
  if (canonical === undefined) {
    const hasher = dkimBody('relaxed', 'sha256', false);
    if (body.length) hasher.update(body);
    return hasher.digest('base64');
  }
  const hash = createHash('sha256').update(canonical, 'latin1');
  // b.2: a non-empty body ends with CRLF; an empty one hashes as nothing at all
  if (canonical.length) hash.update('\r\n', 'latin1');
  return hash.digest('base64');
}
