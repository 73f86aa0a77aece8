import { PROPERTY_KEY_PATTERN } from '../../store/repositories/contact-filter-sql.js';
import { badRequest } from '../errors.js';
import type { ContactView } from './contact-service.js';

/*
 * Contacts as CSV (RFC 4180), for the console's import and export. Import reads a header
 * row: email (required), firstName, lastName and subscribed by name (a few common spellings
 * each), and every other column is a property of that name. Rows keep the line they started
 * on, so an error report points at the line a person sees in a spreadsheet.
 */

export const MAX_CSV_BYTES = 20 * 1024 * 1024;
export const MAX_CSV_ROWS = 200_000;

export interface CsvRecord {
  /** 1-based line on which the record starts. */
  line: number;
  fields: string[];
}

/**
 * RFC 4180 with the usual leniencies: LF, CRLF or CR alone (old Mac files) as line break, a
 * UTF-8 BOM, ';' when the header has no ',', and spaces around a quoted field (`a, "b, c"`).
 */
export function parseCsv(text: string): { records: CsvRecord[]; error?: { line: number; message: string } } {
  const src = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  const firstLine = src.slice(0, src.search(/[\r\n]|$/));
  const delimiter = !firstLine.includes(',') && firstLine.includes(';') ? ';' : firstLine.includes(',') || !firstLine.includes('\t') ? ',' : '\t';
  const records: CsvRecord[] = [];
  let fields: string[] = [];
  let field = '';
  let line = 1;
  let recordLine = 1;
  let i = 0;
  let quotedAt = -1;
  // After a closing quote, spaces up to the delimiter are padding, not content.
  let closed = false;
  let pad = '';
  // Whether field is spaces only, kept as it grows: testing the field itself at every '"'
  // rescanned it (a field of 1 MB of '"' took minutes of the only thread).
  let blank = true;
  const endField = () => {
    fields.push(field);
    field = '';
    blank = true;
    closed = false;
    pad = '';
  };
  const endRecord = () => {
    endField();
    // A blank line is no record (a trailing newline, an empty line between rows).
    if (!(fields.length === 1 && fields[0] === '')) records.push({ line: recordLine, fields });
    fields = [];
  };
  while (i < src.length) {
    const c = src[i]!;
    if (quotedAt >= 0) {
      if (c === '"') {
        if (src[i + 1] === '"') {
          field += '"';
          blank = false;
          i += 2;
          continue;
        }
        quotedAt = -1;
        closed = true;
        i++;
        continue;
      }
      if (c === '\n' || (c === '\r' && src[i + 1] !== '\n')) line++;
      field += c;
      blank &&= c === ' ';
      i++;
      continue;
    }
    if (c === '"' && !closed && blank) {
      // Spaces before the opening quote are padding (RFC 4180 has none, spreadsheets write them).
      field = '';
      quotedAt = line;
      i++;
    } else if (c === delimiter) {
      endField();
      i++;
    } else if (c === '\r' && src[i + 1] === '\n') {
      i++;
    } else if (c === '\n' || c === '\r') {
      endRecord();
      line++;
      recordLine = line;
      i++;
    } else if (c === ' ' && closed) {
      pad += c;
      i++;
    } else {
      // Text after a closed quote is kept as written (lenient), spaces before it included.
      field += pad + c;
      blank &&= c === ' ';
      closed = false;
      pad = '';
      i++;
    }
  }
  if (quotedAt >= 0) return { records, error: { line: quotedAt, message: `a quoted field opened on line ${quotedAt} is never closed` } };
  if (field !== '' || fields.length) endRecord();
  return { records };
}

/**
 * A cell that a spreadsheet would run as a formula is prefixed with ' (OWASP, CSV injection), and
 * so is one that already looks so prefixed: the import takes one ' off again (unquote), so an
 * export reads back as the same contacts (a "+49 ..." phone, a "-jo@..." address).
 */
const DEFUSED = /^'*[=+\-@\t\r]/;

/** The import's side of cell(): one leading ' off a value the export defused. */
function unquote(value: string): string {
  return value.startsWith("'") && DEFUSED.test(value) ? value.slice(1) : value;
}

type Column = { kind: 'email' | 'firstName' | 'lastName' | 'subscribed' | 'ignored' } | { kind: 'property'; key: string };

const NAMED: Record<string, Column['kind']> = {
  email: 'email',
  'e-mail': 'email',
  emailaddress: 'email',
  mail: 'email',
  firstname: 'firstName',
  first: 'firstName',
  givenname: 'firstName',
  lastname: 'lastName',
  last: 'lastName',
  surname: 'lastName',
  familyname: 'lastName',
  subscribed: 'subscribed',
  // Written by the export; read back, they are the store's to set, not the file's.
  unsubscribereason: 'ignored',
  createdat: 'ignored',
};

