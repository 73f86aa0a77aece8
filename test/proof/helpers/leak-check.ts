import type { TestResponse } from '../../helpers/test-app.js';

// What counts as a leak, in one place: a victim's marker in a response that the request did
// not carry itself, a teamId that is not the caller's, a domain id the caller may not see,
// or an error that differs from the one a nonexistent id gets (an existence oracle).

export function bodyText(res: TestResponse): string {
  return typeof res.body === 'string' ? res.body : JSON.stringify(res.body ?? null);
}

/** The spec's error body and nothing else: { error: { code, message } }. */
export function isErrorBody(body: unknown): boolean {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return false;
  const b = body as { error?: { code?: unknown; message?: unknown } };
  return Object.keys(b).length === 1 && typeof b.error?.code === 'string' && typeof b.error.message === 'string';
}

/**
 * Runs of 40 or more base64 characters: DKIM public keys, hashes, secrets. The caller's own
 * carry letters at random, so a victim's short marker (its four-letter word, matched with its
 * case aside) turns up inside one now and then: about one 2048-bit DKIM key in 2,600 holds "acme". Short
 * markers are looked for outside such runs; long ones (ids, keys, tokens) everywhere.
 */
const OPAQUE_RUN = /[a-z0-9+/=]{40,}/g;
const SHORT_MARKER = 12;

/**
 * Victim markers present in the response. A marker the request itself carried (a name or id
 * the caller sent, echoed back in an error message) is not a leak and is skipped.
 */
export function leakedMarkers(res: TestResponse, requestText: string, markers: readonly string[]): string[] {
  const text = bodyText(res).toLowerCase();
  const words = text.replace(OPAQUE_RUN, ' ');
  const sent = requestText.toLowerCase();
  return markers.filter((m) => m && !sent.includes(m.toLowerCase()) && (m.length < SHORT_MARKER ? words : text).includes(m.toLowerCase()));
}

/** teamId fields that are not the caller's; domainId / domainIds values the caller may not see. */
export function structuralLeaks(body: unknown, o: { teamId: number; forbiddenDomainIds: readonly number[] }): string[] {
  const found: string[] = [];
  const walk = (v: unknown, path: string) => {
    if (Array.isArray(v)) {
      v.forEach((item, i) => walk(item, `${path}[${i}]`));
      return;
    }
    if (!v || typeof v !== 'object') return;
    for (const [k, child] of Object.entries(v)) {
      const p = `${path}.${k}`;
      if (k === 'teamId' && typeof child === 'number' && child !== o.teamId) found.push(`${p}=${child}`);
      if (k === 'domainId' && typeof child === 'number' && o.forbiddenDomainIds.includes(child)) found.push(`${p}=${child}`);
      if (k === 'domainIds' && Array.isArray(child) && child.some((d) => o.forbiddenDomainIds.includes(d as number))) found.push(`${p}=${JSON.stringify(child)}`);
      walk(child, p);
    }
  };
  walk(body, '$');
  return found;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * Replaces each victim and ghost value by its placeholder inside every string of `body`
 * (numbers only where they stand alone), so the answer about a real id and the answer about
 * a made-up id of the same shape can be compared.
 */
export function normalizeIds(body: unknown, replacements: readonly (readonly [string | number, string])[]): unknown {
  const ordered = [...replacements].sort((a, b) => String(b[0]).length - String(a[0]).length);
  const fix = (s: string) => {
    let out = s;
    for (const [value, placeholder] of ordered) {
      const text = String(value);
      if (!text) continue;
      out = typeof value === 'number' ? out.replace(new RegExp(`(?<![0-9])${escapeRegExp(text)}(?![0-9])`, 'g'), placeholder) : out.split(text).join(placeholder);
    }
    return out;
  };
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return fix(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, c]) => [k, walk(c)]));
    return v;
  };
  return walk(body);
}
