import type { InlineNode } from './editor-document.js';
import { formatPlaceholder } from './variables.js';

/**
 * The placeholder the unsubscribe footer links to. It is an ordinary
 * variable: the sender fills it with the recipient's own unsubscribe URL.
 */
export const UNSUBSCRIBE_PLACEHOLDER = '{{unsubscribeUrl}}';

// What the campaign sender fills with the URL: ours (a fallback allowed; names are read in any
// case), and useSend's names, which it reads as ours.
const OURS_OPENING = /\{\{\s*unsubscribeUrl\s*/gi;
const USESEND = /\{\{\s*(?:usesend|unsend)_unsubscribe_url\s*\}\}/i;

/**
 * True when `s` holds our placeholder, as /\{\{\s*unsubscribeUrl\s*(?:,[^}]*)?\}\}/i would find
 * it, in linear time: that regex scanned from each opening to the next '}', so text of
 * '{{unsubscribeUrl,' repeated (2 MB) took minutes. After each opening only the first '}' past
 * its ',' can end it, and that '}' is found once for all the openings before it.
 */
export function hasUnsubscribePlaceholder(s: string): boolean {
  let nextBrace = -1;
  OURS_OPENING.lastIndex = 0;
  for (let m = OURS_OPENING.exec(s); m; m = OURS_OPENING.exec(s)) {
    const at = m.index + m[0].length;
    if (s.startsWith('}}', at)) return true;
    if (s[at] === ',') {
      if (nextBrace <= at) nextBrace = s.indexOf('}', at + 1);
      if (nextBrace < 0) return false;
      if (s[nextBrace + 1] === '}') return true;
    }
  }
  return false;
}

const carriesUrl = (s: string): boolean => hasUnsubscribePlaceholder(s) || USESEND.test(s);

/**
 * True when the author's footer text already carries the unsubscribe URL (a link to it, the
 * variable, or the placeholder typed in), so no second link is added. The HTML and the text
 * renderers both ask this, so the two parts agree.
 */
export function linksToUnsubscribe(nodes: InlineNode[] | undefined): boolean {
  return (nodes ?? []).some((n) => {
    if (n.type === 'variable') return carriesUrl(formatPlaceholder(n.attrs.id, n.attrs.fallback));
    if (n.type !== 'text') return false;
    // A link whose target is the placeholder (not one that merely mentions it in its query).
    return carriesUrl(n.text) || (n.marks ?? []).some((m) => m.type === 'link' && m.attrs.href.trim().startsWith('{{') && carriesUrl(m.attrs.href));
  });
}
