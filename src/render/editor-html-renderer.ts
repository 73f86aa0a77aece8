import type {
  Alignment,
  BlockNode,
  ButtonNode,
  EditorDoc,
  ImageNode,
  InlineNode,
  LogoNode,
  Mark,
  SpacerNode,
  TextAlign,
  UnsubscribeFooterNode,
} from './editor-document.js';
import { safeColor, safeFontSize, safeFontWeight, toPercent, toPixels } from './css-values.js';
import { escapeHtml } from './html-escape.js';
import { safeHref, safeImageSrc } from './safe-url.js';
import { linksToUnsubscribe, UNSUBSCRIBE_PLACEHOLDER } from './unsubscribe-link.js';
import { formatPlaceholder } from './variables.js';

/*
 * Renders the editor document as an email-client-safe HTML document:
 * table layout, every style inline (Gmail strips <style> in many cases,
 * Outlook ignores most of it), system fonts only, no scripts or external CSS.
 * Output is deterministic so it can be snapshot-tested and cached.
 */

export interface RenderHtmlOptions {
  /** Inbox preview snippet, emitted as a hidden preheader. */
  previewText?: string;
}

export const CONTAINER_WIDTH = 600;
const CONTENT_PADDING = 32;
/** Usable width inside the container; images are clamped to it for Outlook, which ignores max-width. */
export const CONTENT_WIDTH = CONTAINER_WIDTH - 2 * CONTENT_PADDING;


// No quotes needed: multi-word family names are valid unquoted CSS, and it keeps attributes readable.
const FONT_FAMILY = '-apple-system,BlinkMacSystemFont,Segoe UI,Roboto,Helvetica,Arial,sans-serif';
const MONO_FAMILY = 'SFMono-Regular,Menlo,Monaco,Consolas,Liberation Mono,Courier New,monospace';

const COLORS = {
  page: '#f4f4f5',
  card: '#ffffff',
  text: '#374151',
  heading: '#111827',
  muted: '#6b7280',
  link: '#2563eb',
  rule: '#e5e7eb',
  quoteBorder: '#d1d5db',
  quoteText: '#4b5563',
  codeBackground: '#f3f4f6',
  codeText: '#111827',
  buttonBackground: '#111827',
  buttonText: '#ffffff',
} as const;

const HEADINGS = {
  1: { fontSize: '28px', lineHeight: '36px', fontWeight: '700' },
  2: { fontSize: '22px', lineHeight: '30px', fontWeight: '700' },
  3: { fontSize: '18px', lineHeight: '26px', fontWeight: '600' },
} as const;

const SPACER_HEIGHTS: Record<string, number> = { sm: 8, md: 16, lg: 32, xl: 64 };
const LOGO_SIZES: Record<string, number> = { sm: 40, md: 48, lg: 64 };
const MAX_SPACER = 400;

const BLOCK_GAP = '16px';

type Style = Record<string, string | number | undefined>;

function css(style: Style): string {
  const parts: string[] = [];
  for (const [prop, value] of Object.entries(style)) {
    if (value !== undefined && value !== '') parts.push(`${prop}:${value}`);
  }
  return parts.join(';');
}

function attrs(values: Record<string, string | number | undefined>): string {
  let out = '';
  for (const [name, value] of Object.entries(values)) {
    if (value !== undefined) out += ` ${name}="${escapeHtml(String(value))}"`;
  }
  return out;
}

function styled(style: Style): string {
  const text = css(style);
  return text === '' ? '' : attrs({ style: text });
}

/** role=presentation stops screen readers announcing layout tables as data. */
function layoutTable(inner: string, style?: Style, extra: { width?: string | null; align?: string } = {}): string {
  // width null: shrink to fit (buttons); a missing width means full width.
  const width = extra.width === null ? undefined : (extra.width ?? '100%');
  return (
    `<table${attrs({ role: 'presentation', width, align: extra.align, cellpadding: '0', cellspacing: '0', border: '0' })}` +
    `${styled({ 'border-collapse': 'separate', ...style })}>${inner}</table>`
  );
}

// ---------------------------------------------------------------------------
// Inline content

// Lower rank wraps first (innermost). The link goes outermost so one <a>
// covers the styled text and the link colour can be overridden by textStyle.
const MARK_RANK: Record<Mark['type'], number> = {
  code: 0,
  bold: 1,
  italic: 2,
  underline: 3,
  strike: 4,
  textStyle: 5,
  color: 6,
  link: 7,
};

