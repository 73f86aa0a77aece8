import type { BlockNode, ButtonNode, EditorDoc, InlineNode, ListItemNode, Mark, ParagraphNode, TextNode } from './editor-document.js';
import { formatPlaceholder, readPlaceholderAt } from './variables.js';

/*
 * A small text markup for editor documents, so a person can write a template or campaign in a
 * text box (the console) instead of editor JSON. It covers what most messages use:
 *
 *   # Heading, ## Heading, ### Heading       headings
 *   - item / * item, 1. item                 bullet and ordered lists (one line per item)
 *   ---                                      a horizontal rule
 *   [[Button text]](https://example.com)     a button, on a line of its own
 *   **bold**, *italic*, [text](https://...)  inline marks and links
 *   {{firstName}}, {{name,fallback=there}}   variables, filled in at send time
 *   \* \[ \{ \\                              the character itself
 *
 * Blank lines separate paragraphs; a single line break stays a line break. documentToMarkup
 * is the way back, for documents that use nothing else (otherwise null: edit the JSON).
 */

const HEADING = /^(#{1,3}) +(.*)$/;
const BULLET = /^[-*] +(.*)$/;
const ORDERED = /^(\d{1,6})\. +(.*)$/;

/**
 * `[text](url)` at a position, as /^\[([^\]]+)\]\((\S+?)\)/ would match it there, in time linear
 * in the whole line: the regex, tried at each '[', scans to the line's end when nothing closes it,
 * so a line of '[' (or of '[a](') took time quadratic in its length (a 2 MB form: hours of the
 * one thread that also sends the mail). Positions are asked in increasing order; the next ']'
 * and the next ')' or space are found once and reused until passed.
 */
function linkFinder(src: string) {
  let close = -1; // the first ']' after the last position asked (src.length: none)
  let stopFrom = -1;
  let stop = -1; // the first ')' or white space at or after stopFrom (src.length: none)
  return {
    at(i: number): { text: string; href: string; end: number } | null {
      if (close <= i) {
        close = src.indexOf(']', i + 1);
        if (close < 0) close = src.length;
      }
      if (close >= src.length || close === i + 1 || src[close + 1] !== '(') return null;
      const from = close + 2; // the URL: one non-space character at least, then up to the first ')'
      if (from >= src.length || /\s/.test(src[from]!)) return null;
      if (!(stopFrom <= from + 1 && from + 1 <= stop)) {
        stopFrom = from + 1;
        const rest = /[)\s]/g;
        rest.lastIndex = stopFrom;
        stop = rest.exec(src)?.index ?? src.length;
      }
      if (stop >= src.length || src[stop] !== ')') return null;
      return { text: src.slice(i + 1, close), href: src.slice(from, stop), end: stop + 1 };
    },
  };
}

/**
 * `[[text]](url)` filling a line, as /^\[\[(.+?)\]\]\((\S+?)\)$/ would read it, in linear time: the
 * regex tried each ']](' and scanned from it to the line's end, so a 2 MB line of 'a]](' took
 * minutes. The text ends at the first ']](' after which the rest, up to the closing ')', is one
 * run of non-space characters; the text itself holds no line terminator ('.' does not match one).
 */
function readButton(line: string): { text: string; url: string } | null {
  if (!line.startsWith('[[') || !line.endsWith(')') || line.length < 8) return null;
  const last = line.length - 1; // the closing ')'
  let runStart = last; // where the non-space run before the ')' begins
  while (runStart > 0 && !/\s/.test(line[runStart - 1]!)) runStart--;
  const close = line.indexOf(']](', Math.max(3, runStart - 3));
  if (close < 0 || close + 3 >= last) return null;
  const text = line.slice(2, close);
  if (/[\n\r\u2028\u2029]/.test(text)) return null;
  return { text, url: line.slice(close + 3, last) };
}

/** Inline markup to editor nodes. */
function inline(src: string): InlineNode[] {
  const links = linkFinder(src);
  const out: InlineNode[] = [];
  let buf = '';
  let marks: Mark[] = [];
  const flush = () => {
    if (buf) out.push(marks.length ? { type: 'text', text: buf, marks: [...marks] } : { type: 'text', text: buf });
    buf = '';
  };
  const toggle = (type: 'bold' | 'italic') => {
    flush();
    marks = marks.some((m) => m.type === type) ? marks.filter((m) => m.type !== type) : [...marks, { type }];
  };
  for (let i = 0; i < src.length; ) {
    const c = src[i]!;
    if (c === '\\' && i + 1 < src.length && '\\*[]{}'.includes(src[i + 1]!)) {
      buf += src[i + 1];
      i += 2;
    } else if (c === '*' && src[i + 1] === '*') {
      toggle('bold');
      i += 2;
    } else if (c === '*') {
      toggle('italic');
      i += 1;
    } else if (c === '{' && src[i + 1] === '{') {
      const p = readPlaceholderAt(src, i);
      if (!p) {
        buf += c;
        i += 1;
        continue;
      }
      flush();
      out.push(p.fallback === undefined ? { type: 'variable', attrs: { id: p.name } } : { type: 'variable', attrs: { id: p.name, fallback: p.fallback } });
      i = p.end;
    } else if (c === '[') {
      const m = links.at(i);
      if (!m) {
        buf += c;
        i += 1;
        continue;
      }
      flush();
      const link: Mark = { type: 'link', attrs: { href: m.href } };
      out.push({ type: 'text', text: m.text, marks: [...marks, link] });
      i = m.end;
    } else {
      buf += c;
      i += 1;
    }
  }
  flush();
  return out;
}

