import test from 'ava';
import fc from 'fast-check';
import { parseMailbox, parseMailboxFully, simpleMailbox, type Mailbox } from '../../src/core/emails/addresses.js';

// The shortcut for simple mailboxes must give exactly what the full parse gives, and take
// nothing the full parse would refuse.

const nameWord = fc.constantFrom('Acme', 'a', '9', 'Bench', 'Zoë', '"Q"', 'x,y', 'Dr.', 'a@b', 'T:', 'x;', '(c)', '<', '>', '\\', '=?utf-8?q?x?=', '\t');
const name = fc.array(nameWord, { minLength: 1, maxLength: 4 }).chain((words) => fc.constantFrom(' ', '  ', '').map((sep) => words.join(sep)));
const localPart = fc.constantFrom('hello', 'a.b', 'a..b', '.a', 'a.', "o'brien", 'x+tag', '{}|~', '#!$%&*/=?^_`-', 'A', '"quoted"', '"a b"', 'é', 'a b', '');
const label = fc.constantFrom('example', 'com', 'a-b', '-x', 'x-', '123', 'xn--bcher-kva', 'bücher', 'EXAMPLE', 'Org', '');
const domain = fc.array(label, { minLength: 1, maxLength: 4 }).map((labels) => labels.join('.'));
const address = fc.tuple(localPart, fc.constantFrom('@', '@@', ''), domain).map(([l, at, d]) => `${l}${at}${d}`);
// Mostly well-formed pieces, so that many inputs are simple and the two paths are compared.
const plainWord = fc.stringMatching(/^[A-Za-z0-9]{1,6}$/);
const plainName = fc.array(plainWord, { minLength: 1, maxLength: 3 }).map((words) => words.join(' '));
const atext = fc.stringMatching(/^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]{1,8}$/);
const plainLocal = fc.array(atext, { minLength: 1, maxLength: 3 }).map((parts) => parts.join('.'));
const plainLabel = fc.oneof(fc.stringMatching(/^[A-Za-z0-9-]{1,10}$/), fc.constantFrom('com', 'EXAMPLE', '123', 'xn--bcher-kva'));
const plainDomain = fc.array(plainLabel, { minLength: 1, maxLength: 4 }).map((labels) => labels.join('.'));
const plainAddress = fc.tuple(plainLocal, plainDomain).map(([l, d]) => `${l}@${d}`);
const mailbox = fc.oneof(
  { arbitrary: plainAddress, weight: 3 },
  { arbitrary: fc.tuple(plainName, plainAddress).map(([n, a]) => `${n} <${a}>`), weight: 3 },
  fc.tuple(plainName, address).map(([n, a]) => `${n} <${a}>`),
  fc.tuple(name, plainAddress).map(([n, a]) => `${n} <${a}>`),
  address,
  fc.tuple(name, address).map(([n, a]) => `${n} <${a}>`),
  fc.tuple(name, address, fc.constantFrom('<', ' <', '  <', '< ', ' < ')).map(([n, a, open]) => `${n}${open}${a}>`),
  fc.tuple(name, address, fc.constantFrom('', ' ', 'x', ' <b@c.de>')).map(([n, a, tail]) => `${n} <${a}>${tail}`),
  fc.tuple(address, fc.constantFrom(' ', '\t', ' x', ',')).map(([a, tail]) => `${a}${tail}`),
);

function full(input: string): Mailbox | Error {
  try {
    return parseMailboxFully(input, 'from');
  } catch (err) {
    return err as Error;
  }
}

