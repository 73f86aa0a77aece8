import type { BlockNode, EditorDoc, InlineNode, ListItemNode } from './editor-document.js';
import { safeHref } from './safe-url.js';
import { linksToUnsubscribe, UNSUBSCRIBE_PLACEHOLDER } from './unsubscribe-link.js';
import { formatPlaceholder } from './variables.js';

/*
 * The text/plain alternative of an editor document. It is read in text-only
 * clients and by spam filters that compare both parts, so it keeps the
 * structure (headings, lists, links, buttons) without any markup syntax
 * beyond what reads naturally. Lines are not wrapped: wrapping would split
 * URLs and placeholders that are only filled in at send time.
 */


/** Inline content as text; consecutive pieces of one link share a single "(url)". */
function inlineText(nodes: InlineNode[] | undefined): string {
  if (!nodes) return '';
  let out = '';
  let linkText = '';
  let linkHref: string | undefined;

  const flush = () => {
    if (linkHref === undefined) return;
    const label = linkText.trim();
    out += label === '' || label === linkHref ? linkText || linkHref : `${linkText} (${linkHref})`;
    linkText = '';
    linkHref = undefined;
  };

  for (const node of nodes) {
    let piece: string;
    let href: string | undefined;
    if (node.type === 'text') {
      piece = node.text;
      const link = node.marks?.find((m) => m.type === 'link');
      href = link && link.type === 'link' ? safeHref(link.attrs.href) : undefined;
    } else if (node.type === 'hardBreak') {
      piece = '\n';
    } else if (node.type === 'variable') {
      piece = formatPlaceholder(node.attrs.id, node.attrs.fallback);
    } else {
      continue;
    }
    if (href !== linkHref) flush();
    if (href === undefined) {
      out += piece;
    } else {
      linkHref = href;
      linkText += piece;
    }
  }
  flush();
  return out;
}

function indent(text: string, first: string, rest: string): string {
  return text
    .split('\n')
    .map((line, i) => (i === 0 ? first : line === '' ? '' : rest) + line)
    .join('\n');
}

function listText(items: ListItemNode[], marker: (i: number) => string): string {
  return items
    .map((item, i) => {
      const m = marker(i);
      // Blocks inside one item stay tight; continuation lines align under the text.
      const body = blocksText(item.content, '\n');
      return indent(body === '' ? '' : body, m, ' '.repeat(m.length));
    })
    .join('\n');
}


function blockText(node: BlockNode): string {
  switch (node.type) {
    case 'paragraph':
      return inlineText(node.content);
    case 'heading': {
      const text = inlineText(node.content);
      const width = Math.max(0, ...text.split('\n').map((l) => l.length));
      if (text.trim() === '') return '';
      // Setext-style underlines read as headings without looking like markup.
      if (node.attrs.level === 1) return `${text}\n${'='.repeat(width)}`;
      if (node.attrs.level === 2) return `${text}\n${'-'.repeat(width)}`;
      return text;
    }
    case 'bulletList':
      return listText(node.content, () => '- ');
    case 'orderedList': {
      const start = node.attrs?.start ?? 1;
      return listText(node.content, (i) => `${start + i}. `);
    }
    case 'blockquote':
      return blocksText(node.content, '\n\n')
        .split('\n')
        .map((line) => (line === '' ? '>' : `> ${line}`))
        .join('\n');
    case 'codeBlock':
      return (node.content ?? []).map((t) => t.text).join('');
    case 'horizontalRule':
      return '---';
    case 'button': {
      const label = node.attrs.text.trim();
      if (label === '') return '';
      const href = safeHref(node.attrs.url);
      return href === undefined ? label : `${label}: ${href}`;
    }
    case 'image': {
      // Images carry no text of their own; a linked image is still a link worth keeping.
      const href = node.attrs.externalLink === undefined ? undefined : safeHref(node.attrs.externalLink);
      if (href === undefined) return '';
      const alt = (node.attrs.alt ?? '').trim();
      return alt === '' ? href : `${alt} (${href})`;
    }
    case 'logo':
    case 'spacer':
      return '';
    case 'unsubscribeFooter': {
      const text = inlineText(node.content);
      if (linksToUnsubscribe(node.content)) return text;
      const link = `Unsubscribe: ${UNSUBSCRIBE_PLACEHOLDER}`;
      return text.trim() === '' ? link : `${text}\n${link}`;
    }
    default:
      return '';
  }
}

function blocksText(nodes: BlockNode[] | undefined, separator: string): string {
  return (nodes ?? [])
    .map(blockText)
    .filter((t) => t.trim() !== '')
    .join(separator);
}

/** Renders the plain-text alternative of an editor document. */
export function renderEditorText(doc: EditorDoc): string {
  return blocksText(doc.content, '\n\n')
    .split('\n')
    .map((line) => line.trimEnd())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}
