import test from 'ava';
import { formatPlaceholder, listVariables, readPlaceholderAt, substituteVariables } from '../../src/render/variables.js';

const html = { escapeHtml: true };
const raw = { escapeHtml: false };

test('plain placeholders', (t) => {
  t.is(substituteVariables('Hi {{firstName}}!', { firstName: 'Ada' }, raw), 'Hi Ada!');
  t.is(substituteVariables('{{a}}{{b}}', { a: '1', b: '2' }, raw), '12');
  t.is(substituteVariables('no placeholders here', { a: '1' }, raw), 'no placeholders here');
});

test('spaces inside the braces', (t) => {
  t.is(substituteVariables('Hi {{ firstName }}!', { firstName: 'Ada' }, raw), 'Hi Ada!');
  t.is(substituteVariables('Hi {{  firstName,  fallback = my friend }}!', {}, raw), 'Hi my friend!');
});

test('fallbacks, including spaces', (t) => {
  t.is(substituteVariables('Hi {{firstName,fallback=there}}', {}, raw), 'Hi there');
  t.is(substituteVariables('Hi {{firstName,fallback=my dear friend}}', {}, raw), 'Hi my dear friend');
  t.is(substituteVariables('Hi {{firstName,fallback=there}}', { firstName: 'Ada' }, raw), 'Hi Ada');
  t.is(substituteVariables('Hi {{firstName,fallback=there}}', { firstName: '' }, raw), 'Hi there', 'empty counts as missing');
  t.is(substituteVariables('Hi {{firstName,fallback=}}', {}, raw), 'Hi ');
});

test('missing values become empty strings', (t) => {
  t.is(substituteVariables('[{{missing}}]', {}, raw), '[]');
  t.is(substituteVariables('[{{missing}}]', { missing: undefined }, raw), '[]');
  t.is(substituteVariables('[{{missing}}]', { missing: '' }, raw), '[]');
});

test('escaping on: values and fallbacks are HTML-escaped', (t) => {
  t.is(substituteVariables('<p>{{name}}</p>', { name: '<script>alert("x")</script> & \'y\'' }, html), '<p>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;</p>');
  t.is(substituteVariables('<p>{{name,fallback=<b>bold</b>}}</p>', {}, html), '<p>&lt;b&gt;bold&lt;/b&gt;</p>');
  t.is(substituteVariables('<a href="{{url}}">x</a>', { url: 'https://a.example/?q=1&r="2"' }, html), '<a href="https://a.example/?q=1&amp;r=&quot;2&quot;">x</a>');
});

test('escaping on: fallbacks already escaped by the renderer are not double-escaped', (t) => {
  t.is(substituteVariables('{{company,fallback=Tom &amp; Jerry}}', {}, html), 'Tom &amp; Jerry');
  t.is(substituteVariables('{{q,fallback=&quot;hi&quot; &#39;x&#39; &#x3C;}}', {}, html), '&quot;hi&quot; &#39;x&#39; &lt;');
});

test('escaping off: values and fallbacks are inserted raw (subjects, text bodies)', (t) => {
  t.is(substituteVariables('Re: {{topic}}', { topic: 'Q&A <live>' }, raw), 'Re: Q&A <live>');
  t.is(substituteVariables('{{x,fallback=Tom & Jerry}}', {}, raw), 'Tom & Jerry');
});

test('dotted names look up the full name, then the last segment', (t) => {
  t.is(substituteVariables('{{contact.firstName}}', { 'contact.firstName': 'Full', firstName: 'Short' }, raw), 'Full');
  t.is(substituteVariables('{{contact.firstName}}', { firstName: 'Short' }, raw), 'Short');
  t.is(substituteVariables('{{contact.firstName,fallback=there}}', {}, raw), 'there');
  t.is(substituteVariables('{{order.total}}', { 'order.total': '$5' }, raw), '$5');
});

test("names are matched with case ignored when no name matches exactly (useSend's reading)", (t) => {
  t.is(substituteVariables('{{FIRSTNAME}} {{firstname}} {{Contact.FirstName}}', { firstName: 'Ada' }, raw), 'Ada Ada Ada');
  t.is(substituteVariables('{{Plan}}', { plan: 'free', Plan: 'pro' }, raw), 'pro', 'the exact name wins');
  t.is(substituteVariables('{{CONSTRUCTOR}}{{__PROTO__}}', {}, raw), '', 'own names only');
});