test('the shortcut gives what the full parse gives, and refuses nothing the full parse would take differently', (t) => {
  let shortcuts = 0;
  let fallbacks = 0;
  fc.assert(
    fc.property(mailbox, (input) => {
      const fast = simpleMailbox(input);
      if (fast === undefined) {
        fallbacks++;
        return;
      }
      shortcuts++;
      const slow = full(input);
      if (slow instanceof Error) throw new Error(`the shortcut took ${JSON.stringify(input)}, the full parse refused it: ${slow.message}`);
      if (slow.name !== fast.name || slow.address !== fast.address) throw new Error(`${JSON.stringify(input)}: ${JSON.stringify(fast)} vs ${JSON.stringify(slow)}`);
    }),
    { numRuns: 20_000 },
  );
  // both paths were exercised, not one of them vacuously
  t.true(shortcuts > 1_000, `shortcuts: ${shortcuts}`);
  t.true(fallbacks > 1_000, `fallbacks: ${fallbacks}`);
});

test('the common forms take the shortcut', (t) => {
  t.deepEqual(simpleMailbox('hello@bench-sender.com'), { name: '', address: 'hello@bench-sender.com' });
  t.deepEqual(simpleMailbox('Bench <hello@bench-sender.com>'), { name: 'Bench', address: 'hello@bench-sender.com' });
  t.deepEqual(simpleMailbox('Acme Support 2 <Help.Desk+x@Mail.EXAMPLE.org>'), { name: 'Acme Support 2', address: 'Help.Desk+x@mail.example.org' });
});

test('anything else goes to the full parse, with its answers and errors', (t) => {
  for (const input of ['Doe, John <john@example.com>', '"Doe, John" <john@example.com>', 'Zoë <z@example.com>', 'a@b.123', 'x@bücher.example', 'Evil <x@evil.com> <victim@example.net>', 'a <b@c.de> x']) {
    t.is(simpleMailbox(input), undefined, input);
  }
  t.deepEqual(parseMailbox('"Doe, John" <john@example.com>', 'from'), { name: 'Doe, John', address: 'john@example.com' });
  t.deepEqual(parseMailbox('x@bücher.example', 'from'), { name: '', address: 'x@xn--bcher-kva.example' });
  t.throws(() => parseMailbox('a@b.123', 'from'), { message: 'from: "a@b.123" is not a valid email address' });
  t.throws(() => parseMailbox('Evil <x@evil.com> <victim@example.net>', 'to'), { message: /to: .* is not a single valid email address/ });
});

test('a domain whose labels hold combining marks is an address: Devanagari vowel signs, a decomposed ü', (t) => {
  // उदाहरण.परीक्षा is IANA's Hindi test domain; its vowel signs and virama are marks (\p{M}), not letters.
  t.deepEqual(parseMailbox('ute@उदाहरण.परीक्षा', 'to'), { name: '', address: 'ute@xn--p1b6ci4b4b3a.xn--11b5bs3a9aj6g' });
  t.deepEqual(parseMailbox('Ute <ute@bu\u0308cher.example>', 'to'), { name: 'Ute', address: 'ute@xn--bcher-kva.example' });
  // A label may not begin with a mark (IDNA), nor be only one.
  t.throws(() => parseMailbox('ute@\u0308bcher.example', 'to'), { message: /is not a valid email address/ });
  t.throws(() => parseMailbox('ute@\u094d.example', 'to'), { message: /is not a valid email address/ });
});

test('a domain whose A-label form is longer than DNS allows is refused, as its ASCII form would be', (t) => {
  // 60 ideographs are a 66-octet A-label: DNS refuses the name (RFC 1035 2.3.4), so the mail
  // could only be deferred until it is given up.
  t.throws(() => parseMailbox(`ute@${'例'.repeat(60)}.example`, 'to'), { message: /is not a valid email address/ });
  t.throws(() => parseMailbox(`ute@${'a'.repeat(64)}.example`, 'to'), { message: /is not a valid email address/ });
  // Five labels of 45 ideographs (an address of 241 characters): each A-label fits, the whole
  // name (over 253 octets) does not.
  t.throws(() => parseMailbox(`ute@${Array(5).fill('例'.repeat(45)).join('.')}.example`, 'to'), { message: /is not a valid email address/ });
  // Five of 40 (216 characters) is a 242-octet name, which fits.
  t.is(parseMailbox(`ute@${Array(5).fill('例'.repeat(40)).join('.')}.example`, 'to').address.length, 246);
});
