import { createRequire } from 'node:module';
import type * as Tldts from 'tldts';
import { asciiDomain } from '../emails/addresses.js';
import { badRequest } from '../errors.js';

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** The public suffix list (~12 MB in memory), loaded when a domain is first added, not at start. */
let tldts: typeof Tldts | undefined;
const parse: typeof Tldts.parse = (url, options) => (tldts ??= createRequire(import.meta.url)('tldts') as typeof Tldts).parse(url, options);

/**
 * A sending domain must be a registrable domain (example.com, example.co.uk) or a
 * subdomain of one (news.example.com). Returns the lowercased name, an IDN in A-labels (the
 * form DNS, the envelope and every address key use: "bücher.example" is
 * "xn--bcher-kva.example"), and its subdomain part.
 */
export function normalizeDomainName(input: string): { name: string; subdomain: string | null } {
  const trimmed = input.trim().replace(/\.$/, '');
  const name = asciiDomain(trimmed);
  if (trimmed && !name) throw badRequest(`name: "${input}" is not a valid domain name`);
  if (!name || name.length > 253) throw badRequest('name: must be a domain name of at most 253 characters');
  const labels = name.split('.');
  if (labels.length < 2 || !labels.every((l) => LABEL.test(l))) throw badRequest(`name: "${input}" is not a valid domain name`);
  const parsed = parse(name, { allowPrivateDomains: false });
  if (parsed.isIp || !parsed.domain || !parsed.isIcann) {
    throw badRequest(`name: "${input}" is not a registrable domain or a subdomain of one`);
  }
  return { name, subdomain: parsed.subdomain || null };
}

/** Whether host equals name or is below it (both already lowercased, no trailing dot). */
export function isSameOrSubdomain(host: string, name: string): boolean {
  return host === name || host.endsWith(`.${name}`);
}

/** Canonical form of a host name from DNS: lowercase, no trailing dot. */
export function canonicalHost(host: string): string {
  return host.trim().toLowerCase().replace(/\.$/, '');
}
