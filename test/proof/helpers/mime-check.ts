// Structural checks of a produced message's header blocks (the top one and every MIME part's),
// done on the raw bytes, where an injected line would show: RFC 5322 2.2 fields and folding,
// no bare CR or LF (2.3), no NUL or other control characters, lines within 998 octets (2.1.1).

export interface HeaderField {
  /** As written. */
  name: string;
  /** Unfolded. */
  value: string;
}

/** The header block of each part: the top one first, then one per MIME part, found through every boundary the message declares. */
export function headerBlocks(raw: Buffer): { where: string; block: string }[] {
  const text = raw.toString('latin1');
  const blocks: { where: string; block: string }[] = [];
  const topEnd = text.indexOf('\r\n\r\n');
  blocks.push({ where: 'top', block: topEnd < 0 ? text : text.slice(0, topEnd) });
  const boundaries = new Set<string>();
  for (const m of text.matchAll(/boundary="?([^";\r\n]+)"?/gi)) boundaries.add(m[1]!);
  for (const b of boundaries) {
    const delimiter = `\r\n--${b}\r\n`;
    for (let at = text.indexOf(delimiter); at >= 0; at = text.indexOf(delimiter, at + 1)) {
      const start = at + delimiter.length;
      const end = text.indexOf('\r\n\r\n', start);
      blocks.push({ where: `part after --${b}`, block: text.slice(start, end < 0 ? text.length : end) });
    }
  }
  return blocks;
}

/** The fields of a header block, in order. */
export function fieldsOf(block: string): HeaderField[] {
  const fields: HeaderField[] = [];
  for (const line of block.split('\r\n')) {
    if (/^[ \t]/.test(line) && fields.length) fields[fields.length - 1]!.value += line;
    else {
      const colon = line.indexOf(':');
      fields.push({ name: colon < 0 ? line : line.slice(0, colon), value: colon < 0 ? '' : line.slice(colon + 1) });
    }
  }
  return fields;
}

/** Everything structurally wrong with a header block. */
export function blockProblems(block: string, where: string): string[] {
  const problems: string[] = [];
  const show = (s: string) => JSON.stringify(s.length > 160 ? s.slice(0, 160) + '...' : s);
  if (block.includes('\0')) problems.push(`${where}: NUL in the header block`);
  const bareCr = /\r(?!\n)/.exec(block);
  if (bareCr) problems.push(`${where}: bare CR near ${show(block.slice(Math.max(0, bareCr.index - 40), bareCr.index + 40))}`);
  const bareLf = /(^|[^\r])\n/.exec(block);
  if (bareLf) problems.push(`${where}: bare LF near ${show(block.slice(Math.max(0, bareLf.index - 40), bareLf.index + 40))}`);
  const control = /[\x01-\x08\x0b\x0c\x0e-\x1f\x7f]/.exec(block);
  if (control) problems.push(`${where}: control character U+${control[0].charCodeAt(0).toString(16).padStart(4, '0')} near ${show(block.slice(Math.max(0, control.index - 40), control.index + 40))}`);
  block.split('\r\n').forEach((line, i) => {
    if (line.length > 998) problems.push(`${where}: line ${i} is ${line.length} octets`);
    if (/^[ \t]/.test(line)) {
      if (i === 0) problems.push(`${where}: starts with a continuation line`);
      if (!/\S/.test(line)) problems.push(`${where}: a folded line of only white space (RFC 5322 3.2.2)`);
    } else if (!/^[!-9;-~]+:/.test(line)) {
      problems.push(`${where}: line ${i} is neither a field nor a continuation: ${show(line)}`);
    }
  });
  return problems;
}

/** Fields a composed message may carry at the top (besides the caller's custom headers). */
export const TOP_FIELDS = new Set([
  'dkim-signature',
  'from',
  'to',
  'cc',
  'reply-to',
  'subject',
  'message-id',
  'date',
  'mime-version',
  'content-type',
  'content-transfer-encoding',
  'x-posthorn-email-id',
  'in-reply-to',
  'references',
  'list-unsubscribe',
  'list-unsubscribe-post',
]);
export const REQUIRED_TOP_FIELDS = ['dkim-signature', 'from', 'to', 'subject', 'message-id', 'date', 'mime-version', 'content-type', 'x-posthorn-email-id'];
export const PART_FIELDS = new Set(['content-type', 'content-transfer-encoding', 'content-disposition', 'content-id']);

/**
 * Every problem with a produced message: malformed header blocks, a top field that was not
 * asked for (an injected Bcc, X-Injected...), any field twice, a missing required field, a
 * part field that is not a MIME one.
 */
export function messageProblems(raw: Buffer, customHeaderNames: string[]): string[] {
  const problems: string[] = [];
  const allowedTop = new Set([...TOP_FIELDS, ...customHeaderNames.map((n) => n.toLowerCase())]);
  for (const { where, block } of headerBlocks(raw)) {
    problems.push(...blockProblems(block, where));
    const names = fieldsOf(block).map((f) => f.name.toLowerCase());
    const allowed = where === 'top' ? allowedTop : PART_FIELDS;
    for (const n of names) if (!allowed.has(n)) problems.push(`${where}: unexpected field ${JSON.stringify(n)}`);
    const seen = new Set<string>();
    for (const n of names) {
      if (seen.has(n)) problems.push(`${where}: field ${JSON.stringify(n)} appears twice`);
      seen.add(n);
    }
    if (where === 'top') for (const r of REQUIRED_TOP_FIELDS) if (!seen.has(r)) problems.push(`top: required field ${r} is missing`);
  }
  return problems;
}