function applyMark(html: string, mark: Mark): string {
  switch (mark.type) {
    case 'bold':
      return `<strong>${html}</strong>`;
    case 'italic':
      return `<em>${html}</em>`;
    case 'underline':
      return `<u>${html}</u>`;
    case 'strike':
      return `<s${styled({ 'text-decoration': 'line-through' })}>${html}</s>`;
    case 'code':
      return `<code${styled({
        'font-family': MONO_FAMILY,
        'font-size': '0.9em',
        'background-color': COLORS.codeBackground,
        color: COLORS.codeText,
        padding: '2px 4px',
        'border-radius': '4px',
      })}>${html}</code>`;
    case 'textStyle': {
      const style = css({
        color: safeColor(mark.attrs?.color),
        'font-size': safeFontSize(mark.attrs?.fontSize),
        'font-weight': safeFontWeight(mark.attrs?.fontWeight),
      });
      return style === '' ? html : `<span${attrs({ style })}>${html}</span>`;
    }
    case 'color': {
      const color = safeColor(mark.attrs?.color);
      return color === undefined ? html : `<span${styled({ color })}>${html}</span>`;
    }
    case 'link': {
      const href = safeHref(mark.attrs.href);
      // A link we will not emit still shows its text: the reader loses the
      // link, not the sentence.
      if (href === undefined) return html;
      const target = mark.attrs.target && /^_(?:blank|self|parent|top)$/.test(mark.attrs.target) ? mark.attrs.target : '_blank';
      return `<a${attrs({ href, target, rel: 'noopener noreferrer' })}${styled({ color: COLORS.link, 'text-decoration': 'underline' })}>${html}</a>`;
    }
    default:
      // Only reachable with an unvalidated document: ignore what we do not know.
      return html;
  }
}

function renderText(text: string, marks: Mark[] | undefined): string {
  let html = escapeHtml(text);
  if (!marks || marks.length === 0) return html;
  const ordered = [...marks].sort((a, b) => (MARK_RANK[a.type] ?? 0) - (MARK_RANK[b.type] ?? 0));
  for (const mark of ordered) html = applyMark(html, mark);
  return html;
}

function renderInline(nodes: InlineNode[] | undefined): string {
  if (!nodes) return '';
  let html = '';
  for (const node of nodes) {
    switch (node.type) {
      case 'text':
        html += renderText(node.text, node.marks);
        break;
      case 'hardBreak':
        html += '<br>';
        break;
      case 'variable':
        // Left as a placeholder: substitution happens once, at send time.
        html += escapeHtml(formatPlaceholder(node.attrs.id, node.attrs.fallback));
        break;
    }
  }
  return html;
}

// ---------------------------------------------------------------------------
// Blocks

interface BlockContext {
  /** Last child of its container, or followed by a spacer: no bottom margin, so spacing is predictable. */
  tight: boolean;
  /** Text colour inherited from the container (blockquotes are muted). */
  color: string;
  /** Paragraphs inside list items sit closer together. */
  inListItem: boolean;
}

function gap(ctx: BlockContext, size = BLOCK_GAP): string {
  return ctx.tight ? '0' : size;
}

function textAlign(align: TextAlign | undefined): string | undefined {
  return align && align !== 'left' ? align : undefined;
}

function alignment(value: Alignment | undefined, fallback: Alignment): Alignment {
  return value === 'left' || value === 'center' || value === 'right' ? value : fallback;
}

function bodyText(ctx: BlockContext, extra: Style = {}): Style {
  return {
    'font-family': FONT_FAMILY,
    'font-size': '15px',
    'line-height': '24px',
    color: ctx.color,
    ...extra,
  };
}

function renderBlocks(nodes: BlockNode[] | undefined, parent: Omit<BlockContext, 'tight'>): string {
  if (!nodes || nodes.length === 0) return '';
  const out: string[] = [];
  nodes.forEach((node, i) => {
    const next = nodes[i + 1];
    const tight = next === undefined || next.type === 'spacer';
    const html = renderBlock(node, { ...parent, tight });
    if (html !== '') out.push(html);
  });
  return out.join('\n');
}

