import test from 'ava';
import { mxAllowed, mxMatchesPattern, parseStsPolicy, parseStsTxt, StsPolicyError } from '../../../src/smtp/outbound/mta-sts-policy.js';

// RFC 8461 §3.1 (TXT), §3.2 (policy file) and §4.1 (MX matching), read strictly.

test('TXT: one v=STSv1 record with an id; chunks are joined; other records are ignored', (t) => {
  t.deepEqual(parseStsTxt([['v=STSv1; id=20160831085700Z;']]), { id: '20160831085700Z' });
  t.deepEqual(parseStsTxt([['v=STSv1; ', 'id=abc123']]), { id: 'abc123' });
  t.deepEqual(parseStsTxt([['v=spf1 -all'], ['v=STSv1; id=x1; ext_1=value']]), { id: 'x1' });
});

test('TXT: anything else means no policy to discover', (t) => {
  t.is(parseStsTxt([]), null);
  t.is(parseStsTxt([['v=STSv1; id=a'], ['v=STSv1; id=b']]), null, 'two records: none');
  t.is(parseStsTxt([['v=STSv1;']]), null, 'no id');
  t.is(parseStsTxt([['v=STSv1; id=has-dash']]), null, 'id is alphanumeric');
  t.is(parseStsTxt([['v=STSv1; id=' + 'a'.repeat(33)]]), null, 'id is at most 32');
  t.is(parseStsTxt([['v=STSv2; id=a']]), null);
  t.is(parseStsTxt([['id=a; v=STSv1']]), null, 'v comes first');
  t.is(parseStsTxt([['v=STSv1; id=a; bad field']]), null);
});

test('policy: the fields, LF or CRLF, unknown fields ignored, first occurrence wins', (t) => {
  const p = parseStsPolicy('version: STSv1\nmode: enforce\nmx: mail.example.com\nmx: *.example.net\nmax_age: 604800\nmode: none\nfoo: bar\n');
  t.is(p.mode, 'enforce');
  t.deepEqual(p.mx, ['mail.example.com', '*.example.net']);
  t.is(p.maxAgeSeconds, 604800);
  t.true(p.lines.includes('mx: *.example.net'));
  t.is(parseStsPolicy('version: STSv1\r\nmode: testing\r\nmx: MX.Example.COM.\r\nmax_age: 0').mx[0], 'mx.example.com');
  t.is(parseStsPolicy('version: STSv1\nmode: none\nmax_age: 86400\n').mode, 'none', 'mode none needs no mx');
});

test('policy: a malformed one is invalid, saying why', (t) => {
  const bad = (body: string, why: RegExp) => t.throws(() => parseStsPolicy(body), { instanceOf: StsPolicyError, message: why }, body);
  bad('mode: enforce\nmx: a.example\nmax_age: 1\n', /version/);
  bad('version: STSv1\nmode: strict\nmx: a.example\nmax_age: 1\n', /mode/);
  bad('version: STSv1\nmode: enforce\nmx: a.example\n', /max_age/);
  bad('version: STSv1\nmode: enforce\nmx: a.example\nmax_age: 31557601\n', /max_age/);
  bad('version: STSv1\nmode: enforce\nmx: a.example\nmax_age: -1\n', /max_age/);
  bad('version: STSv1\nmode: enforce\nmax_age: 86400\n', /mx: at least one/);
  bad('version: STSv1\nmode: enforce\nmx: *.*.example\nmax_age: 86400\n', /mx/);
  bad('version: STSv1\nmode: enforce\nmx: mx_1.example\nmax_age: 86400\n', /mx/);
  // The reason quotes the value escaped: it goes into delivery events, which must hold no NUL.
  bad('version: STSv1\nmode: enforce\nmx: a\0b.example\nmax_age: 86400\n', /^mx: "a\\u0000b\.example" is not a host name pattern$/);
  bad('<html>oops</html>\n', /key: value/);
  bad('version: STSv1\nmode:\nmx: a.example\nmax_age: 1\n', /empty/);
});

test('policy: a value of 64 KB (the most fetched) of spaces and tabs before its end is trimmed in linear time', (t) => {
  // The trailing-space pattern scanned from every space to the end of the run: ~30 s for this one
  // remote line on a loaded machine.
  const pad = ' \t'.repeat(32 * 1024 - 40);
  const policy = parseStsPolicy(`version: STSv1\nmode: none\nmax_age: 86400\next:${pad}x${pad}\n`);
  t.is(policy.lines.at(-1), `ext: x`);
  t.is(policy.mode, 'none');
});

test('MX matching: exact names, and a wildcard for exactly one leftmost label', (t) => {
  t.true(mxMatchesPattern('mail.example.com', 'mail.example.com'));
  t.true(mxMatchesPattern('MAIL.example.com.', 'mail.example.com'));
  t.true(mxMatchesPattern('mx1.example.net', '*.example.net'));
  t.false(mxMatchesPattern('example.net', '*.example.net'));
  t.false(mxMatchesPattern('a.b.example.net', '*.example.net'));
  t.false(mxMatchesPattern('mail.example.com.evil.test', 'mail.example.com'));
  t.true(mxAllowed('mx2.example.net', { mx: ['mail.example.com', '*.example.net'] }));
  t.false(mxAllowed('mx2.example.org', { mx: ['mail.example.com', '*.example.net'] }));
});
