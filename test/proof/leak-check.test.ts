import test from 'ava';
import { randomBytes } from 'node:crypto';
import { leakedMarkers } from './helpers/leak-check.js';
import type { TestResponse } from '../helpers/test-app.js';

// The isolation proofs' leak finder: it must not cry wolf at a short marker that random base64
// happens to spell, nor miss one written as text.

const response = (body: unknown) => ({ status: 200, body }) as unknown as TestResponse;

/** A base64 blob spelling `word` (case aside) somewhere inside, as a DKIM key now and then does. */
function blobWith(word: string): string {
  const b64 = randomBytes(294).toString('base64');
  return `${b64.slice(0, 150)}${word.toUpperCase().slice(0, 2)}${word.slice(2)}${b64.slice(150)}`;
}

test('a short marker inside a long base64 run is chance, not a leak; as text it is a leak', (t) => {
  const markers = ['acme', 'em_0123456789abcdef'];
  t.deepEqual(leakedMarkers(response([{ name: 'bolt-mail.dev', publicKey: blobWith('acme') }]), '', markers), []);
  t.deepEqual(leakedMarkers(response([{ name: 'acme-mail.dev', publicKey: blobWith('x') }]), '', markers), ['acme']);
  t.deepEqual(leakedMarkers(response({ subject: 'ACME news' }), '', markers), ['acme']);
  t.deepEqual(leakedMarkers(response({ url: 'https://hooks.example/acme-all' }), '', markers), ['acme']);
});

test('a long marker is found anywhere, inside a base64 run too; one the request carried is not a leak', (t) => {
  const key = randomBytes(294).toString('base64');
  t.deepEqual(leakedMarkers(response({ records: [{ value: `v=DKIM1; k=rsa; p=${key}` }] }), '', [key]), [key]);
  t.deepEqual(leakedMarkers(response({ error: { code: 'NOT_FOUND', message: 'template em_0123456789abcdef not found' } }), '/templates/em_0123456789abcdef', ['em_0123456789abcdef']), []);
});
