import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// Reading the docs as data, for the tests that hold them to the code: tables (with the section
// each is in) and code spans, outside fenced code blocks.

export const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
export const DOCS = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];

export const readDoc = (file: string) => readFileSync(join(ROOT, file), 'utf8');

export interface TableRow {
  /** `file:line`, for messages. */
  at: string;
  cells: string[];
}
export interface Table {
  file: string;
  /** The headings above the table, outermost first (`## Command line`, `### ...`). */
  headings: string[];
  header: string[];
  rows: TableRow[];
}

/** A table row's cells: split on `|` except `\|` (which is a `|` inside a cell). */
function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split(/(?<!\\)\|/)
    .map((c) => c.trim().replaceAll('\\|', '|'));
}

/** Every table of a doc, outside fenced code. */
export function tablesOf(file: string): Table[] {
  const lines = readDoc(file).split('\n');
  const out: Table[] = [];
  const headings: string[] = [];
  let fenced = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^```/.test(line)) fenced = !fenced;
    if (fenced) continue;
    const h = /^(#{1,6})\s+(.*)$/.exec(line);
    if (h) {
      headings.length = h[1]!.length - 1;
      headings[h[1]!.length - 1] = h[2]!;
      continue;
    }
    if (line.startsWith('|') && /^\|[\s|:-]+\|$/.test(lines[i + 1] ?? '') && (lines[i + 1] ?? '').includes('---')) {
      const table: Table = { file, headings: headings.filter(Boolean), header: cells(line), rows: [] };
      i += 2;
      for (; i < lines.length && lines[i]!.startsWith('|'); i++) table.rows.push({ at: `${file}:${i + 1}`, cells: cells(lines[i]!) });
      i--;
      out.push(table);
    }
  }
  return out;
}

/** The code spans of a text (`x`), a span may run over a line break. */
export function codeSpans(text: string): string[] {
  return [...text.matchAll(/(?<!`)`([^`]+)`(?!`)/g)].map((m) => m[1]!.replace(/\s+/g, ' ').trim());
}

/** A doc's text without its fenced code blocks. */
export function prose(file: string): string {
  return readDoc(file).replace(/^```[\s\S]*?^```/gm, '');
}

/** The fenced code blocks of a doc, with the line each starts at. */
export function fencedBlocks(file: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  const lines = readDoc(file).split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!/^```/.test(lines[i]!)) continue;
    const start = i + 1;
    for (i++; i < lines.length && !/^```/.test(lines[i]!); i++);
    out.push({ line: start + 1, text: lines.slice(start, i).join('\n') });
  }
  return out;
}

/** A doc's section (the text under a heading, to the next heading of the same or a higher level). */
export function section(file: string, heading: string): string {
  const lines = readDoc(file).split('\n');
  const start = lines.findIndex((l) => l.replace(/^#+\s+/, '') === heading && l.startsWith('#'));
  if (start < 0) throw new Error(`${file} has no heading "${heading}"`);
  const level = /^#+/.exec(lines[start]!)![0].length;
  let end = start + 1;
  let fenced = false;
  for (; end < lines.length; end++) {
    if (/^```/.test(lines[end]!)) fenced = !fenced;
    const h = !fenced && /^(#+)\s/.exec(lines[end]!);
    if (h && h[1]!.length <= level) break;
  }
  return lines.slice(start, end).join('\n');
}