function renderBlock(node: BlockNode, ctx: BlockContext): string {
  switch (node.type) {
    case 'paragraph': {
      const inner = renderInline(node.content);
      const margin = ctx.inListItem ? gap(ctx, '8px') : gap(ctx);
      // An empty paragraph is a deliberate blank line in the editor.
      return `<p${styled(bodyText(ctx, { margin: `0 0 ${margin} 0`, 'text-align': textAlign(node.attrs?.textAlign) }))}>${inner === '' ? '&nbsp;' : inner}</p>`;
    }
    case 'heading': {
      const level = node.attrs.level === 2 || node.attrs.level === 3 ? node.attrs.level : 1;
      const h = HEADINGS[level];
      const inner = renderInline(node.content);
      return `<h${level}${styled({
        margin: `0 0 ${gap(ctx, '12px')} 0`,
        'font-family': FONT_FAMILY,
        'font-size': h.fontSize,
        'line-height': h.lineHeight,
        'font-weight': h.fontWeight,
        color: COLORS.heading,
        'text-align': textAlign(node.attrs.textAlign),
      })}>${inner === '' ? '&nbsp;' : inner}</h${level}>`;
    }
    case 'bulletList':
    case 'orderedList': {
      const tag = node.type === 'bulletList' ? 'ul' : 'ol';
      const start = node.type === 'orderedList' && node.attrs?.start !== undefined && node.attrs.start !== 1 ? node.attrs.start : undefined;
      const items = node.content.map((item, i) => {
        const last = i === node.content.length - 1;
        const inner = renderBlocks(item.content, { color: ctx.color, inListItem: true });
        // Font and colour come from the list; paragraphs inside set their own.
        return `<li${styled({ margin: `0 0 ${last ? '0' : '8px'} 0` })}>${inner}</li>`;
      });
      return `<${tag}${attrs({ start })}${styled(bodyText(ctx, {
        margin: `0 0 ${ctx.inListItem ? gap(ctx, '8px') : gap(ctx)} 0`,
        padding: '0 0 0 24px',
        'list-style-type': tag === 'ul' ? 'disc' : 'decimal',
      }))}>\n${items.join('\n')}\n</${tag}>`;
    }
    case 'blockquote':
      return `<blockquote${styled({
        margin: `0 0 ${gap(ctx)} 0`,
        padding: '4px 0 4px 16px',
        'border-left': `4px solid ${COLORS.quoteBorder}`,
      })}>\n${renderBlocks(node.content, { color: COLORS.quoteText, inListItem: false })}\n</blockquote>`;
    case 'codeBlock': {
      const code = (node.content ?? []).map((t) => t.text).join('');
      return `<pre${styled({
        margin: `0 0 ${gap(ctx)} 0`,
        padding: '16px',
        'background-color': COLORS.codeBackground,
        'border-radius': '6px',
        'font-family': MONO_FAMILY,
        'font-size': '13px',
        'line-height': '20px',
        color: COLORS.codeText,
        'white-space': 'pre-wrap',
        'word-wrap': 'break-word',
      })}>${escapeHtml(code)}</pre>`;
    }
    case 'horizontalRule':
      return `<hr${styled({
        margin: `24px 0 ${ctx.tight ? '0' : '24px'} 0`,
        border: '0',
        'border-top': `1px solid ${COLORS.rule}`,
        height: '0',
      })}>`;
    case 'button':
      return renderButton(node, ctx);
    case 'image':
      return renderImage(node, ctx);
    case 'logo':
      return renderLogo(node, ctx);
    case 'spacer':
      return renderSpacer(node);
    case 'unsubscribeFooter':
      return renderUnsubscribeFooter(node, ctx);
    default:
      // Only reachable with an unvalidated document (parseEditorDocument rejects unknown nodes).
      return '';
  }
}

/** Wraps a table-based block in a full-width row so its bottom spacing survives Outlook (which ignores table margins). */
function blockRow(inner: string, align: Alignment, ctx: BlockContext, bottom = BLOCK_GAP): string {
  return layoutTable(`<tr><td${attrs({ align })}${styled({ padding: `0 0 ${ctx.tight ? '0' : bottom} 0` })}>${inner}</td></tr>`);
}

