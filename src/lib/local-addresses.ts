import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';

/**
 * Whether `address` belongs to this host: one of its interfaces' addresses, or anywhere in
 * 127.0.0.0/8 (Linux answers the whole loopback range, so 127.0.0.2 works without an alias).
 * An egress source bound to any other address cannot connect at all.
 */
export function isLocalAddress(address: string): boolean {
  const family = isIP(address);
  if (!family) return false;
  if (family === 4 && address.startsWith('127.')) return true;
  const wanted = address.toLowerCase();
  return Object.values(networkInterfaces()).some((list) => (list ?? []).some((i) => i.address.toLowerCase() === wanted));
}
