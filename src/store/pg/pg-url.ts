// What the rest of the app needs to know about a PostgreSQL store without loading its driver:
// a SQLite installation (the default) never loads node-postgres (open-store.ts imports
// pg-store.ts only for a postgres:// URL).

/** The URL with any password (in its user part, or a ?password= or ?sslpassword= parameter) replaced by ***: safe to log and print. */
export function redactDatabaseUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    for (const p of ['password', 'sslpassword']) if (u.searchParams.has(p)) u.searchParams.set(p, '***');
    return u.toString();
  } catch {
    return url.replace(/:\/\/([^:/@]+):[^@]*@/, '://$1:***@').replace(/([?&](?:ssl)?password=)[^&]*/gi, '$1***');
  }
}

/** The part of a URL an operator recognises (host, port, database), for messages. */
export function databaseUrlTarget(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || 5432}${u.pathname}`;
  } catch {
    return 'the configured database';
  }
}

/** The server answers but cannot run Posthorn: waiting for it would not help. */
export class PgStoreUnsupportedError extends Error {}