function renderButton(node: ButtonNode, ctx: BlockContext): string {
  const a = node.attrs;
  const label = a.text.trim();
  if (label === '') return '';
  const align = alignment(a.alignment, 'left');
  const background = safeColor(a.buttonColor) ?? COLORS.buttonBackground;
  const color = safeColor(a.textColor) ?? COLORS.buttonText;
  const radius = toPixels(a.borderRadius) ?? 6;
  const borderWidth = toPixels(a.borderWidth) ?? 0;
  const borderColor = safeColor(a.borderColor) ?? background;
  const href = safeHref(a.url);
  const labelStyle: Style = {
    display: 'inline-block',
    padding: '12px 28px',
    'font-family': FONT_FAMILY,
    'font-size': '15px',
    'font-weight': '600',
    'line-height': '20px',
    color,
    'text-decoration': 'none',
    'border-radius': `${radius}px`,
  };
  // Without a usable URL the button still shows (the author sees the mistake
  // in the preview) but is not a link.
  const labelHtml =
    href === undefined
      ? `<span${styled(labelStyle)}>${escapeHtml(label)}</span>`
      : `<a${attrs({ href, target: '_blank', rel: 'noopener noreferrer' })}${styled(labelStyle)}>${escapeHtml(label)}</a>`;
  const cell =
    `<tr><td${attrs({ align: 'center', bgcolor: background })}${styled({
      'background-color': background,
      'border-radius': `${radius}px`,
      border: borderWidth > 0 ? `${borderWidth}px solid ${borderColor}` : undefined,
      // Outlook ignores padding on <a>; this gives the button its size there.
      'mso-padding-alt': '12px 28px',
    })}>${labelHtml}</td></tr>`;
  return blockRow(layoutTable(cell, undefined, { width: null, align }), align, ctx, '20px');
}

interface ImageBox {
  widthAttr?: string;
  heightAttr?: string;
  style: Style;
}

/** Width/height as HTML attributes (Outlook) and CSS (everyone else), never wider than the content column. */
function imageBox(width: unknown, height: unknown): ImageBox {
  const px = toPixels(width);
  if (px !== undefined && px > 0) {
    const w = Math.min(Math.round(px), CONTENT_WIDTH);
    const hpx = toPixels(height);
    const h = hpx !== undefined && hpx > 0 ? Math.round((hpx * w) / px) : undefined;
    return {
      widthAttr: String(w),
      heightAttr: h === undefined ? undefined : String(h),
      style: { width: '100%', 'max-width': `${w}px`, height: 'auto' },
    };
  }
  const pct = toPercent(width);
  if (pct !== undefined) {
    return { widthAttr: `${pct}%`, style: { width: `${pct}%`, 'max-width': '100%', height: 'auto' } };
  }
  return { style: { 'max-width': '100%', height: 'auto' } };
}

function imageMargin(align: Alignment): string {
  return align === 'center' ? '0 auto' : align === 'right' ? '0 0 0 auto' : '0';
}

function renderImage(node: ImageNode, ctx: BlockContext): string {
  const a = node.attrs;
  const src = safeImageSrc(a.src);
  if (src === undefined) return '';
  const align = alignment(a.alignment, 'center');
  const box = imageBox(a.width, a.height);
  const radius = toPixels(a.borderRadius);
  const borderWidth = toPixels(a.borderWidth) ?? 0;
  const borderColor = safeColor(a.borderColor);
  const img = `<img${attrs({ src, alt: a.alt ?? a.title ?? '', width: box.widthAttr, height: box.heightAttr })}${styled({
    display: 'block',
    ...box.style,
    margin: imageMargin(align),
    border: borderWidth > 0 && borderColor ? `${borderWidth}px solid ${borderColor}` : '0',
    'border-radius': radius ? `${radius}px` : undefined,
    outline: 'none',
    'text-decoration': 'none',
  })}>`;
  const link = a.externalLink === undefined ? undefined : safeHref(a.externalLink);
  const inner =
    link === undefined
      ? img
      : `<a${attrs({ href: link, target: '_blank', rel: 'noopener noreferrer' })}${styled({ display: 'block', 'text-decoration': 'none' })}>${img}</a>`;
  return blockRow(inner, align, ctx, '24px');
}

function renderLogo(node: LogoNode, ctx: BlockContext): string {
  const a = node.attrs;
  const src = safeImageSrc(a.src);
  if (src === undefined) return '';
  const align = alignment(a.alignment, 'left');
  const size = typeof a.size === 'string' && Object.hasOwn(LOGO_SIZES, a.size) ? LOGO_SIZES[a.size]! : Math.min(toPixels(a.size) ?? 48, CONTENT_WIDTH);
  const img = `<img${attrs({ src, alt: a.alt ?? a.title ?? 'Logo', width: String(size), height: String(size) })}${styled({
    display: 'block',
    width: `${size}px`,
    height: `${size}px`,
    margin: imageMargin(align),
    border: '0',
    outline: 'none',
    'text-decoration': 'none',
  })}>`;
  return blockRow(img, align, ctx, '24px');
}

