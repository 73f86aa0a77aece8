import { createRequire } from 'node:module';
import type * as HtmlToText from 'html-to-text';
import type { HtmlToTextOptions } from 'html-to-text';

/*
 * Plain-text alternative for sends that only supply HTML. Multipart mail with
 * a sensible text part scores better with spam filters and reads in
 * text-only clients.
 */

/**
 * Largest HTML a text is made from. The conversion runs in time linear in the HTML but slowly
 * (about 0.5 s per MB of paragraphs, 0.8 s per MB of table rows, 1 s per 200 KB of nested
 * markup) and holds up the thread it runs on. Mail's HTML is far smaller (clients clip it past
 * ~100 KB); larger HTML goes without a text made from it. Shared by outbound sends, campaigns
 * and received mail.
 */
export const HTML_TO_TEXT_MAX_CHARS = 256 * 1024;

const HEADINGS = ['h1', 'h2', 'h3', 'h4', 'h5', 'h6'];

const OPTIONS: HtmlToTextOptions = {
  wordwrap: 78,
  selectors: [
    { selector: 'a', options: { linkBrackets: ['[', ']'], hideLinkHrefIfSameAsText: true } },
    { selector: 'img', format: 'skip' },
    // Hidden preheaders are inbox-preview filler, not content.
    { selector: 'div[style*="display:none"]', format: 'skip' },
    { selector: 'div[style*="display: none"]', format: 'skip' },
    // Keep heading case: uppercasing would also rewrite `{{firstName}}`
    // placeholders if the HTML has not been personalised yet.
    ...HEADINGS.map((selector) => ({ selector, options: { uppercase: false } })),
    // Tables as blocks, not grids: most in mail are layout. A row is a line of its own and cells
    // are kept apart by a space, so a receipt's "Widget $5" does not run into "ItemPriceWidget$5".
    { selector: 'table', format: 'block' },
    { selector: 'tr', format: 'block', options: { leadingLineBreaks: 1, trailingLineBreaks: 1 } },
    { selector: 'td', format: 'tableCell' },
    { selector: 'th', format: 'tableCell' },
  ],
  formatters: {
    // The space after a cell is ordinary white space: it collapses with the cell's own and is
    // dropped at the start of a line, so empty spacer cells leave nothing behind.
    tableCell: (elem, walk, builder) => {
      walk(elem.children, builder);
      builder.addInline(' ');
    },
  },
};

// Compiling once builds the selector matcher once, not per message; html-to-text (~10 MB) is
// loaded by the first HTML-only message, not at start.
let converter: ((html: string) => string) | undefined;
const convert = (html: string): string => {
  converter ??= (createRequire(import.meta.url)('html-to-text') as typeof HtmlToText).compile(OPTIONS);
  return converter(html);
};

export function htmlToPlainText(html: string): string {
  // Layout tables and &nbsp; spacer cells leave whitespace-only lines behind.
  return convert(html)
    .split('\n')
    .map((line) => line.trimEnd())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    // Only blank lines are trimmed: a leading space can be list indentation.
    .replace(/^\n+/, '')
    .replace(/\n+$/, '');
}

/**
 * The plain-text alternative of an HTML body, or undefined when the HTML is over
 * HTML_TO_TEXT_MAX_CHARS or the converter cannot read it (nesting too deep for its recursion):
 * the message then goes HTML-only, which every client reads.
 */
export function plainTextAlternative(html: string): string | undefined {
  if (html.length > HTML_TO_TEXT_MAX_CHARS) return undefined;
  try {
    return htmlToPlainText(html);
  } catch {
    return undefined;
  }
}
