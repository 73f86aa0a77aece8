import test from 'ava';
import { decodeCanonicalBase64url, decodeCanonicalBase64urlText } from '../../src/lib/base64url.js';
import { createTrackingTokens } from '../../src/core/tracking/tracking-tokens.js';
import { signUnsubscribeToken, verifyUnsubscribeToken } from '../../src/core/campaigns/unsubscribe-token.js';
import { signConfirmationToken, verifyConfirmationToken } from '../../src/core/contacts/confirmation-token.js';

/** Spellings Node's lenient decoder reads as the same bytes as `canonical`. */
function variants(canonical: string): string[] {
  const out = [`${canonical}=`, `${canonical}==`, ` ${canonical}`, `${canonical}\n`, `${canonical.slice(0, 2)}.${canonical.slice(2)}`, canonical.replace(/-/g, '+').replace(/_/g, '/')];
  // The unused low bits of the last character: set them and the bytes do not change.
  if (canonical.length % 4 !== 0) {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const last = alphabet.indexOf(canonical.at(-1)!);
    const unused = canonical.length % 4 === 2 ? 0b1111 : 0b11;
    for (let bits = 1; bits <= unused; bits++) out.push(canonical.slice(0, -1) + alphabet[(last & ~unused) | bits]);
  }
  return out.filter((v) => v !== canonical && Buffer.from(v, 'base64url').equals(Buffer.from(canonical, 'base64url')));
}

test('only the canonical unpadded base64url spelling decodes', (t) => {
  for (const bytes of [Buffer.from('A'), Buffer.from('AB'), Buffer.from('ABC'), Buffer.from([0xff, 0xfe]), Buffer.alloc(0)]) {
    const canonical = bytes.toString('base64url');
    t.deepEqual(decodeCanonicalBase64url(canonical), bytes);
    for (const v of variants(canonical)) t.is(decodeCanonicalBase64url(v), null, JSON.stringify(v));
  }
  t.is(decodeCanonicalBase64url('QR'), null, 'QR reads as "A" too, but QQ is its spelling');
  t.is(decodeCanonicalBase64url('Q'), null);
  // Bytes that are not UTF-8 would read as U+FFFD, like other invalid bytes.
  t.is(decodeCanonicalBase64urlText(Buffer.from([0xc3, 0x28]).toString('base64url')), null);
  t.is(decodeCanonicalBase64urlText(Buffer.from('ü').toString('base64url')), 'ü');
});

test('signed links have exactly one spelling: unsubscribe, confirmation and click tokens', (t) => {
  const secret = 's3cret';
  const unsub = signUnsubscribeToken(secret, 'cp_abc', 'ct_defg');
  t.truthy(verifyUnsubscribeToken(secret, unsub));
  const [payload, mac] = unsub.split('.') as [string, string];
  for (const v of variants(payload)) t.is(verifyUnsubscribeToken(secret, `${v}.${mac}`), null, `payload ${v}`);
  for (const v of variants(mac)) t.is(verifyUnsubscribeToken(secret, `${payload}.${v}`), null, `mac ${v}`);

  const now = Date.UTC(2026, 10, 25);
  const confirm = signConfirmationToken(secret, 'ct_abcdef', now + 1000);
  t.true(verifyConfirmationToken(secret, confirm, now).ok);
  const [cPayload, cMac] = confirm.split('.') as [string, string];
  for (const v of variants(cPayload)) t.false(verifyConfirmationToken(secret, `${v}.${cMac}`, now).ok, `payload ${v}`);
  for (const v of variants(cMac)) t.false(verifyConfirmationToken(secret, `${cPayload}.${v}`, now).ok, `mac ${v}`);

  const tokens = createTrackingTokens(secret);
  const click = tokens.click('em_abc', 'https://example.com/x');
  t.truthy(tokens.verifyClick(click));
  const [id, url, tag] = click.split('.') as [string, string, string];
  t.true(variants(url).length > 0);
  for (const v of variants(url)) t.is(tokens.verifyClick(`${id}.${v}.${tag}`), null, `url ${v}`);
  for (const v of variants(tag)) t.is(tokens.verifyClick(`${id}.${url}.${v}`), null, `tag ${v}`);
  const open = tokens.open('em_abc');
  for (const v of variants(open.split('.')[1]!)) t.is(tokens.verifyOpen(`em_abc.${v}`), null, `open ${v}`);
});
