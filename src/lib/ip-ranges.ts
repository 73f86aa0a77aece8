import net from 'node:net';

/** A range as [first address, prefix length in bits, the reason shown when an address is in it]. */
export type AddressRange = readonly [string, number, string];

function ipv4Bytes(ip: string): number[] {
  return ip.split('.').map(Number);
}

/** 16 bytes of an IPv6 address (with "::" and a trailing dotted quad handled); null if malformed. */
export function ipv6Bytes(ip: string): number[] | null {
  let text = ip.toLowerCase();
  const zone = text.indexOf('%');
  if (zone >= 0) text = text.slice(0, zone);
  let tail: number[] = [];
  const lastColon = text.lastIndexOf(':');
  if (lastColon < 0) return null;
  const last = text.slice(lastColon + 1);
  if (last.includes('.')) {
    // A trailing dotted quad stands for the last two 16-bit words (RFC 4291 2.2).
    if (!net.isIPv4(last)) return null;
    const b = ipv4Bytes(last);
    tail = [(b[0]! << 8) | b[1]!, (b[2]! << 8) | b[3]!];
    text = text.slice(0, lastColon + 1);
    if (!text.endsWith('::')) text = text.slice(0, -1);
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const parse = (s: string) => (s === '' ? [] : s.split(':').map((h) => (/^[0-9a-f]{1,4}$/.test(h) ? parseInt(h, 16) : NaN)));
  const head = parse(halves[0]!);
  const rest = halves.length === 2 ? parse(halves[1]!) : [];
  const given = head.length + rest.length + tail.length;
  if ([...head, ...rest].some(Number.isNaN)) return null;
  let words: number[];
  if (halves.length === 2) {
    if (given > 7) return null;
    words = [...head, ...new Array<number>(8 - given).fill(0), ...rest, ...tail];
  } else {
    if (given !== 8) return null;
    words = [...head, ...tail];
  }
  return words.flatMap((w) => [w >> 8, w & 0xff]);
}

function inPrefix(bytes: number[], prefix: number[], bits: number): boolean {
  for (let i = 0; i < bits; i++) {
    const byte = i >> 3;
    const mask = 0x80 >> (i & 7);
    if ((bytes[byte]! & mask) !== (prefix[byte]! & mask)) return false;
  }
  return true;
}

/**
 * The reason of the first range `ip` falls in, or null. IPv6 forms that carry an IPv4 address
 * (mapped ::ffff:a.b.c.d, translated ::ffff:0:a.b.c.d, the deprecated compatible ::a.b.c.d,
 * NAT64 64:ff9b::a.b.c.d, 6to4 2002:aabb:ccdd::) are judged by the IPv4 address inside: the
 * connection ends up there.
 */
export function rangeReason(ip: string, v4Ranges: readonly AddressRange[], v6Ranges: readonly AddressRange[]): string | null {
  if (net.isIPv4(ip)) {
    const b = ipv4Bytes(ip);
    for (const [prefix, bits, reason] of v4Ranges) if (inPrefix(b, ipv4Bytes(prefix), bits)) return reason;
    return null;
  }
  const bytes = ipv6Bytes(ip);
  if (!bytes) return 'not a valid IP address';
  for (const [prefix, bits, reason] of v6Ranges) if (inPrefix(bytes, ipv6Bytes(prefix)!, bits)) return reason;
  const embedded = (prefix: string) => (inPrefix(bytes, ipv6Bytes(prefix)!, 96) ? bytes.slice(12).join('.') : null);
  // 6to4 (RFC 3056): 2002:AABB:CCDD::/48 is routed through the IPv4 address AA.BB.CC.DD.
  const sixToFour = inPrefix(bytes, ipv6Bytes('2002::')!, 16) ? bytes.slice(2, 6).join('.') : null;
  const v4 = embedded('::ffff:0:0') ?? embedded('::ffff:0:0:0') ?? embedded('64:ff9b::') ?? embedded('::') ?? sixToFour;
  return v4 === null ? null : rangeReason(v4, v4Ranges, v6Ranges);
}
