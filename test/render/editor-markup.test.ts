import test from 'ava';
import { parseEditorDocument } from '../../src/render/editor-document.js';
import { renderEditorHtml } from '../../src/render/editor-html-renderer.js';
import { documentToMarkup, markupToDocument } from '../../src/render/editor-markup.js';
import { DEFAULT_TEMPLATES } from '../../src/core/templates/default-templates.js';

// The console's text markup for editor documents: what it builds, that the renderer accepts
// it, and that documents written in it come back as the same text.

const SAMPLE = `# Hello {{firstName,fallback=there}}

Thanks for **joining**, *really*.
See [the guide](https://example.com/guide) \\*now\\*.

- one
- two with {{plan}}

3. third
4. fourth

---

[[Get started]](https://example.com/start)`;

test('markup becomes an editor document the renderer accepts', (t) => {
  const doc = markupToDocument(SAMPLE);
  t.deepEqual(doc.content.map((b) => b.type), ['heading', 'paragraph', 'bulletList', 'orderedList', 'horizontalRule', 'button']);
  const html = renderEditorHtml(parseEditorDocument(JSON.stringify(doc)));
  t.regex(html, /<h1[^>]*>Hello \{\{firstName,fallback=there\}\}<\/h1>/);
  t.regex(html, /<strong[^>]*>joining<\/strong>/);
  t.regex(html, /<em[^>]*>really<\/em>/);
  t.regex(html, /<a href="https:\/\/example\.com\/guide"[^>]*>the guide<\/a>/);
  t.regex(html, /\*now\*/);
  t.regex(html, /<br ?\/?>/); // the single line break stays one
  t.regex(html, /<ol[^>]* start="3"/);
  t.regex(html, /Get started/);
});

test('a document written in markup comes back as the same markup; others are left to JSON', (t) => {
  t.is(documentToMarkup(markupToDocument(SAMPLE)), SAMPLE);
  // Text that looks like markup stays text across the round trip.
  const tricky = markupToDocument('Price is 5 \\* 3 and \\[not a link\\](x) \\{{not a variable}}');
  t.deepEqual(tricky.content[0], { type: 'paragraph', content: [{ type: 'text', text: 'Price is 5 * 3 and [not a link](x) {{not a variable}}' }] });
  t.deepEqual(markupToDocument(documentToMarkup(tricky)!), tricky);
  // The starter templates use spacers and styling markup cannot express.
  const welcome = DEFAULT_TEMPLATES.find((d) => d.name === 'Welcome')!;
  t.is(documentToMarkup(parseEditorDocument(welcome.content)), null);
  t.is(documentToMarkup(markupToDocument('')), '');
});

test('hostile markup stays text: no HTML passes through, javascript: links are the renderer\'s to refuse', (t) => {
  const doc = markupToDocument('<script>alert(1)</script> [x](javascript:alert(1))');
  const html = renderEditorHtml(parseEditorDocument(JSON.stringify(doc)));
  t.false(html.includes('<script>'));
  t.false(html.includes('href="javascript:'));
});