function renderSpacer(node: SpacerNode): string {
  const raw = node.attrs?.height;
  const height = Math.min(
    Math.round(typeof raw === 'string' && Object.hasOwn(SPACER_HEIGHTS, raw) ? SPACER_HEIGHTS[raw]! : toPixels(raw) ?? SPACER_HEIGHTS.md!),
    MAX_SPACER,
  );
  // An &nbsp; cell with an exact line-height is the one spacer every client (Outlook included) honours.
  return layoutTable(
    `<tr><td${attrs({ height: String(height) })}${styled({
      height: `${height}px`,
      'line-height': `${height}px`,
      'font-size': '1px',
      'mso-line-height-rule': 'exactly',
    })}>&nbsp;</td></tr>`,
  );
}


function renderUnsubscribeFooter(node: UnsubscribeFooterNode, ctx: BlockContext): string {
  const inner = renderInline(node.content);
  const link = `<a${attrs({ href: UNSUBSCRIBE_PLACEHOLDER, target: '_blank', rel: 'noopener noreferrer' })}${styled({
    color: COLORS.muted,
    'text-decoration': 'underline',
  })}>Unsubscribe</a>`;
  // Authors may already have linked their own text to the unsubscribe URL.
  const body = linksToUnsubscribe(node.content) ? inner : inner === '' ? link : `${inner}<br>${link}`;
  return `<p${styled({
    margin: `16px 0 ${gap(ctx)} 0`,
    'font-family': FONT_FAMILY,
    'font-size': '12px',
    'line-height': '18px',
    color: COLORS.muted,
    'text-align': 'center',
  })}>${body}</p>`;
}

// ---------------------------------------------------------------------------
// Document

// Zero-width fillers keep the start of the body from leaking into the inbox
// preview after a short preheader.
const PREHEADER_FILLER = '&#847;&zwnj;&nbsp;'.repeat(60);

function preheader(text: string | undefined): string {
  if (text === undefined || text.trim() === '') return '';
  return `<div${styled({
    display: 'none',
    'font-size': '1px',
    'line-height': '1px',
    'max-height': '0',
    'max-width': '0',
    opacity: '0',
    overflow: 'hidden',
    'mso-hide': 'all',
  })}>${escapeHtml(text)}${PREHEADER_FILLER}</div>\n`;
}

/**
 * Just the rendered blocks, without the document shell and container: for
 * in-app previews and for tests that care about one node.
 */
export function renderEditorFragment(doc: EditorDoc): string {
  return renderBlocks(doc.content, { color: COLORS.text, inListItem: false });
}

/** Renders the document as a complete, self-contained HTML email. */
export function renderEditorHtml(doc: EditorDoc, opts: RenderHtmlOptions = {}): string {
  const body = renderEditorFragment(doc);
  const card = layoutTable(
    `<tr><td${styled({
      padding: `${CONTENT_PADDING}px`,
      'font-family': FONT_FAMILY,
      'font-size': '15px',
      'line-height': '24px',
      color: COLORS.text,
    })}>\n${body}\n</td></tr>`,
    { width: '100%', 'max-width': `${CONTAINER_WIDTH}px`, 'background-color': COLORS.card, 'border-radius': '8px' },
    { width: String(CONTAINER_WIDTH), align: 'center' },
  );
  const page = layoutTable(
    `<tr><td${attrs({ align: 'center' })}${styled({ padding: '24px 12px' })}>\n${card}\n</td></tr>`,
    { 'background-color': COLORS.page },
    { width: '100%' },
  );
  return [
    '<!DOCTYPE html>',
    '<html>',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta http-equiv="X-UA-Compatible" content="IE=edge">',
    '<meta name="x-apple-disable-message-reformatting">',
    '<meta name="format-detection" content="telephone=no,address=no,email=no,date=no,url=no">',
    '<meta name="color-scheme" content="light">',
    '<meta name="supported-color-schemes" content="light">',
    '</head>',
    `<body${styled({ margin: '0', padding: '0', width: '100%', 'background-color': COLORS.page, '-webkit-text-size-adjust': '100%' })}>`,
    `${preheader(opts.previewText)}${page}`,
    '</body>',
    '</html>',
    '',
  ].join('\n');
}