test('values are inserted once, never re-scanned for placeholders', (t) => {
  t.is(substituteVariables('{{a}} {{b}}', { a: '{{b}}', b: 'B' }, raw), '{{b}} B');
});

test('only own properties are read', (t) => {
  t.is(substituteVariables('[{{constructor}}][{{__proto__}}][{{toString}}][{{a.hasOwnProperty}}]', {}, raw), '[][][][]');
});

test('malformed placeholders stay literal', (t) => {
  for (const input of ['{{}}', '{{ }}', '{{first name}}', '{{a-b}}', '{{a,fb=x}}', '{{a fallback=x}}', '{{a,fallback}}', 'open {{a', 'a}} close', '{ {a} }', '{{a,fallbackx=1}}']) {
    t.is(substituteVariables(input, { a: 'A', 'first name': 'X', 'a-b': 'X' }, raw), input, input);
  }
});

test('extra braces around a placeholder', (t) => {
  t.is(substituteVariables('{{{a}}}', { a: 'A' }, raw), '{A}');
  t.is(substituteVariables('{{{{a}}', { a: 'A' }, raw), '{{A');
});

test('listVariables: distinct names in order of first use', (t) => {
  t.deepEqual(listVariables('{{b}} {{ a }} {{b,fallback=x}} {{contact.firstName}} {{bad name}} {{}}'), ['b', 'a', 'contact.firstName']);
  t.deepEqual(listVariables('nothing'), []);
});

test('formatPlaceholder and readPlaceholderAt', (t) => {
  t.is(formatPlaceholder('firstName'), '{{firstName}}');
  t.is(formatPlaceholder('firstName', 'there'), '{{firstName,fallback=there}}');
  t.is(formatPlaceholder('firstName', ''), '{{firstName}}');
  t.deepEqual(readPlaceholderAt('{{ url , fallback=https://x }}/p', 0), { name: 'url', fallback: 'https://x', start: 0, end: 30 });
  t.is(readPlaceholderAt('x{{url}}', 0), undefined);
});

test('adversarial input of a million characters is read in one pass (a quadratic scan would not end within the timeout)', (t) => {
  // Not a speed check: linear work on these takes well under a second on any machine, where a
  // scan that backtracks over the input (10^12 steps) would run for hours. The timeout is the guard.
  t.timeout(60_000);
  const n = 200_000;
  const inputs = [
    '{{'.repeat(n),
    '{{'.repeat(n) + '}}',
    '{{a'.repeat(n) + '}}',
    '{{ '.repeat(n) + '}}',
    '{{a,'.repeat(n) + '}}',
    '{{a,fallback'.repeat(n) + '}}',
    '{{a,fallback='.repeat(n) + '}}',
    '{'.repeat(n) + '}'.repeat(n),
    '{{a}}'.repeat(n),
    'x'.repeat(n * 5),
    ' '.repeat(n) + '{{' + ' '.repeat(n),
  ];
  for (const input of inputs) {
    const out = substituteVariables(input, { a: 'A' }, html);
    t.true(out.length > 0);
    t.true(Array.isArray(listVariables(input)));
  }
  t.is(substituteVariables('{{a}}'.repeat(n), { a: 'A' }, html), 'A'.repeat(n));
  t.deepEqual(listVariables('{{a}}'.repeat(n)), ['a']);
});

test('many placeholders named in another case than many variables are substituted in linear time', (t) => {
  // Each such placeholder searched every variable's key (lowercasing each): 200 000 of them over
  // 50 000 variables, well within a 40 MB API body, would hold the only thread for hours.
  const values: Record<string, string> = {};
  for (let i = 0; i < 50_000; i++) values[`name_${i}`] = `v${i}`;
  values.Dup = 'first';
  values.DUP = 'second';
  const html = Array.from({ length: 200_000 }, (_, i) => `{{NAME_${i % 50_000}}}`).join(' ') + ' {{dup}} {{contact.Name_7}} {{missing,fallback=x}}';
  const out = substituteVariables(html, values, { escapeHtml: true }).split(' ');
  t.is(out.length, 200_003);
  t.is(out[0], 'v0');
  t.is(out[199_999], 'v49999');
  t.deepEqual(out.slice(-3), ['first', 'v7', 'x']);
});
