import test from 'ava';
import { blockedAddressReason, resolveWebhookTarget } from '../../src/core/webhooks/url-policy.js';
import { DnsError, type DnsResolver } from '../../src/lib/dns/dns-client.js';

// The SSRF guard of webhook and TLS-report URLs (core/webhooks/url-policy.ts) on IPv6 forms that
// carry or reach an IPv4 address, and on reserved ranges. No network: the classifier directly,
// and the resolve-then-check path through a resolver that answers from a table.

function tableResolver(a: Record<string, string[]>, aaaa: Record<string, string[]>): DnsResolver {
  const answer = (table: Record<string, string[]>, name: string, type: string) => {
    const records = table[name];
    if (!records) return Promise.reject(new DnsError('NODATA', name, type));
    return Promise.resolve({ records, ttlSeconds: 60 });
  };
  const none = () => Promise.reject(new Error('not used'));
  return { resolve4: (n) => answer(a, n, 'A'), resolve6: (n) => answer(aaaa, n, 'AAAA'), resolveTxt: none, resolveMx: none, resolveCname: none };
}

test('IPv6 forms that embed or translate to a non-public IPv4 address, and reserved IPv6 ranges, are refused', (t) => {
  const blocked: [string, RegExp][] = [
    ['::ffff:10.0.0.1', /private/], // IPv4-mapped
    ['::ffff:7f00:1', /loopback/],
    ['::10.0.0.1', /private/], // IPv4-compatible (deprecated)
    ['::ffff:0:a9fe:a9fe', /link-local/], // IPv4-translated (SIIT, RFC 2765)
    ['64:ff9b::a00:1', /private/], // NAT64 well-known prefix (RFC 6052)
    ['64:ff9b::127.0.0.1', /loopback/],
    ['64:ff9b:1::8.8.8.8', /local-use NAT64/], // RFC 8215: the translator is the operator's own, its mapping unknown
    ['64:ff9b:1:ffff::1', /local-use NAT64/],
    ['2002:a00:1::1', /private/], // 6to4 of 10.0.0.1 (RFC 3056)
    ['2002:7f00:1::', /loopback/],
    ['2002:a9fe:a9fe:1::1', /link-local/],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', /IETF protocol/], // Teredo (RFC 4380)
    ['2001:2::1', /IETF protocol/], // benchmarking (RFC 5180)
    ['100::1', /discard/], // discard-only (RFC 6666)
    ['5f00::1', /segment routing/], // SRv6 SIDs (RFC 9602)
  ];
  for (const [ip, reason] of blocked) t.regex(blockedAddressReason(ip) ?? 'allowed', reason, ip);
  for (const ip of ['192.88.99.1']) t.regex(blockedAddressReason(ip) ?? 'allowed', /6to4 relay/, ip);
  // Their public counterparts stay allowed: NAT64 and 6to4 of a public address, ordinary global unicast.
  for (const ip of ['64:ff9b::808:808', '2002:808:808::1', '::ffff:8.8.8.8', '2001:4860:4860::8888', '2a00:1450::1', '2001:200::1']) t.is(blockedAddressReason(ip), null, ip);
});

test('a name whose AAAA record is a NAT64 or 6to4 form of a private address is refused after resolving; allowPrivate still allows it', async (t) => {
  const resolver = tableResolver({ 'public.example': ['8.8.8.8'] }, { 'nat64.example': ['64:ff9b::c0a8:101'], 'local64.example': ['64:ff9b:1::1'], 'sixto4.example': ['2002:c0a8:101::1'], 'public.example': ['2002:808:808::1'] });
  for (const [host, reason] of [
    ['nat64.example', /64:ff9b::c0a8:101 is a private address \(nat64\.example resolves to/],
    ['local64.example', /64:ff9b:1::1 is a local-use NAT64 address/],
    ['sixto4.example', /2002:c0a8:101::1 is a private address/],
  ] as const) {
    const err = await t.throwsAsync(resolveWebhookTarget(`https://${host}/hook`, resolver, false));
    t.regex(err!.message, reason, host);
    t.is((err as { problem?: string }).problem, 'private');
  }
  const literal = await t.throwsAsync(resolveWebhookTarget('http://[64:ff9b:1::a00:1]/hook', resolver, false));
  t.regex(literal!.message, /local-use NAT64/);
  t.is((await resolveWebhookTarget('https://public.example/hook', resolver, false)).address, '8.8.8.8');
  // An install that allows private receivers (and the tests' loopback receivers) is not affected.
  t.is((await resolveWebhookTarget('https://sixto4.example/hook', resolver, true)).address, '2002:c0a8:101::1');
  t.is((await resolveWebhookTarget('http://127.0.0.1:9/hook', resolver, true)).address, '127.0.0.1');
});