function paragraph(lines: string[]): ParagraphNode {
  const content: InlineNode[] = [];
  lines.forEach((l, i) => {
    if (i > 0) content.push({ type: 'hardBreak' });
    content.push(...inline(l));
  });
  return content.length ? { type: 'paragraph', content } : { type: 'paragraph' };
}

const item = (text: string): ListItemNode => ({ type: 'listItem', content: [paragraph([text])] });

export function markupToDocument(text: string): EditorDoc {
  const blocks: BlockNode[] = [];
  let para: string[] = [];
  const endPara = () => {
    if (para.length) blocks.push(paragraph(para));
    para = [];
  };
  for (const raw of text.replace(/\r\n?/g, '\n').split('\n')) {
    const line = raw.trimEnd();
    const last = blocks[blocks.length - 1];
    let m: RegExpExecArray | null;
    let button: { text: string; url: string } | null;
    if (line.trim() === '') endPara();
    else if (line.trim() === '---') {
      endPara();
      blocks.push({ type: 'horizontalRule' });
    } else if ((m = HEADING.exec(line))) {
      endPara();
      const content = inline(m[2]!);
      blocks.push({ type: 'heading', attrs: { level: m[1]!.length as 1 | 2 | 3 }, ...(content.length ? { content } : {}) });
    } else if ((button = readButton(line.trim()))) {
      endPara();
      blocks.push({ type: 'button', attrs: button });
    } else if ((m = BULLET.exec(line)) && !para.length) {
      if (last?.type === 'bulletList') last.content.push(item(m[1]!));
      else blocks.push({ type: 'bulletList', content: [item(m[1]!)] });
    } else if ((m = ORDERED.exec(line)) && !para.length) {
      if (last?.type === 'orderedList') last.content.push(item(m[2]!));
      else blocks.push({ type: 'orderedList', ...(m[1] !== '1' ? { attrs: { start: Number(m[1]) } } : {}), content: [item(m[2]!)] });
    } else para.push(line);
  }
  endPara();
  return { type: 'doc', content: blocks };
}

// ---------------------------------------------------------------------------
// Back to markup

const escapeText = (s: string) => s.replace(/[\\*[\]{}]/g, (c) => `\\${c}`);

function inlineToMarkup(nodes: InlineNode[] | undefined): string | null {
  let out = '';
  for (const n of nodes ?? []) {
    if (n.type === 'hardBreak') out += '\n';
    else if (n.type === 'variable') out += formatPlaceholder(n.attrs.id, n.attrs.fallback);
    else {
      const t = n as TextNode;
      if (t.text.includes('\n')) return null;
      let s = escapeText(t.text);
      for (const m of t.marks ?? []) {
        if (m.type === 'bold') s = `**${s}**`;
        else if (m.type === 'italic') s = `*${s}*`;
        else if (m.type === 'link' && !/[\s)]/.test(m.attrs.href) && (t.marks ?? []).indexOf(m) === (t.marks ?? []).length - 1) s = `[${s}](${m.attrs.href})`;
        else return null;
      }
      out += s;
    }
  }
  return out;
}

function listItemText(li: ListItemNode): string | null {
  if (li.content.length !== 1 || li.content[0]!.type !== 'paragraph' || li.content[0]!.attrs?.textAlign) return null;
  const s = inlineToMarkup(li.content[0]!.content);
  return s === null || s.includes('\n') ? null : s;
}

/** The markup of a document, or null when it uses anything markup cannot express. */
export function documentToMarkup(doc: EditorDoc): string | null {
  const parts: string[] = [];
  for (const b of doc.content) {
    let s: string | null;
    if (b.type === 'paragraph') {
      s = b.attrs?.textAlign ? null : inlineToMarkup(b.content);
      // A paragraph that would read back as another block stays JSON.
      if (s !== null && (s === '' || /^(#{1,3} |[-*] |\d{1,6}\. |---$|\[\[)/m.test(s))) s = null;
    } else if (b.type === 'heading') {
      const text = b.attrs.textAlign ? null : inlineToMarkup(b.content);
      s = text === null || text.includes('\n') ? null : `${'#'.repeat(b.attrs.level)} ${text}`;
    } else if (b.type === 'bulletList' || b.type === 'orderedList') {
      const items = b.content.map(listItemText);
      const start = b.type === 'orderedList' ? (b.attrs?.start ?? 1) : 0;
      s = items.some((i) => i === null) ? null : items.map((i, n) => (b.type === 'bulletList' ? `- ${i}` : `${start + n}. ${i}`)).join('\n');
    } else if (b.type === 'horizontalRule') s = '---';
    else if (b.type === 'button') {
      const a = (b as ButtonNode).attrs;
      const styled = a.alignment || a.borderRadius !== undefined || a.buttonColor || a.textColor || a.borderColor || a.borderWidth !== undefined;
      s = styled || /[\]\n]/.test(a.text) || /\s/.test(a.url) ? null : `[[${a.text}]](${a.url})`;
    } else s = null;
    if (s === null) return null;
    parts.push(s);
  }
  return parts.join('\n\n');
}
