// The judge of one console answer (test/proof/fuzz-console): below 500; an HTML page never
// carries a planted marker as markup; a refusal is a page that says why; and an answer to team
// A never shows team B's data (LEAK_MARKER), in the page, the redirect or its one-time message.
import type { ProbeResponse } from './http-probe.js';
import { XSS_FOUND } from './console-arbitraries.js';
import { LEAK_MARKER } from './console-examples.js';

/** The one-time message a redirect carries (console-responses.ts), or ''. */
export function flashOf(res: ProbeResponse): string {
  for (const c of [res.headers['set-cookie'] ?? []].flat()) {
    const m = /^posthorn_flash=([^;]*)/.exec(c);
    if (!m || !m[1]) continue;
    try {
      return (JSON.parse(Buffer.from(decodeURIComponent(m[1]), 'base64url').toString('utf8')) as { text: string }).text;
    } catch {
      return `(unreadable flash ${m[1].slice(0, 50)})`;
    }
  }
  return '';
}

/** What is wrong with a console answer, or null. `teamView`: the answer is to team A's member (operators see every team). */
export function consoleProblem(res: ProbeResponse, teamView: boolean, asksJson = false): string | null {
  if (res.status >= 500) return `status ${res.status}: ${res.text.slice(0, 300)}`;
  const type = String(res.headers['content-type'] ?? '');
  // A browser shows a refusal: the console's error page, not the API's JSON (unless JSON was asked for).
  // 431 is Node's parser refusing a head too large to read, before any route is known.
  if (res.status >= 400 && res.status !== 431 && !asksJson && !type.startsWith('text/html')) return `a ${res.status} answered as ${type || 'nothing'}, not a page: ${res.text.slice(0, 300)}`;
  const csp = String(res.headers['content-security-policy'] ?? '');
  // Email bodies and previews are the user's own HTML, served only to a sandboxed frame.
  const framed = /(^|;\s*)sandbox(;|$)/.test(csp);
  if (type.startsWith('text/html') && !framed) {
    const m = XSS_FOUND.exec(res.text);
    if (m) return `a planted marker is markup in the page (status ${res.status}): ...${res.text.slice(Math.max(0, m.index - 200), m.index + 100)}...`;
    if (res.status >= 400 && !/role="alert"|<p class="lead">/.test(res.text)) return `a ${res.status} page that does not say why: ${res.text.slice(0, 300)}`;
  }
  if (teamView) {
    const seen = [res.text, String(res.headers.location ?? ''), flashOf(res)].find((s) => s.toLowerCase().includes(LEAK_MARKER));
    if (seen !== undefined) {
      const at = seen.toLowerCase().indexOf(LEAK_MARKER);
      return `team B's data in an answer to team A (status ${res.status}): ...${seen.slice(Math.max(0, at - 200), at + 100)}...`;
    }
  }
  return null;
}
