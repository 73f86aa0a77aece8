import type { App } from '../../../src/app.js';

// The console over plain HTTP, as a browser would speak it: a cookie jar, forms with the
// page's CSRF token, the page's Origin. For the security tests that need exact requests.

export const PASSWORD = 'correct horse battery staple';

export interface ConsoleResponse {
  status: number;
  headers: Headers;
  text: string;
  location: string | null;
}

export class ConsoleClient {
  readonly cookies = new Map<string, string>();
  constructor(readonly baseUrl: string) {}

  cookieHeader(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  async request(method: string, path: string, o: { form?: Record<string, string | string[]>; headers?: Record<string, string>; body?: string | FormData } = {}): Promise<ConsoleResponse> {
    const headers: Record<string, string> = { ...(o.headers ?? {}) };
    if (this.cookies.size) headers.cookie = this.cookieHeader();
    let body: string | FormData | undefined = o.body;
    if (o.form) {
      const p = new URLSearchParams();
      for (const [k, v] of Object.entries(o.form)) for (const item of Array.isArray(v) ? v : [v]) p.append(k, item);
      body = p.toString();
      headers['content-type'] = 'application/x-www-form-urlencoded';
    }
    const res = await fetch(this.baseUrl + path, { method, headers, body, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq);
      const value = pair!.slice(eq + 1);
      if (/Max-Age=0/i.test(c)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return { status: res.status, headers: res.headers, text: await res.text(), location: res.headers.get('location') };
  }

  get(path: string) {
    return this.request('GET', path);
  }

  /** The CSRF token of a page (every signed-in page carries it in the sign-out form). */
  async csrf(path = '/console/account'): Promise<string> {
    const page = await this.get(path);
    const m = /name="_csrf" value="([^"]+)"/.exec(page.text);
    if (!m) throw new Error(`no CSRF token on ${path} (status ${page.status})`);
    return m[1]!;
  }

  /** A same-origin form post with the CSRF token, as the console's own forms send it. */
  async post(path: string, form: Record<string, string | string[]> = {}, o: { token?: string; origin?: string | null; referer?: string } = {}) {
    const token = o.token ?? (await this.csrf());
    const origin = o.origin === undefined ? this.baseUrl : o.origin;
    const headers: Record<string, string> = origin === null ? {} : { origin };
    if (o.referer) headers.referer = this.baseUrl + o.referer;
    return this.request('POST', path, { form: { _csrf: token, ...form }, headers });
  }

  /** The one-time message the last redirect carried. */
  flash(): string {
    const raw = this.cookies.get('posthorn_flash');
    return raw ? (JSON.parse(Buffer.from(raw, 'base64url').toString()) as { text: string }).text : '';
  }

  async signIn(email: string, password = PASSWORD): Promise<ConsoleResponse> {
    const page = await this.get('/console/login');
    const token = /name="_csrf" value="([^"]+)"/.exec(page.text)![1]!;
    return this.request('POST', '/console/login', { form: { _csrf: token, email, password, next: '' }, headers: { origin: this.baseUrl } });
  }
}

/** A console user with the shared test password. */
export async function consoleUser(app: App, email: string, teamId: number, operator = false) {
  return (await app.services.users.create({ email, teamId, operator, password: PASSWORD })).user;
}
