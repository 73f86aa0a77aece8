import test from 'ava';
import { addressLikePatterns } from '../../src/store/repositories/address-like-patterns.js';
import { addressKey, normalizeAddress } from '../../src/core/emails/addresses.js';

// The patterns behind the address searches (address-search-idn.test.ts runs them through HTTP
// on both stores): an ASCII term is the one pattern it always was, and a domain in Unicode adds
// its A-labels, each converted label bounded as a whole label.

test('an ASCII term is one pattern, the term taken literally', (t) => {
  t.deepEqual(addressLikePatterns('contains', 'x_y%z@example.net'), ['%x\\_y\\%z@example.net%']);
  t.deepEqual(addressLikePatterns('startsWith', 'a\\b'), ['a\\\\b%']);
  t.deepEqual(addressLikePatterns('endsWith', '@xn--bcher-kva.example'), ['%@xn--bcher-kva.example']);
});

test('a domain written in Unicode adds its A-labels, each converted label whole', (t) => {
  t.deepEqual(addressLikePatterns('contains', 'ute@bücher.example'), ['%ute@bücher.example%', '%ute@xn--bcher-kva.example%']);
  t.deepEqual(addressLikePatterns('contains', '@bücher'), ['%@bücher%', '%@xn--bcher-kva.%', '%@xn--bcher-kva']);
  t.deepEqual(addressLikePatterns('contains', 'bücher.example'), ['%bücher.example%', '%@xn--bcher-kva.example%', '%.xn--bcher-kva.example%']);
  t.deepEqual(addressLikePatterns('endsWith', 'bücher.example'), ['%bücher.example', '%@xn--bcher-kva.example', '%.xn--bcher-kva.example']);
  t.deepEqual(addressLikePatterns('startsWith', 'ute@bücher'), ['ute@bücher%', 'ute@xn--bcher-kva.%', 'ute@xn--bcher-kva']);
  t.deepEqual(addressLikePatterns('contains', 'mail.bücher'), ['%mail.bücher%', '%mail.xn--bcher-kva.%', '%mail.xn--bcher-kva']);
  // UTS #46 separators and case, as addressKey reads them.
  t.deepEqual(addressLikePatterns('contains', '@bücher。example'), ['%@bücher。example%', '%@xn--bcher-kva.example%']);
});

test('a Unicode label is converted on its own: an unfinished domain ending in digits is no IPv4 address, an ASCII label is as typed', (t) => {
  // Typed toward münchen.2026.example: the whole text reads as an IPv4 address to WHATWG's
  // domainToASCII ('münchen.2026', and so with a dot after it), which refused it.
  t.deepEqual(addressLikePatterns('contains', 'münchen.2026'), ['%münchen.2026%', '%@xn--mnchen-3ya.2026%', '%.xn--mnchen-3ya.2026%']);
  t.deepEqual(addressLikePatterns('contains', 'münchen.2026.'), ['%münchen.2026.%', '%@xn--mnchen-3ya.2026.%', '%.xn--mnchen-3ya.2026.%']);
  t.deepEqual(addressLikePatterns('startsWith', 'eva@münchen.20'), ['eva@münchen.20%', 'eva@xn--mnchen-3ya.20%']);
  t.deepEqual(addressLikePatterns('contains', '@bücher.0x'), ['%@bücher.0x%', '%@xn--bcher-kva.0x%']);
  // An ASCII label is matched as typed, part of an A-label included.
  t.deepEqual(addressLikePatterns('contains', '@bücher.xn--p1'), ['%@bücher.xn--p1%', '%@xn--bcher-kva.xn--p1%']);
});

test('what cannot be a whole label stays as typed only', (t) => {
  for (const [op, term] of [
    ['contains', 'bücher'],
    ['endsWith', 'bücher'],
    ['startsWith', 'bücher.example'],
    ['contains', '%bücher.example'],
    ['contains', 'bü_her.example'],
    ['contains', '@bü cher.example'],
    ['contains', '"jürgen"@'],
    ['contains', 'jürgen@example.net'],
    ['contains', '@１２３'],
    ['contains', '@bücher.１２３'],
  ] as const) {
    t.is(addressLikePatterns(op, term).length, 1, `${op} ${term}`);
  }
});

test('the Greek final sigma in a domain: a capital is σ in a key and in a term, and ς is another domain (docs/api.md)', (t) => {
  t.is(addressKey('ann@ΕΛΛΆΣ.example'), 'ann@xn--hxarsa5b.example');
  t.is(addressKey('ann@ελλάσ.example'), 'ann@xn--hxarsa5b.example');
  t.is(addressKey('ann@ελλάς.example'), 'ann@xn--hxarsa0b.example');
  t.true(addressLikePatterns('contains', '@ΕΛΛΆΣ.example').includes('%@xn--hxarsa5b.example%'));
  t.true(addressLikePatterns('endsWith', '@ελλάς.example').includes('%@xn--hxarsa0b.example'));
  t.false(addressLikePatterns('endsWith', '@ελλάς.example').includes('%@xn--hxarsa5b.example'));
  // A capital Σ ending a word (before a hyphen, or at the domain's end) is σ too: JavaScript's
  // toLowerCase makes it ς there, IDNA (and the envelope, normalizeAddress) does not.
  for (const [address, key] of [
    ['ann@example.ΕΛΛΆΣ', 'ann@example.xn--hxarsa5b'],
    ['ann@ΑΣ-Β.example', 'ann@xn----ylbe0e.example'],
  ] as const) {
    t.is(addressKey(address), key, address);
    t.is(addressKey(normalizeAddress(address)), key, address);
  }
  t.true(addressLikePatterns('endsWith', '@example.ΕΛΛΆΣ').includes('%@example.xn--hxarsa5b'));
});
