// Open pixel and click rewriting on finished HTML. The HTML comes from users (raw html sends)
// as well as our renderer, so this edits only what it must, as text: the href of <a> tags
// and one <img> before </body>. Everything else is left byte for byte.

export interface TrackingRewrite {
  /** Inserted as a 1x1 image when set. */
  pixelUrl?: string;
  /** The tracked replacement of an absolute http(s) link, or undefined to leave it alone. */
  rewriteLink?: (url: string) => string | undefined;
}

/** Where an <a> tag may start: "<a" and the end of the tag name. */
const A_START = /<a(?=[\s/>])/gi;
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

/** Named references read here, spelled as HTML defines them (case matters: "&AMP;" is one, "&Amp;" is not). */
const NAMED_ENTITIES: Record<string, string> = { amp: '&', AMP: '&', lt: '<', LT: '<', gt: '>', GT: '>', quot: '"', QUOT: '"', apos: "'", nbsp: '\u00a0' };
const REFERENCE = /&(?:#[xX]([0-9a-fA-F]+)(;?)|#([0-9]+)(;?)|([A-Za-z][A-Za-z0-9]*);)/g;

/**
 * Attribute values arrive entity-encoded ("?a=1&amp;b=2"); the link means the decoded text.
 * Undefined when a reference is not read here exactly as a browser reads it (a named one outside
 * the few above, like "caf&eacute;", a numeric one without ";", or one a browser maps to another
 * character): such a link is left as written, since signing the text as it stands would
 * redirect to a URL the message never showed.
 */
export function decodeAttribute(value: string): string | undefined {
  if (!value.includes('&')) return value;
  let exact = true;
  const out = value.replace(REFERENCE, (whole, hex: string | undefined, hexEnd: string, dec: string | undefined, decEnd: string, name: string | undefined) => {
    if (name !== undefined) {
      const ch = Object.hasOwn(NAMED_ENTITIES, name) ? NAMED_ENTITIES[name] : undefined;
      if (ch === undefined) exact = false;
      return ch ?? whole;
    }
    const code = hex !== undefined ? parseInt(hex, 16) : parseInt(dec!, 10);
    // Browsers turn 0, surrogates, out-of-range and the C1 range 0x80-0x9F (read as windows-1252) into other characters.
    if ((hex !== undefined ? hexEnd : decEnd) !== ';' || !(code > 0 && code <= 0x10ffff) || (code >= 0xd800 && code <= 0xdfff) || (code >= 0x80 && code <= 0x9f)) {
      exact = false;
      return whole;
    }
    return String.fromCodePoint(code);
  });
  return exact ? out : undefined;
}

export function encodeAttribute(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/**
 * The index just past the ">" that ends the tag whose attributes start at `from`, read as
 * HTML's tokenizer reads them (a quote opens a value only after "="; quoted values may hold
 * ">"), or -1 when the HTML ends first, where a browser drops the unfinished tag and all after it.
 * One pass from `from`: the caller resumes after the tag, so the whole scan stays linear (a
 * pattern that tried every "<a" to the end took quadratic time on "<a <a <a ..." without ">").
 */
function tagEnd(html: string, from: number): number {
  ATTRIBUTE.lastIndex = from;
  for (;;) {
    let i = ATTRIBUTE.lastIndex;
    while (i < html.length && /[\s/]/.test(html[i]!)) i++;
    if (i >= html.length) return -1;
    if (html[i] === '>') return i + 1;
    const m = ATTRIBUTE.exec(html);
    if (!m) return -1; // unreachable: any other character starts a name
    // An unquoted value that begins with a quote is a quoted one whose closing quote never came.
    if (m[5] !== undefined && /^["']/.test(m[5])) return -1;
  }
}

export function rewriteLinks(html: string, rewrite: (url: string) => string | undefined): string {
  const parts: string[] = [];
  let copied = 0;
  A_START.lastIndex = 0;
  for (let m = A_START.exec(html); m; m = A_START.exec(html)) {
    const end = tagEnd(html, m.index + 2);
    if (end < 0) break;
    A_START.lastIndex = end;
    const tag = html.slice(m.index, end);
    const out = rewriteTag(tag, rewrite);
    if (out === tag) continue;
    parts.push(html.slice(copied, m.index), out);
    copied = end;
  }
  if (copied === 0) return html;
  parts.push(html.slice(copied));
  return parts.join('');
}

function rewriteTag(tag: string, rewrite: (url: string) => string | undefined): string {
  if (NO_TRACK_ATTR.test(tag)) return tag;
  const href = hrefOf(tag);
  if (!href) return tag;
  const url = decodeAttribute(href.value)?.trim();
  if (url === undefined || !/^https?:\/\//i.test(url)) return tag; // mailto:, tel:, #anchors, relative: not ours to track
  const tracked = rewrite(url);
  if (tracked === undefined) return tag;
  return tag.slice(0, href.start) + `${href.head}"${encodeAttribute(tracked)}"` + tag.slice(href.end);
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
