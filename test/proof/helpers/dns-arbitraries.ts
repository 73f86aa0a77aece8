// fast-check arbitraries of a hostile resolver's answers (hostile-dns.ts): one Mutation per
// query, drawn from a plan a batch generates.
import fc from 'fast-check';
import type { Mutation, Replacement, TcpTrouble, TxtChunk } from './hostile-dns.js';

/** RFC 2181 8: 2^31-1 is the largest TTL; above it the top bit is set and it reads as zero. */
const ttl = fc.constantFrom(0, 1, 300, 0x7fffffff, 0x80000000, 0xffffffff);

const txtChunk: fc.Arbitrary<TxtChunk> = fc.oneof(
  fc.constant<TxtChunk>({ kind: 'text', text: '' }),
  fc.constantFrom<TxtChunk>(
    { kind: 'text', text: 'v=spf1 -all' },
    { kind: 'text', text: 'v=spf1 include:loop.fuzz-dns.dev redirect=loop.fuzz-dns.dev ?all' },
    { kind: 'text', text: 'v=spf1 ip4:127.0.0.1 a mx ptr exists:%{i}.fuzz-dns.dev ~all' },
    { kind: 'text', text: 'v=DMARC1; p=reject; rua=mailto:a@fuzz-dns.dev' },
    { kind: 'text', text: 'v=DKIM1; k=rsa; p=' },
    { kind: 'text', text: 'v=DKIM1; k=ed25519; p=AAAA' },
    { kind: 'text', text: 'v=STSv1; id=20260601' },
    { kind: 'text', text: 'v=TLSRPTv1; rua=mailto:tls@fuzz-dns.dev' },
    { kind: 'text', text: 'a'.repeat(255) },
  ),
  fc.string({ maxLength: 40 }).map((text): TxtChunk => ({ kind: 'text', text })),
  // binary, invalid UTF-8 (lone continuation bytes, a cut sequence, overlong NUL), NULs
  fc.uint8Array({ maxLength: 255 }).map((b): TxtChunk => ({ kind: 'bytes', bytes: [...b] })),
  fc.constantFrom<TxtChunk>({ kind: 'bytes', bytes: [0xff, 0xfe, 0x80] }, { kind: 'bytes', bytes: [0x76, 0x3d, 0xe2, 0x82] }, { kind: 'bytes', bytes: [0xc0, 0x80, 0x00, 0x00] }, { kind: 'bytes', bytes: [0xed, 0xa0, 0x80] }),
);

/** Names as a hostile server may write them on the wire: any octet goes in a label (RFC 2181 11). */
export const ODD_NAMES = ['nul\u0000byte.fuzz-dns.dev', 'crlf\r\nRCPT TO:<x@y>.fuzz-dns.dev', 'tab\there.fuzz-dns.dev', 'd\u00fcsseldorf.fuzz-dns.dev', 'x\ud800y.fuzz-dns.dev', 'dot\\.in.label.fuzz-dns.dev', `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(50)}.fuzz-dns.dev`];
const oddName = fc.constantFrom(...ODD_NAMES);
const mxExchange = fc.oneof(fc.constantFrom('.', '', '127.0.0.1', '[127.0.0.1]', 'mx.sink.test', 'localhost', 'no-such-host.fuzz-dns.dev', 'x'.repeat(63) + '.fuzz-dns.dev'), oddName);
const oddV4 = fc.constantFrom('0.0.0.0', '127.0.0.1', '127.0.0.5', '127.255.255.255', '224.0.0.1', '239.255.255.250', '255.255.255.255');
const oddV6 = fc.constantFrom('::', '::1', 'ff02::1', '::ffff:127.0.0.1', 'fe80::1');

const replacement: fc.Arbitrary<Replacement> = fc.oneof(
  fc.record({ type: fc.constant('MX' as const), records: fc.array(fc.record({ exchange: mxExchange, preference: fc.oneof(fc.constantFrom(0, 65535), fc.integer({ min: 0, max: 65535 })) }), { minLength: 1, maxLength: 5 }) }),
  fc.record({ type: fc.constant('TXT' as const), records: fc.array(fc.array(txtChunk, { maxLength: 6 }), { minLength: 1, maxLength: 4 }) }),
  fc.record({ type: fc.constant('A' as const), records: fc.array(oddV4, { minLength: 1, maxLength: 4 }) }),
  fc.record({ type: fc.constant('AAAA' as const), records: fc.array(oddV6, { minLength: 1, maxLength: 4 }) }),
  fc.record({
    type: fc.constant('TLSA' as const),
    records: fc.array(fc.record({ usage: fc.integer({ min: 0, max: 255 }), selector: fc.integer({ min: 0, max: 255 }), matchingType: fc.integer({ min: 0, max: 255 }), data: fc.uint8Array({ maxLength: 70 }).map((b) => [...b]) }), { minLength: 1, maxLength: 3 }),
  }),
  fc.record({ type: fc.constant('CNAME' as const), records: fc.array(fc.oneof(fc.constantFrom('.', 'loop.fuzz-dns.dev', 'mx.sink.test'), oddName), { minLength: 1, maxLength: 2 }) }),
);

const tcpTrouble = fc.constantFrom<TcpTrouble>('answer', 'garbage', 'close', 'silent', 'cut', 'wrong-id');

export const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { arbitrary: fc.constant<Mutation>({ kind: 'pass' }), weight: 6 },
  { arbitrary: fc.constant<Mutation>({ kind: 'silent' }), weight: 1 },
  {
    arbitrary: fc.record({ kind: fc.constant('rcode' as const), rcode: fc.integer({ min: 0, max: 15 }), withQuestion: fc.oneof({ arbitrary: fc.constant(true), weight: 4 }, { arbitrary: fc.constant(false), weight: 1 }), extended: fc.oneof({ arbitrary: fc.constant(0), weight: 4 }, { arbitrary: fc.integer({ min: 1, max: 255 }), weight: 1 }) }),
    weight: 4,
  },
  { arbitrary: fc.constant<Mutation>({ kind: 'nodata' }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('spoof' as const), how: fc.constantFrom('id' as const, 'question' as const, 'type' as const), then: fc.constantFrom('answer' as const, 'silent' as const) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('garbage' as const), bytes: fc.uint8Array({ maxLength: 600 }).map((b) => [...b]) }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('cut' as const), fraction: fc.double({ min: 0, max: 0.99, noNaN: true }) }), weight: 1 },
  { arbitrary: fc.constant<Mutation>({ kind: 'pointer-loop' }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('counts' as const), section: fc.constantFrom('qd' as const, 'an' as const, 'ns' as const, 'ar' as const), extra: fc.oneof(fc.integer({ min: 1, max: 3 }), fc.constant(65535)) }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('other-records' as const), keepCorrect: fc.boolean() }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('cname' as const), shape: fc.constantFrom('chain' as const, 'loop' as const, 'dangling' as const), hops: fc.oneof(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 15, max: 20 })) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('replace' as const), replacement, ttl, ad: fc.boolean() }), weight: 5 },
  { arbitrary: fc.record({ kind: fc.constant('huge' as const), type: fc.constantFrom('MX' as const, 'TXT' as const), count: fc.integer({ min: 100, max: 250 }) }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('ttl' as const), ttl }), weight: 2 },
  { arbitrary: fc.constant<Mutation>({ kind: 'ad' }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('tc' as const), tcp: tcpTrouble, udpRecords: fc.boolean() }), weight: 2 },
);

/** The mutations of one batch; a query picks among them by its name and how often it was asked. */
export const plan = fc.array(mutation, { minLength: 1, maxLength: 8 });
