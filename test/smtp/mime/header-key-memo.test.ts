import test from 'ava';
import fc from 'fast-check';
import MimeNode from 'nodemailer/lib/mime-node';
import { installHeaderKeyMemo, MAX_REMEMBERED_HEADER_KEYS, originalNormalizeHeaderKey } from '../../../src/smtp/outbound/header-key-memo.js';
import '../../../src/smtp/outbound/mime-builder.js'; // installs the memo, as in production

// The memo must be invisible: whatever nodemailer's own normalization makes of a header
// name, the memoized one makes too, the first time and every time after.

const SEED = Number(process.env.FUZZ_SEED ?? 20261122);
type Normalize = (key: unknown) => string;
const patched = (MimeNode.prototype as unknown as { _normalizeHeaderKey: Normalize & { memoized?: true } })._normalizeHeaderKey;

const headerName = fc.oneof(
  fc.constantFrom('content-type', 'CONTENT-TYPE', 'Content-Type', 'mime-version', 'x-smtpapi', 'message-id', 'dkim-signature', 'arc-seal',
    'bimi-selector', 'otp-token', 'x-spf', 'list-unsubscribe-post', 'content-features', 'From: ceo@example.com (', ' to ', 'x\u0000y', 'x-ms-exchange-organization-scl', ''),
  fc.string({ maxLength: 30 }),
  fc.string({ unit: 'grapheme', maxLength: 10 }),
);

test('the memo is installed once and gives what nodemailer gives, the first time and every time after', (t) => {
  installHeaderKeyMemo(); // a second install changes nothing
  t.true(patched.memoized);
  t.not(patched, originalNormalizeHeaderKey);
  fc.assert(
    fc.property(headerName, (key) => {
      const expected = originalNormalizeHeaderKey.call(undefined, key);
      return patched.call(undefined, key) === expected && patched.call(undefined, key) === expected;
    }),
    { seed: SEED, numRuns: 3000 },
  );
});

test('non-string names go straight to nodemailer', (t) => {
  for (const key of [undefined, null, 42, { toString: () => 'x-custom' }]) t.is(patched.call(undefined, key), originalNormalizeHeaderKey.call(undefined, key));
});

test('the memo is bounded: past its size, names are still normalized, just not remembered', (t) => {
  for (let i = 0; i < MAX_REMEMBERED_HEADER_KEYS + 50; i++) {
    const key = `x-bounded-${i}`;
    t.is(patched.call(undefined, key), originalNormalizeHeaderKey.call(undefined, key));
  }
});
