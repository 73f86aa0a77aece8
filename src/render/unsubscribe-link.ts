import type { InlineNode } from './editor-document.js';

/**
 * The placeholder the unsubscribe footer links to. It is an ordinary
 * variable: the sender fills it with the recipient's own unsubscribe URL.
 */
export const UNSUBSCRIBE_PLACEHOLDER = '{{unsubscribeUrl}}';

/** True when the author already linked some footer text to the unsubscribe URL, so no second link is added. */
export function linksToUnsubscribe(nodes: InlineNode[] | undefined): boolean {
  return (nodes ?? []).some(
    (n) => n.type === 'text' && (n.marks ?? []).some((m) => m.type === 'link' && /^\{\{\s*unsubscribeUrl\b/.test(m.attrs.href.trim())),
  );
}
