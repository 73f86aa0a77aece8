import type { Context } from 'koa';
import getRawBody from 'raw-body';
import { AppError, badRequest, notFound } from '../core/errors.js';
import { nulMessage } from '../lib/nul-text.js';

// Reading what a browser sends: cookies, urlencoded forms and multipart uploads (one file
// field and a few text fields; written here rather than adding a dependency for it).

export const FORM_LIMIT_BYTES = 2 * 1024 * 1024;

export function readCookie(ctx: Context, name: string): string | undefined {
  const header = ctx.get('cookie');
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

export interface CookieOptions {
  maxAgeSeconds?: number;
  secure: boolean;
  sameSite: 'Strict' | 'Lax';
  path?: string;
}

/**
 * HttpOnly always: no script of ours reads a cookie, so none may. Secure when the public URL is
 * https, and whenever this request came over TLS (ctx.secure: its own socket, or the trusted
 * proxy's X-Forwarded-Proto), so a session made over https is never sent over plain http.
 */
export function setCookie(ctx: Context, name: string, value: string, o: CookieOptions): void {
  const parts = [`${name}=${encodeURIComponent(value)}`, `Path=${o.path ?? '/console'}`, 'HttpOnly', `SameSite=${o.sameSite}`];
  if (o.maxAgeSeconds !== undefined) parts.push(`Max-Age=${Math.max(0, Math.floor(o.maxAgeSeconds))}`);
  if (o.secure || ctx.secure) parts.push('Secure');
  ctx.append('Set-Cookie', parts.join('; '));
}

export function clearCookie(ctx: Context, name: string, o: Omit<CookieOptions, 'maxAgeSeconds'>): void {
  setCookie(ctx, name, '', { ...o, maxAgeSeconds: 0 });
}

export interface FormBody {
  fields: URLSearchParams;
  file?: { name: string; text: string };
}

async function rawBody(ctx: Context, limit: number): Promise<Buffer> {
  try {
    return await getRawBody(ctx.req, { limit, length: ctx.get('content-length') || undefined });
  } catch (err) {
    if ((err as { type?: string }).type === 'entity.too.large') {
      ctx.req.resume();
      throw new AppError('PAYLOAD_TOO_LARGE', `the form is larger than ${Math.round(limit / 1024 / 1024)} MB`);
    }
    throw badRequest(`could not read the form: ${(err as Error).message}`);
  }
}

/** The body of a form post: urlencoded, multipart (with at most one file), or JSON-free. */
export async function readForm(ctx: Context, limit = FORM_LIMIT_BYTES): Promise<FormBody> {
  const type = ctx.get('content-type').toLowerCase();
  if (!ctx.get('content-length') && !ctx.get('transfer-encoding')) return { fields: new URLSearchParams() };
  const body = await rawBody(ctx, limit);
  if (type.startsWith('multipart/form-data')) {
    const boundary = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(ctx.get('content-type'));
    if (!boundary) throw badRequest('multipart form without a boundary');
    return parseMultipart(body, boundary[1] ?? boundary[2]!);
  }
  if (type === '' || type.startsWith('application/x-www-form-urlencoded')) return { fields: new URLSearchParams(body.toString('utf8')) };
  throw badRequest(`unsupported form encoding "${type}"`);
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * An uploaded text file (a CSV): UTF-16 when a BOM says so (Excel's "Unicode Text"), else UTF-8,
 * a BOM kept for the reader. Bytes that are not UTF-8 (Excel's default CSV is Windows-1252) are
 * refused: read as U+FFFD, every "Müller" would be stored as "M\uFFFDller" without a word.
 */
function fileText(bytes: Buffer): string {
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return '\uFEFF' + new TextDecoder('utf-16le').decode(bytes.subarray(2));
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return '\uFEFF' + new TextDecoder('utf-16be').decode(bytes.subarray(2));
  try {
    return utf8.decode(bytes);
  } catch {
    const lossy = bytes.toString('utf8');
    const line = lossy.slice(0, lossy.indexOf('\uFFFD')).split('\n').length;
    throw badRequest(`file: is not UTF-8 text (line ${line}); save it as "CSV UTF-8" and upload it again`);
  }
}

/** RFC 7578: parts separated by --boundary, each with headers, a blank line and content. */
export function parseMultipart(body: Buffer, boundary: string): FormBody {
  const fields = new URLSearchParams();
  let file: FormBody['file'];
  const delimiter = Buffer.from(`--${boundary}`);
  let pos = body.indexOf(delimiter);
  if (pos < 0) throw badRequest('malformed multipart form');
  for (;;) {
    pos += delimiter.length;
    if (body.subarray(pos, pos + 2).toString() === '--') break;
    const headerEnd = body.indexOf('\r\n\r\n', pos);
    if (headerEnd < 0) throw badRequest('malformed multipart form');
    const headers = body.subarray(pos, headerEnd).toString('utf8');
    const next = body.indexOf(Buffer.from(`\r\n--${boundary}`), headerEnd + 4);
    if (next < 0) throw badRequest('malformed multipart form: a part is not closed');
    const content = body.subarray(headerEnd + 4, next);
    const disposition = /content-disposition:\s*form-data;([^\r\n]*)/i.exec(headers)?.[1] ?? '';
    const name = /\bname="([^"]*)"/i.exec(disposition)?.[1];
    const filename = /\bfilename="([^"]*)"/i.exec(disposition)?.[1];
    if (name !== undefined) {
      if (filename !== undefined) {
        // An empty file input is still sent, as a part with no name and no content.
        if (filename === '' && content.length === 0) {
          pos = next + 2;
          continue;
        }
        if (file) throw badRequest('one file per upload');
        file = { name: filename.replace(/^.*[\\/]/, ''), text: fileText(content) };
      } else fields.append(name, content.toString('utf8'));
    }
    pos = next + 2;
  }
  return { fields, file };
}

const NUL = '\u0000';

/**
 * The NUL character names no page and is in no value: PostgreSQL cannot store it in text, so it
 * is refused at the door on every store alike, as the API refuses it (api/validation.ts).
 */
export function refuseNul(ctx: Context, form?: FormBody): void {
  if (ctx.path.includes('%00')) throw notFound('There is no console page at this address.');
  for (const params of [new URLSearchParams(ctx.querystring), ...(form ? [form.fields] : [])]) {
    for (const [name, value] of params) {
      if (name.includes(NUL)) throw badRequest('a field name must not contain the NUL character (U+0000)');
      if (value.includes(NUL)) throw badRequest(nulMessage(name));
    }
  }
  if (form?.file?.text.includes(NUL) || form?.file?.name.includes(NUL)) throw badRequest(nulMessage('file'));
}

