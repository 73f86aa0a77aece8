import { PROPERTY_KEY_PATTERN } from '../../store/repositories/contact-filter-sql.js';
import { yieldTurn } from '../../lib/turn-yield.js';
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

export interface CsvError {
  line: number;
  message: string;
}

const QUOTE = 0x22;
const SPACE = 0x20;
const CR = 0x0d;
const LF = 0x0a;

/** A CSV text read a few records at a time (csvCursor), so a 20 MB file need not hold the thread at once. */
export interface CsvCursor {
  /** The next whole records, from about `chars` characters of the text (a record is never split). */
  read(chars: number): CsvRecord[];
  /** Nothing is left to read (the end, or a quoted field never closed). */
  readonly done: boolean;
  /** A quoted field never closed: the records read before it are all there are. */
  readonly error: CsvError | undefined;
}

/**
 * RFC 4180 with the usual leniencies: LF, CRLF or CR alone (old Mac files) as line break, a
 * UTF-8 BOM, ';' when the header has no ',', and spaces around a quoted field (`a, "b, c"`).
 * Each field is one slice of the text between its delimiters (a quoted one with its doubled
 * quotes undone once), never built a character at a time: every character is looked at once.
 */
export function csvCursor(text: string): CsvCursor {
  const src = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  const firstLine = src.slice(0, src.search(/[\r\n]|$/));
  const delimiter = !firstLine.includes(',') && firstLine.includes(';') ? ';' : firstLine.includes(',') || !firstLine.includes('\t') ? ',' : '\t';
  const delim = delimiter.charCodeAt(0);
  const end = src.length;
  let pos = 0;
  let line = 1;
  let error: CsvError | undefined;

  /** Where an unquoted stretch from `from` ends: the next delimiter or line break, or the end. */
  function plainEnd(from: number): number {
    let i = from;
    while (i < end) {
      const c = src.charCodeAt(i);
      if (c === delim || c === LF || c === CR) break;
      i++;
    }
    return i;
  }

  /** The record at pos (null for a blank line, undefined once a quoted field is never closed); pos moves past it. */
  function record(): CsvRecord | null | undefined {
    const recordLine = line;
    const fields: string[] = [];
    for (;;) {
      // Spaces before an opening quote are padding (RFC 4180 has none, spreadsheets write them).
      let start = pos;
      while (start < end && src.charCodeAt(start) === SPACE) start++;
      let value: string;
      let fieldEnd: number;
      if (start < end && src.charCodeAt(start) === QUOTE) {
        const openedOn = line;
        let close = start + 1;
        let doubled = false;
        for (;;) {
          if (close >= end) {
            error = { line: openedOn, message: `a quoted field opened on line ${openedOn} is never closed` };
            pos = end;
            return undefined;
          }
          const c = src.charCodeAt(close);
          if (c === QUOTE) {
            if (src.charCodeAt(close + 1) !== QUOTE) break;
            doubled = true;
            close += 2;
            continue;
          }
          // A line break inside the field moves the line count on (CRLF once).
          if (c === LF || (c === CR && src.charCodeAt(close + 1) !== LF)) line++;
          close++;
        }
        const raw = src.slice(start + 1, close);
        value = doubled ? raw.replaceAll('""', '"') : raw;
        // After the closing quote, spaces up to the delimiter are padding; other text is kept
        // as written (lenient), the spaces before it included.
        let after = close + 1;
        while (after < end && src.charCodeAt(after) === SPACE) after++;
        fieldEnd = plainEnd(after);
        if (fieldEnd > after) value += src.slice(close + 1, fieldEnd);
      } else {
        // An unquoted field keeps any quote in it that does not open it.
        fieldEnd = plainEnd(pos);
        value = src.slice(pos, fieldEnd);
      }
      fields.push(value);
      if (fieldEnd >= end) {
        pos = end;
        break;
      }
      const c = src.charCodeAt(fieldEnd);
      if (c === delim) {
        pos = fieldEnd + 1;
        continue;
      }
      pos = c === CR && src.charCodeAt(fieldEnd + 1) === LF ? fieldEnd + 2 : fieldEnd + 1;
      line++;
      break;
    }
    // A blank line is no record (a trailing newline, an empty line between rows).
    return fields.length === 1 && fields[0] === '' ? null : { line: recordLine, fields };
  }

  return {
    read(chars: number): CsvRecord[] {
      const records: CsvRecord[] = [];
      const stop = pos + chars;
      while (pos < end && !error && pos < stop) {
        const r = record();
        if (r) records.push(r);
      }
      return records;
    },
    get done() {
      return pos >= end || error !== undefined;
    },
    get error() {
      return error;
    },
  };
}

