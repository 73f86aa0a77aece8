// Open pixel and click rewriting on finished HTML. The HTML comes from users (raw html sends)
// as well as our renderer, so this edits only what it must, as text: the href of <a> tags
// and one <img> before </body>. Everything else is left byte for byte.

export interface TrackingRewrite {
  /** Inserted as a 1x1 image when set. */
  pixelUrl?: string;
  /** The tracked replacement of an absolute http(s) link, or undefined to leave it alone. */
  rewriteLink?: (url: string) => string | undefined;
}

/** An opening <a> tag; quoted attribute values may contain ">". */
const A_TAG = /<a\b(?:[^>"']|"[^"]*"|'[^']*')*>/gi;
/**
 * One attribute of a tag from where the last one ended (HTML's tokenizer: a name, then maybe "="
 * and a value double-, single- or un-quoted). Read one after another, so " href=" inside another
 * attribute's value (a personalised title) is never taken for the link.
 */
const ATTRIBUTE = /[\s/]*([^\s/>][^\s/>=]*)(?:(\s*=\s*)(?:"([^"]*)"|'([^']*)'|([^\s>]*)))?/y;

/** The tag's href attribute (the first, as browsers read it): where it starts, its name and "=", its value. */
function hrefOf(tag: string): { start: number; end: number; head: string; value: string } | undefined {
  ATTRIBUTE.lastIndex = 2; // after "<a" or "<A"
  for (let m = ATTRIBUTE.exec(tag); m; m = ATTRIBUTE.exec(tag)) {
    if (m[1]!.toLowerCase() !== 'href') continue;
    if (m[2] === undefined) return undefined;
    const start = m.index + m[0].length - m[0].trimStart().length;
    return { start, end: m.index + m[0].length, head: m[1]! + m[2], value: m[3] ?? m[4] ?? m[5] ?? '' };
  }
  return undefined;
}
/** Authors can keep one link untracked. */
const NO_TRACK_ATTR = /\sdata-posthorn-notrack\b/i;
const BODY_END = /<\/body\s*>/gi;

const NAMED_ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0' };

/** Attribute values arrive entity-encoded ("?a=1&amp;b=2"); the link means the decoded text. */
export function decodeAttribute(value: string): string {
  return value.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, ref: string) => {
    if (ref[0] === '#') {
      const code = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return Number.isFinite(code) && code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return NAMED_ENTITIES[ref.toLowerCase()] ?? whole;
  });
}

export function encodeAttribute(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

export function rewriteLinks(html: string, rewrite: (url: string) => string | undefined): string {
  return html.replace(A_TAG, (tag) => {
    if (NO_TRACK_ATTR.test(tag)) return tag;
    const href = hrefOf(tag);
    if (!href) return tag;
    const url = decodeAttribute(href.value).trim();
    if (!/^https?:\/\//i.test(url)) return tag; // mailto:, tel:, #anchors, relative: not ours to track
    const tracked = rewrite(url);
    if (tracked === undefined) return tag;
    return tag.slice(0, href.start) + `${href.head}"${encodeAttribute(tracked)}"` + tag.slice(href.end);
  });
}

export function insertPixel(html: string, pixelUrl: string): string {
  const img = `<img src="${encodeAttribute(pixelUrl)}" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0;margin:0;padding:0" />`;
  let last = -1;
  for (const m of html.matchAll(BODY_END)) last = m.index;
  // Last in the body: clients that load images lazily still count it, and it never shifts the layout above.
  return last >= 0 ? html.slice(0, last) + img + html.slice(last) : html + img;
}

export function applyTracking(html: string, opts: TrackingRewrite): string {
  let out = html;
  if (opts.rewriteLink) out = rewriteLinks(out, opts.rewriteLink);
  if (opts.pixelUrl) out = insertPixel(out, opts.pixelUrl);
  return out;
}
