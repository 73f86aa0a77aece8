/*
 * The mailbox provider behind a destination, as a small fixed set, so metric labels stay
 * bounded however many domains we deliver to. By MX host when one is known (a custom domain
 * hosted at Google Workspace or Microsoft 365 rolls up to its provider), else by the
 * recipient domain.
 */

export const PROVIDERS = ['google', 'microsoft', 'yahoo', 'apple', 'other'] as const;
export type Provider = (typeof PROVIDERS)[number];

const MX_SUFFIXES: [string, Provider][] = [
  ['google.com', 'google'],
  ['googlemail.com', 'google'],
  ['outlook.com', 'microsoft'],
  ['hotmail.com', 'microsoft'],
  ['yahoodns.net', 'yahoo'],
  ['yahoo.com', 'yahoo'],
  ['aol.com', 'yahoo'],
  ['icloud.com', 'apple'],
  ['apple.com', 'apple'],
];

const DOMAINS: Record<string, Provider> = {
  'gmail.com': 'google',
  'googlemail.com': 'google',
  'outlook.com': 'microsoft',
  'hotmail.com': 'microsoft',
  'live.com': 'microsoft',
  'msn.com': 'microsoft',
  'yahoo.com': 'yahoo',
  'ymail.com': 'yahoo',
  'aol.com': 'yahoo',
  'icloud.com': 'apple',
  'me.com': 'apple',
  'mac.com': 'apple',
};

const endsWithLabel = (host: string, suffix: string) => host === suffix || host.endsWith(`.${suffix}`);

export function providerOf(recipientDomain: string, mxHost?: string | null): Provider {
  const mx = mxHost?.toLowerCase().replace(/\.$/, '');
  if (mx) for (const [suffix, p] of MX_SUFFIXES) if (endsWithLabel(mx, suffix)) return p;
  const d = recipientDomain.toLowerCase();
  if (DOMAINS[d]) return DOMAINS[d];
  // hotmail.co.uk, yahoo.fr, outlook.de ...
  const first = d.split('.')[0]!;
  if (first === 'hotmail' || first === 'outlook' || first === 'live') return 'microsoft';
  if (first === 'yahoo') return 'yahoo';
  return 'other';
}
