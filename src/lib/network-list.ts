import { BlockList, isIP } from 'node:net';

// Operator-given lists of addresses and networks ("192.0.2.7", "10.0.0.0/8", "2001:db8::/32"),
// as the SMTP listeners' exempt networks take them. An IPv4-mapped IPv6 address
// (::ffff:192.0.2.7, how a dual-stack socket reports an IPv4 client) is the IPv4 address it
// carries, in an entry and in a client address alike, so one IPv4 entry covers both forms.

/** A parsed entry: an address family, the address and its prefix length. */
interface Network {
  family: 'ipv4' | 'ipv6';
  address: string;
  bits: number;
}

const MAPPED = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

/** An entry read, or why it is not one (in words that say what to write instead). */
function parseNetwork(entry: string): Network | string {
  const text = entry.trim();
  const [address = '', bits, ...rest] = text.split('/');
  if (address.includes('%')) return `"${entry}" has a zone index (%...): give the address or network alone`;
  const family = isIP(address);
  if (!family || rest.length) return `"${entry}" is not an IP address or a network such as 10.0.0.0/8 or 2001:db8::/32`;
  const max = family === 4 ? 32 : 128;
  if (bits !== undefined && !(/^\d{1,3}$/.test(bits) && Number(bits) <= max)) return `"${entry}" has a prefix length that is not 0 to ${max}`;
  const length = bits === undefined ? max : Number(bits);
  const mapped = MAPPED.exec(address)?.[1];
  if (mapped !== undefined) {
    if (length < 96) return `"${entry}" is an IPv4-mapped network shorter than /96: give the IPv4 network (such as 10.0.0.0/8)`;
    return { family: 'ipv4', address: mapped, bits: length - 96 };
  }
  return { family: family === 4 ? 'ipv4' : 'ipv6', address, bits: length };
}

/** Why `entry` is not an address or a network; undefined when it is one (for the config schema). */
export function networkProblem(entry: string): string | undefined {
  const parsed = parseNetwork(entry);
  return typeof parsed === 'string' ? parsed : undefined;
}

/** Whether a client address is in a list of addresses and networks. */
export type NetworkMatcher = (remoteAddress: string | undefined) => boolean;

/**
 * The matcher of `entries`, each already checked by networkProblem (the config schema does).
 * An empty list matches nothing, cheaply: the common case of each connection.
 */
export function networkMatcher(entries: readonly string[]): NetworkMatcher {
  if (entries.length === 0) return () => false;
  const list = new BlockList();
  for (const entry of entries) {
    const n = parseNetwork(entry);
    if (typeof n === 'string') throw new Error(n);
    list.addSubnet(n.address, n.bits, n.family);
  }
  return (remoteAddress) => {
    // A link-local client may carry its zone (fe80::1%eth0): the address is what is matched.
    const ip = (remoteAddress ?? '').split('%')[0]!;
    const v4 = MAPPED.exec(ip)?.[1];
    if (v4 !== undefined) return list.check(v4, 'ipv4');
    const family = isIP(ip);
    return family !== 0 && list.check(ip, family === 4 ? 'ipv4' : 'ipv6');
  };
}
