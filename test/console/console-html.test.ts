import test from 'ava';
import { html, joinHtml, queryString, trustedHtml } from '../../src/console/html.js';
import { parseMultipart } from '../../src/console/console-http.js';
import { safeNext } from '../../src/console/console-responses.js';

// The console's HTML helper escapes everything it is given; its form reader reads uploads.

test('every interpolated value is escaped, arrays are joined, only console-made markup passes as is', (t) => {
  const evil = `"><script>alert('x')</script>&`;
  t.is(html`<a title="${evil}">${evil}</a>`.value, '<a title="&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;">&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;</a>');
  t.is(html`<ul>${['<a>', html`<li>${'<b>'}</li>`]}</ul>`.value, '<ul>&lt;a&gt;<li>&lt;b&gt;</li></ul>');
  t.is(html`${null}${undefined}${false}${0}`.value, '0');
  t.is(joinHtml(['<x>', trustedHtml('<br>')], ', ').value, '&lt;x&gt;, <br>');
  t.is(queryString({ a: 'x y', b: '', c: undefined, d: ['1', '2'] }), '?a=x+y&d=1&d=2');
});

test('multipart forms: fields and one file, an empty file input, names with paths stripped', (t) => {
  const body = Buffer.from(
    '--XyZ\r\nContent-Disposition: form-data; name="_csrf"\r\n\r\ntok\r\n' +
      '--XyZ\r\nContent-Disposition: form-data; name="file"; filename="C:\\\\Users\\\\me\\\\list.csv"\r\nContent-Type: text/csv\r\n\r\nemail\r\na@example.org\r\n\r\n' +
      '--XyZ--\r\n',
  );
  const form = parseMultipart(body, 'XyZ');
  t.is(form.fields.get('_csrf'), 'tok');
  t.deepEqual(form.file, { name: 'list.csv', text: 'email\r\na@example.org\r\n' });
  const empty = parseMultipart(Buffer.from('--b\r\nContent-Disposition: form-data; name="file"; filename=""\r\n\r\n\r\n--b--\r\n'), 'b');
  t.is(empty.file, undefined);
  t.throws(() => parseMultipart(Buffer.from('--b\r\nContent-Disposition: form-data; name="x"\r\n\r\nno end'), 'b'), { message: /not closed/ });
});

test('an uploaded file is read as UTF-8 (a BOM names UTF-16), and a file in another encoding is refused, never imported as U+FFFD', (t) => {
  const upload = (content: Buffer) =>
    Buffer.concat([Buffer.from('--b\r\nContent-Disposition: form-data; name="file"; filename="list.csv"\r\n\r\n'), content, Buffer.from('\r\n--b--\r\n')]);
  // Excel's "CSV (Comma delimited)" on Windows writes Windows-1252: "Müller" is M, 0xFC, ller.
  const latin = Buffer.from('email,lastName\r\nm@example.org,M\xfcller\r\nn@example.org,N\r\n', 'latin1');
  t.throws(() => parseMultipart(upload(latin), 'b'), { message: /^file: is not UTF-8 text \(line 2\)/ });
  // Excel's "Unicode Text" is UTF-16LE with a BOM (and tabs); UTF-8 with a BOM keeps its BOM for the CSV reader.
  const utf16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('email\tlastName\r\nm@example.org\tMüller\r\n', 'utf16le')]);
  t.is(parseMultipart(upload(utf16), 'b').file?.text, '\uFEFFemail\tlastName\r\nm@example.org\tMüller\r\n');
  const utf16be = Buffer.from('\uFEFFemail\r\n', 'utf16le').swap16();
  t.is(parseMultipart(upload(utf16be), 'b').file?.text, '\uFEFFemail\r\n');
  t.is(parseMultipart(upload(Buffer.from('\uFEFFemail\r\nm@example.org,Müller\r\n')), 'b').file?.text, '\uFEFFemail\r\nm@example.org,Müller\r\n');
});

test('after sign-in only console paths of this site are followed', (t) => {
  t.is(safeNext('/console/emails?x=1'), '/console/emails?x=1');
  for (const bad of ['//evil.example', 'https://evil.example/console', '/\\evil.example', '/consolation', '/console/\\evil', null, undefined]) t.is(safeNext(bad), '/console', String(bad));
});
