import { isIP } from 'node:net';
import { validateDetailed } from 'node-cron';

// What is wrong with a host, URL or cron setting, in words that say how to fix it: the schema
// refuses these at load time (exit 78, the key named), before they fail deep inside the start
// as a bare "Invalid URL" or "getaddrinfo ENOTFOUND".

/** One label of a host name (RFC 1123 2.1; underscores too, as /etc/hosts names may have them). */
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/i;

/** Why `value` is not an IP address or a host name; undefined when it is one. */
export function hostProblem(value: string): string | undefined {
  if (isIP(value)) return undefined;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) return `"${value}" is a URL: give the host name or IP address alone`;
  if (/^(\[[^\]]*\]|[^:]*):\d*$/.test(value)) return `"${value}" has a port: give the host name or IP address alone (the port is a setting of its own)`;
  const name = value.endsWith('.') ? value.slice(0, -1) : value;
  const labels = name.split('.');
  if (name.length === 0 || name.length > 253 || !labels.every((l) => LABEL.test(l))) {
    return `"${value}" is not an IP address or a host name (letters, digits and hyphens, dot-separated)`;
  }
  // A name ending in a number is read as an IPv4 address (WHATWG URL, getaddrinfo).
  if (/^(\d+|0x[0-9a-f]*)$/i.test(labels[labels.length - 1]!)) return `"${value}" is not a valid IP address`;
  return undefined;
}

/** Why `value` cannot be the public base URL links are made from; undefined when it can. */
export function publicUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `"${value}" is not a URL: give it as the world reaches the HTTP API, such as https://mail.example.com`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `"${value}" must start with https:// or http://`;
  if (value.includes('?') || value.includes('#')) return `"${value}" must not have a query or fragment: link paths are appended to it`;
  if (url.username || url.password) return 'must not carry a user name or password';
  return undefined;
}

/**
 * Why node-postgres could not parse `value` (it reads it with the WHATWG URL parser, trying
 * again with a dummy host for a socket URL such as postgres://user@/db); undefined when it can.
 */
export function databaseUrlProblem(value: string): string | undefined {
  for (const candidate of [value, value.replace('@/', '@dummy-host/')]) {
    try {
      new URL(candidate);
      return undefined;
    } catch {
      // try the next reading
    }
  }
  // Never the value itself: it may carry a password.
  return 'not a valid URL: check the port (1-65535), and percent-encode "@", ":" and "/" in the user name and password';
}

/** Why `value` is not a cron expression node-cron runs; undefined when it is one. */
export function cronProblem(value: string): string | undefined {
  const checked = validateDetailed(value);
  if (checked.valid) return undefined;
  const why = checked.errors[0]?.message ?? 'not understood';
  return `"${value}" is not a cron expression (${why}); give minute hour day-of-month month day-of-week, such as "*/10 * * * *"`;
}
