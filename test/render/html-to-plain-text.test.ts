import test from 'ava';
import { parseEditorDocument } from '../../src/render/editor-document.js';
import { renderEditorHtml } from '../../src/render/editor-html-renderer.js';
import { HTML_TO_TEXT_MAX_CHARS, htmlToPlainText, plainTextAlternative } from '../../src/render/html-to-plain-text.js';
import { KITCHEN_SINK_JSON } from './helpers/fixtures.js';

test('links are shown as text [url]', (t) => {
  t.is(htmlToPlainText('<p>Read <a href="https://docs.example.com">the docs</a>.</p>'), 'Read the docs [https://docs.example.com].');
});

test('a link whose text is its url is not repeated', (t) => {
  t.is(htmlToPlainText('<p><a href="https://example.com">https://example.com</a></p>'), 'https://example.com');
});

test('images are dropped', (t) => {
  t.is(htmlToPlainText('<p>Before<img src="https://a.example/x.png" alt="Logo">After</p>'), 'BeforeAfter');
  t.is(htmlToPlainText('<a href="https://a.example"><img src="https://a.example/x.png" alt="Banner"></a><p>Text</p>'), 'https://a.example\n\nText', 'a linked image leaves its url');
});

test('wraps at 78 columns', (t) => {
  const words = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
  const out = htmlToPlainText(`<p>${words}</p>`);
  const lines = out.split('\n');
  t.true(lines.length > 1);
  for (const line of lines) t.true(line.length <= 78, line);
  t.is(out.replace(/\n/g, ' '), words);
});

test('headings keep their case so placeholders survive', (t) => {
  t.is(htmlToPlainText('<h1>Hello {{firstName}}</h1><p>Body</p>'), 'Hello {{firstName}}\n\nBody');
});

test('entities are decoded and scripts/styles produce no text', (t) => {
  t.is(htmlToPlainText('<style>p{color:red}</style><script>alert(1)</script><p>Fish &amp; chips &lt;3</p>'), 'Fish & chips <3');
});

test('lists', (t) => {
  t.is(htmlToPlainText('<ul><li>One</li><li>Two</li></ul>'), ' * One\n * Two');
});

test('a data table keeps its rows on lines of their own and its cells apart', (t) => {
  // A receipt sent as HTML alone read "ItemPriceWidget$5Gadget$7" in its text part.
  const receipt = '<p>Your order:</p><table><tr><th>Item</th><th>Price</th></tr><tr><td>Widget</td><td>$5</td></tr><tr><td><b>Gadget</b> x2</td><td>$14</td></tr></table><p>Thanks</p>';
  t.is(htmlToPlainText(receipt), 'Your order:\n\nItem Price\nWidget $5\nGadget x2 $14\n\nThanks');
  // A layout table of one cell per row reads as the blocks inside it, as before.
  t.is(htmlToPlainText('<table><tr><td><p>One</p></td></tr><tr><td><p>Two</p></td></tr></table>'), 'One\n\nTwo');
  // Empty and blank spacer cells leave no spaces behind.
  t.is(htmlToPlainText('<table><tr><td width="20"></td><td>Text</td><td> </td></tr><tr><td>  </td><td> <b>A</b> </td><td>B</td></tr></table>'), 'Text\nA B');
});

test('rendered editor email: preheader skipped, structure kept', (t) => {
  const html = renderEditorHtml(parseEditorDocument(KITCHEN_SINK_JSON), { previewText: 'SECRET PREVIEW' });
  const out = htmlToPlainText(html);
  t.false(out.includes('SECRET PREVIEW'));
  t.false(/\n{3,}/.test(out), 'no runs of blank lines from layout tables');
  t.true(out.startsWith('Hello {{firstName,fallback=there}}'));
  t.true(out.includes('a link [https://example.com/?a=1&b=2]'));
  t.true(out.includes('Confirm [{{verifyUrl}}]'));
  t.true(out.includes('Unsubscribe [{{unsubscribeUrl}}]'));
  t.snapshot(out);
});

test('empty and non-html input', (t) => {
  t.is(htmlToPlainText(''), '');
  t.is(htmlToPlainText('just words'), 'just words');
});

test('plainTextAlternative: HTML up to HTML_TO_TEXT_MAX_CHARS is converted, larger or too deeply nested HTML has none', (t) => {
  const at = `<p>${'a'.repeat(HTML_TO_TEXT_MAX_CHARS - 7)}</p>`;
  t.is(at.length, HTML_TO_TEXT_MAX_CHARS);
  t.truthy(plainTextAlternative(at));
  t.is(plainTextAlternative(`${at} `), undefined);
  t.is(plainTextAlternative(`${'<div>'.repeat(20_000)}deep${'</div>'.repeat(20_000)}`), undefined);
  t.is(plainTextAlternative('<p>Fish &amp; chips</p>'), 'Fish & chips');
});
