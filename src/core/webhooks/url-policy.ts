import net from 'node:net';
import { DnsError, type DnsResolver } from '../../lib/dns/dns-client.js';
import { rangeReason, type AddressRange } from '../../lib/ip-ranges.js';

// Where a webhook may point. A webhook makes this server send HTTP requests to a URL a
// customer chose, so without a check any API key could reach the server's own network
// (admin ports on loopback, cloud metadata at 169.254.169.254, other hosts on the LAN):
// server-side request forgery. The check runs on every address the host resolves to, at
// create/update time and again right before each delivery (a name can be rebound to an
// internal address after it was accepted), and the connection is pinned to the checked address.

export const MAX_WEBHOOK_URL_LENGTH = 2048;

export type WebhookUrlProblem = 'invalid' | 'private' | 'unresolvable' | 'temporary';

export class WebhookUrlError extends Error {
  constructor(
    readonly problem: WebhookUrlProblem,
    message: string,
  ) {
    super(message);
    this.name = 'WebhookUrlError';
  }
}

export interface PinnedTarget {
  url: URL;
  /** The host name as written (for Host and TLS SNI), without IPv6 brackets. */
  hostname: string;
  /** The checked address the connection must use. */
  address: string;
  family: 4 | 6;
}

/** IPv4 ranges that are not the public internet, with the reason shown to the user. */
const IPV4_BLOCKED: readonly AddressRange[] = [
  ['0.0.0.0', 8, 'a "this network" address'], // RFC 1122; 0.0.0.0 connects to the local host on Linux
  ['10.0.0.0', 8, 'a private address'], // RFC 1918
  ['100.64.0.0', 10, 'a shared (carrier-grade NAT) address'], // RFC 6598, internal to providers
  ['127.0.0.0', 8, 'a loopback address'],
  ['169.254.0.0', 16, 'a link-local address'], // RFC 3927; cloud metadata services live here
  ['172.16.0.0', 12, 'a private address'], // RFC 1918
  ['192.0.0.0', 24, 'an IETF protocol address'], // RFC 6890
  ['192.88.99.0', 24, 'a 6to4 relay anycast address'], // RFC 7526: deprecated, relays into IPv6
  ['192.168.0.0', 16, 'a private address'], // RFC 1918
  ['198.18.0.0', 15, 'a benchmarking address'], // RFC 2544, used inside data centres
  ['224.0.0.0', 4, 'a multicast address'],
  ['240.0.0.0', 4, 'a reserved or broadcast address'], // includes 255.255.255.255
];

/** IPv6 ranges, as [prefix bytes, prefix length in bits, reason]. */
const IPV6_BLOCKED: readonly AddressRange[] = [
  ['::', 128, 'the unspecified address'],
  ['::1', 128, 'a loopback address'],
  ['64:ff9b:1::', 48, 'a local-use NAT64 address'], // RFC 8215: the operator's own translator, with a mapping we cannot read
  ['100::', 64, 'a discard-only address'], // RFC 6666
  ['2001::', 23, 'an IETF protocol address'], // RFC 2928: Teredo tunnels (2001::/32), benchmarking, ORCHID; like 192.0.0.0/24
  ['5f00::', 16, 'a segment routing (SRv6) address'], // RFC 9602, internal to an operator's network
  ['fc00::', 7, 'a unique local (private) address'], // RFC 4193
  ['fe80::', 10, 'a link-local address'], // RFC 4291
  ['fec0::', 10, 'a site-local address'], // deprecated by RFC 3879, still private where used
  ['ff00::', 8, 'a multicast address'],
];

/**
 * Why an address must not be a webhook target, or null when it is a public address.
 * IPv6 forms that carry an IPv4 address are judged by the IPv4 address inside (lib/ip-ranges).
 */
export function blockedAddressReason(ip: string): string | null {
  return rangeReason(ip, IPV4_BLOCKED, IPV6_BLOCKED);
}

/** Syntax and scheme only (no DNS): the URL object, or a WebhookUrlError naming the problem. */
export function parseWebhookUrl(raw: string): URL {
  if (raw.length > MAX_WEBHOOK_URL_LENGTH) throw new WebhookUrlError('invalid', `must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new WebhookUrlError('invalid', 'must be an absolute http or https URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new WebhookUrlError('invalid', `only http and https URLs are allowed, not ${url.protocol.replace(/:$/, '')}`);
  }
  if (!url.hostname) throw new WebhookUrlError('invalid', 'must name a host');
  return url;
}

function unbracket(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

async function lookupAll(resolver: DnsResolver, host: string): Promise<{ address: string; family: 4 | 6 }[]> {
  const settle = async (family: 4 | 6) => {
    try {
      const answer = family === 4 ? await resolver.resolve4(host) : await resolver.resolve6(host);
      return { records: answer.records.map((address) => ({ address, family })), error: undefined };
    } catch (err) {
      return { records: [], error: err };
    }
  };
  const [v4, v6] = await Promise.all([settle(4), settle(6)]);
  const addresses = [...v4.records, ...v6.records];
  if (addresses.length) return addresses;
  const temporary = [v4.error, v6.error].find((e) => !(e instanceof DnsError) || e.temporary);
  if (temporary) {
    throw new WebhookUrlError('temporary', `the host ${host} could not be resolved right now (${(temporary as Error).message}); try again`);
  }
  throw new WebhookUrlError('unresolvable', `the host ${host} does not resolve to any address`);
}

/** Who is refused, and the setting that allows it, for the refusal message. */
const WEBHOOK_REFUSAL = { what: 'webhooks', allowedBy: 'POSTHORN_WEBHOOKS_ALLOW_PRIVATE' };

/**
 * Resolves the URL's host through our resolver (never the system's) and checks every
 * address. Returns the address to connect to (IPv4 first). With allowPrivate the range
 * check is skipped, for installs whose receivers live on the local network. Also used for the
 * other URLs outsiders choose: TLS report targets and MTA-STS policy hosts.
 */
export async function resolveWebhookTarget(
  raw: string,
  resolver: DnsResolver,
  allowPrivate: boolean,
  refusal: { what: string; allowedBy: string } = WEBHOOK_REFUSAL,
): Promise<PinnedTarget> {
  const url = parseWebhookUrl(raw);
  const hostname = unbracket(url.hostname).toLowerCase().replace(/\.$/, '');
  let addresses: { address: string; family: 4 | 6 }[];
  const literal = net.isIP(hostname);
  if (literal) {
    addresses = [{ address: hostname, family: literal === 6 ? 6 : 4 }];
  } else if (hostname === 'localhost' || hostname.endsWith('.localhost')) {
    // RFC 6761 6.3: localhost names always mean this machine, whatever DNS says.
    addresses = [{ address: '127.0.0.1', family: 4 }];
  } else {
    addresses = await lookupAll(resolver, hostname);
  }
  if (!allowPrivate) {
    for (const a of addresses) {
      const reason = blockedAddressReason(a.address);
      if (reason) {
        const via = a.address === hostname ? '' : ` (${hostname} resolves to ${a.address})`;
        throw new WebhookUrlError(
          'private',
          `${a.address} is ${reason}${via}; ${refusal.what} may not target private, loopback or link-local addresses (an operator can allow them with ${refusal.allowedBy})`,
        );
      }
    }
  }
  const pinned = addresses.find((a) => a.family === 4) ?? addresses[0]!;
  return { url, hostname, address: pinned.address, family: pinned.family };
}
