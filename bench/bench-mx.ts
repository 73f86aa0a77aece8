import type { DnsZone } from '../test/helpers/dns-zone.js';

// The benchmark's destinations: RECIPIENT_DOMAINS recipient domains whose MX records point at
// BENCH_MX_HOSTS sink addresses (127.0.0.1, 127.0.0.2, ...: loopback aliases, one sink
// process behind them all). With one address (the default, as in earlier rounds) every session
// goes to one destination host and maxConnectionsPerHost (10) caps them all, for one node or a
// whole cluster; real traffic spreads over many MX hosts.

export const RECIPIENT_DOMAINS = 20;

export function mxAddresses(): string[] {
  const n = Number(process.env.BENCH_MX_HOSTS ?? 1);
  if (!Number.isInteger(n) || n < 1 || n > 200) throw new Error('BENCH_MX_HOSTS must be a whole number from 1 to 200');
  return Array.from({ length: n }, (_, i) => `127.0.0.${i + 1}`);
}

/** Sets the recipient domains' MX records (rcpt<i>.bench.test -> mx<i % hosts>.bench.test -> its address). */
export function setRecipientDomains(zone: DnsZone, addresses: string[]): void {
  addresses.forEach((a, j) => zone.set(`mx${j}.bench.test`, 'A', [a]));
  for (let i = 0; i < RECIPIENT_DOMAINS; i++) zone.set(`rcpt${i}.bench.test`, 'MX', [{ exchange: `mx${i % addresses.length}.bench.test`, priority: 10 }]);
}
