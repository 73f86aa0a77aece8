import test from 'ava';
import { pickDkimSelector, suffixedSelector } from '../../src/core/domains/dkim-selectors.js';
import { startTestApp } from '../helpers/test-app.js';

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/i;

test('the server selector while nobody else of the name holds it; otherwise a suffixed one (DNS compares without case)', (t) => {
  t.is(pickDkimSelector('posthorn', []), 'posthorn');
  t.is(pickDkimSelector('posthorn', ['other']), 'posthorn');
  t.regex(pickDkimSelector('posthorn', ['posthorn']), /^posthorn-[0-9a-f]{8}$/);
  t.regex(pickDkimSelector('posthorn', ['POSTHORN']), /^posthorn-[0-9a-f]{8}$/);
  t.not(pickDkimSelector('posthorn', ['posthorn', 'posthorn-00000000']), 'posthorn-00000000');
});

test('a suffixed selector is one DNS label of at most 63 characters, whatever the configured one', (t) => {
  const long = 'a'.repeat(63);
  const s = suffixedSelector(long);
  t.true(s.length <= 63);
  t.regex(s, LABEL);
  t.is(suffixedSelector('posthorn', 'abcd0123'), 'posthorn-abcd0123');
});

test('a domain named as the server itself does not take the selector of the server’s own key (server-dkim-key.ts)', async (t) => {
  const t0 = await startTestApp({ overrides: { hostname: 'mail.hostname-dkim.dev' } });
  try {
    const own = await t0.request('POST', '/v1/domains', { body: { name: 'mail.hostname-dkim.dev', region: 'r' } });
    t.is(own.status, 200, JSON.stringify(own.body));
    const dkim = own.body.dnsRecords.find((r: any) => r.name.includes('._domainkey.'));
    t.regex(dkim.name, /^posthorn-[0-9a-f]{8}\._domainkey\.mail\.hostname-dkim\.dev$/);
    const other = await t0.request('POST', '/v1/domains', { body: { name: 'hostname-dkim.dev', region: 'r' } });
    t.is(other.body.dnsRecords.find((r: any) => r.name.includes('._domainkey.')).name, 'posthorn._domainkey.hostname-dkim.dev', 'the parent name is another host');
  } finally {
    await t0.close();
  }
});
