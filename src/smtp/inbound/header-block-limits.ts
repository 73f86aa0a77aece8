// Bounds on a received message's header block, checked before anything parses it.
//
// mailauth (SPF/DKIM/DMARC, TLS report signatures) splits the header block with work that grows
// with the square of its shape, on the one thread every tenant shares: each continuation line
// copies the field's lines so far (Array#concat), each folded field is spliced out of the list of
// lines, and /[\r\n]+$/ rescans every run of CR/LF. 100,000 continuation lines (400 KB) took a
// minute; 25,000 bare CRs, a second. And to take b= out of a signature field it runs
// /([;:\s]+b=)[^;]+/, which rescans every run of white space, ';' and ':' to the field's end:
// a 40 KB DKIM-Signature of blanks took two seconds, 100 KB twelve. Within these bounds the same
// work is milliseconds. No real message comes near them (a long ARC chain is a few hundred lines,
// a DKIM-Signature under 2 KB); sendmail refuses headers over 32 KB outright with the same reply.

/** Physical lines in the header block. */
export const MAX_HEADER_LINES = 2000;
/** Consecutive CR and LF bytes inside the header block (a line break is two). */
export const MAX_LINE_BREAK_RUN = 64;

/** One DKIM-Signature, ARC-Seal or ARC-Message-Signature field, and all of them together (bytes). */
export const MAX_SIGNATURE_FIELD_BYTES = 4096;
export const MAX_SIGNATURE_FIELDS_BYTES = 32 * 1024;
/** The fields mailauth takes b= out of with that expression (names are ASCII, case ignored). */
const SIGNATURE_FIELD = /^(?:dkim-signature|arc-seal|arc-message-signature)$/i;
const COLON = 0x3a;

const CR = 0x0d;
const LF = 0x0a;

/**
 * What is wrong with the header block of `raw`, or null. The block ends where mailauth ends it
 * (an LF followed by LF or CRLF); one pass, no regular expression over more than a field name.
 */
export function headerBlockProblem(raw: Buffer): string | null {
  let lines = 1;
  let run = 0;
  /** Where the current field started, and whether it is a signature field. */
  let fieldStart = 0;
  let signatureBytes = 0;
  const endField = (end: number): string | null => {
    // The name as mailauth reads it: up to the colon, trimmed (blanks before the colon, any
    // number of them, do not hide a signature field). The search stays within this field.
    const colon = raw.subarray(fieldStart, end).indexOf(COLON);
    if (colon < 0 || !SIGNATURE_FIELD.test(raw.toString('latin1', fieldStart, fieldStart + colon).trim())) return null;
    const size = end - fieldStart;
    if (size > MAX_SIGNATURE_FIELD_BYTES) return `a signature field is longer than ${MAX_SIGNATURE_FIELD_BYTES} bytes`;
    signatureBytes += size;
    if (signatureBytes > MAX_SIGNATURE_FIELDS_BYTES) return `the signature fields are longer than ${MAX_SIGNATURE_FIELDS_BYTES} bytes together`;
    return null;
  };
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c !== CR && c !== LF) {
      run = 0;
      continue;
    }
    if (++run > MAX_LINE_BREAK_RUN) return `the header block has a run of more than ${MAX_LINE_BREAK_RUN} line-break characters`;
    if (c !== LF) continue;
    const next = raw[i + 1];
    if (next === LF || (next === CR && raw[i + 2] === LF)) return endField(i + 1); // the empty line: the body follows
    if (++lines > MAX_HEADER_LINES) return `the header block has more than ${MAX_HEADER_LINES} lines`;
    // A line that starts with white space continues the field; any other starts a new one.
    if (next !== 0x20 && next !== 0x09) {
      const problem = endField(i + 1);
      if (problem) return problem;
      fieldStart = i + 1;
    }
  }
  return endField(raw.length);
}
