import { readPlaceholderAt } from './variables.js';

/*
 * URL allow-listing for href/src. Email clients differ wildly in what they
 * block, so we decide here: only absolute http(s) and mailto links, plus
 * Posthorn placeholders that are filled in at send time. Relative URLs mean
 * nothing in an inbox, and javascript:/data:/vbscript: are never wanted.
 */

// Browsers strip tabs and newlines inside URLs ("java\tscript:" runs), and
// other control characters have no business in a link either.
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;

const LINK_SCHEME = /^(?:https?:\/\/|mailto:)/i;
const IMAGE_SCHEME = /^https?:\/\//i;

function vet(raw: unknown, scheme: RegExp): string | undefined {
  if (typeof raw !== 'string') return undefined;
  const url = raw.trim();
  if (url === '' || CONTROL_CHARS.test(url)) return undefined;
  if (scheme.test(url)) return url;
  if (url.startsWith('{{')) {
    const placeholder = readPlaceholderAt(url, 0);
    if (!placeholder) return undefined;
    // The fallback is used verbatim when the variable is empty, so it must
    // pass the same check: `{{x,fallback=javascript:...}}` is rejected.
    if (placeholder.fallback && !scheme.test(placeholder.fallback)) return undefined;
    return url;
  }
  return undefined;
}

/** The link target to emit, or undefined when the link must be dropped. */
export function safeHref(raw: unknown): string | undefined {
  return vet(raw, LINK_SCHEME);
}

/** The image source to emit, or undefined when the image must be dropped. */
export function safeImageSrc(raw: unknown): string | undefined {
  return vet(raw, IMAGE_SCHEME);
}