function columnOf(header: string, index: number): Column {
  const name = unquote(header.trim());
  const known = NAMED[name.toLowerCase().replace(/[\s_]/g, '')];
  if (known) return { kind: known } as Column;
  if (!PROPERTY_KEY_PATTERN.test(name)) {
    throw badRequest(`file: column ${index + 1} ("${name.slice(0, 64)}") is neither email, firstName, lastName nor subscribed, and not a valid property name (1-64 characters of A-Z, a-z, 0-9, _ and -)`);
  }
  return { kind: 'property', key: name };
}

const TRUE = new Set(['true', 'yes', 'y', '1']);
const FALSE = new Set(['false', 'no', 'n', '0']);

/** One CSV row turned into a contact body for bulkAdd, or the reason it cannot be. */
export type CsvContactRow = { line: number; email: string; body: Record<string, unknown> } | { line: number; email: string; error: string };

/** The contacts of a CSV file; a header problem refuses the whole file (400 naming the column). */
export function contactsFromCsv(text: string): CsvContactRow[] {
  if (Buffer.byteLength(text) > MAX_CSV_BYTES) throw badRequest(`file: at most ${MAX_CSV_BYTES / 1024 / 1024} MB`);
  const { records, error } = parseCsv(text);
  if (records.length === 0) throw badRequest('file: is empty; the first line must name the columns, one of them email');
  const [header, ...filled] = records;
  // A row of empty cells is no row: spreadsheets save the rows once formatted as ",,,".
  const rows = filled.filter((r) => r.fields.some((f) => f.trim() !== ''));
  // Empty names at the end of the header (a trailing delimiter) are ignored columns, which a
  // row may leave out; an empty name between named columns is still refused by columnOf.
  let named = header!.fields.length;
  while (named > 1 && header!.fields[named - 1]!.trim() === '') named--;
  const columns: Column[] = header!.fields.map((h, i) => (i < named ? columnOf(h, i) : { kind: 'ignored' }));
  if (!columns.some((c) => c.kind === 'email')) throw badRequest('file: the first line must name the columns, and one of them must be email');
  const seen = new Set<string>();
  for (const c of columns) {
    if (c.kind === 'ignored') continue;
    const key = c.kind === 'property' ? `p:${c.key}` : c.kind;
    if (seen.has(key)) throw badRequest(`file: column ${c.kind === 'property' ? c.key : c.kind} appears twice`);
    seen.add(key);
  }
  if (rows.length > MAX_CSV_ROWS) throw badRequest(`file: at most ${MAX_CSV_ROWS} rows per import (this one has ${rows.length})`);
  const out: CsvContactRow[] = rows.map((r) => {
    const emailIndex = columns.findIndex((c) => c.kind === 'email');
    const email = unquote((r.fields[emailIndex] ?? '').trim());
    if (r.fields.length < named || r.fields.length > columns.length) {
      return { line: r.line, email, error: `has ${r.fields.length} fields where the header has ${named === columns.length ? named : `${named} to ${columns.length}`}` };
    }
    const body: Record<string, unknown> = {};
    const properties: Record<string, string> = {};
    for (let i = 0; i < columns.length; i++) {
      const c = columns[i]!;
      if (c.kind === 'ignored') continue;
      const value = unquote(r.fields[i]!.trim());
      if (c.kind === 'email') body.email = value;
      else if (c.kind === 'property') {
        if (value !== '') properties[c.key] = value;
      } else if (c.kind === 'subscribed') {
        if (value === '') continue;
        const v = value.toLowerCase();
        if (!TRUE.has(v) && !FALSE.has(v)) return { line: r.line, email, error: `subscribed: "${value.slice(0, 40)}" is not true/false, yes/no or 1/0` };
        body.subscribed = TRUE.has(v);
      } else if (value !== '') body[c.kind] = value;
    }
    if (Object.keys(properties).length) body.properties = properties;
    return { line: r.line, email, body };
  });
  if (error) out.push({ line: error.line, email: '', error: error.message });
  return out;
}

/** One field of an export: defused (DEFUSED), quoted where RFC 4180 needs it. */
function cell(value: string): string {
  const safe = DEFUSED.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

/** The header line of an export: the fixed columns, then every property key, sorted. */
export function contactsCsvHeader(propertyKeys: string[]): string {
  return `${['email', 'firstName', 'lastName', 'subscribed', 'unsubscribeReason', 'createdAt', ...propertyKeys].map(cell).join(',')}\r\n`;
}

/** A property a contact lacks is an empty cell (own keys only: "toString" is a property name like any other). */
export function contactsCsvLines(contacts: ContactView[], propertyKeys: string[]): string {
  return contacts
    .map((c) => `${[c.email, c.firstName ?? '', c.lastName ?? '', String(c.subscribed), c.unsubscribeReason ?? '', c.createdAt, ...propertyKeys.map((k) => (Object.hasOwn(c.properties, k) ? c.properties[k]! : ''))].map(cell).join(',')}\r\n`)
    .join('');
}
