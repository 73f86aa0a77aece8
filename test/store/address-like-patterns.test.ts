import test from 'ava';
import { addressLikePatterns } from '../../src/store/repositories/address-like-patterns.js';

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
    ['contains', '@bücher.xn--p1'],
  ] as const) {
    t.is(addressLikePatterns(op, term).length, 1, `${op} ${term}`);
  }
});