/** The whole text at once (small files, tests); the import reads a cursor a piece at a time. */
export function parseCsv(text: string): { records: CsvRecord[]; error?: CsvError } {
  const cursor = csvCursor(text);
  const records = cursor.read(Infinity);
  return cursor.error ? { records, error: cursor.error } : { records };
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

/** Characters of the file read between two turns of the event loop (a few ms of work). */
export const CSV_PIECE_CHARS = 256 * 1024;

/**
 * The contacts of a CSV file, a piece of CSV_PIECE_CHARS at a time: it yields after each piece
 * (contactsFromCsv runs straight through, readContactsCsv gives the event loop a turn there).
 */
function* contactPieces(text: string): Generator<void, CsvContactRow[]> {
  if (Buffer.byteLength(text) > MAX_CSV_BYTES) throw badRequest(`file: at most ${MAX_CSV_BYTES / 1024 / 1024} MB`);
  const cursor = csvCursor(text);
  let records = cursor.read(CSV_PIECE_CHARS);
  while (!records.length && !cursor.done) {
    yield;
    records = cursor.read(CSV_PIECE_CHARS);
  }
  if (records.length === 0) throw badRequest('file: is empty; the first line must name the columns, one of them email');
  const header = records[0]!;
  // Empty names at the end of the header (a trailing delimiter) are ignored columns, which a
  // row may leave out; an empty name between named columns is still refused by columnOf.
  let named = header.fields.length;
  while (named > 1 && header.fields[named - 1]!.trim() === '') named--;
  const columns: Column[] = header.fields.map((h, i) => (i < named ? columnOf(h, i) : { kind: 'ignored' }));
  if (!columns.some((c) => c.kind === 'email')) throw badRequest('file: the first line must name the columns, and one of them must be email');
  const seen = new Set<string>();
  for (const c of columns) {
    if (c.kind === 'ignored') continue;
    const key = c.kind === 'property' ? `p:${c.key}` : c.kind;
    if (seen.has(key)) throw badRequest(`file: column ${c.kind === 'property' ? c.key : c.kind} appears twice`);
    seen.add(key);
  }
  const emailIndex = columns.findIndex((c) => c.kind === 'email');
  const contactOf = (r: CsvRecord): CsvContactRow => {
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
  };
  const out: CsvContactRow[] = [];
  // Past MAX_CSV_ROWS the rows are only counted, for the message: the file is refused.
  let count = 0;
  for (let piece = records.slice(1); ; ) {
    for (const r of piece) {
      // A row of empty cells is no row: spreadsheets save the rows once formatted as ",,,".
      if (!r.fields.some((f) => f.trim() !== '')) continue;
      if (++count <= MAX_CSV_ROWS) out.push(contactOf(r));
    }
    if (cursor.done) break;
    yield;
    piece = cursor.read(CSV_PIECE_CHARS);
  }
  if (count > MAX_CSV_ROWS) throw badRequest(`file: at most ${MAX_CSV_ROWS} rows per import (this one has ${count})`);
  const error = cursor.error;
  if (error) out.push({ line: error.line, email: '', error: error.message });
  return out;
}

/** The contacts of a CSV file, in one go; a header problem refuses the whole file (400 naming the column). */
export function contactsFromCsv(text: string): CsvContactRow[] {
  const pieces = contactPieces(text);
  for (;;) {
    const step = pieces.next();
    if (step.done) return step.value;
  }
}

/**
 * contactsFromCsv for a file of up to 20 MB on the shared thread: a piece at a time, each in
 * its own turn of the event loop (turn-yield.ts), so every other request is served between.
 */
export async function readContactsCsv(text: string): Promise<CsvContactRow[]> {
  const pieces = contactPieces(text);
  for (;;) {
    const step = pieces.next();
    if (step.done) return step.value;
    await yieldTurn();
  }
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
