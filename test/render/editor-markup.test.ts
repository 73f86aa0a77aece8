import test from 'ava';
import fc from 'fast-check';
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

/** The link syntax as one regex, tried at a position: what the markup's links must read, exactly. */
function linkByRegex(line: string, i: number): { text: string; href: string } | null {
  const m = /^\[([^\]]+)\]\((\S+?)\)/.exec(line.slice(i));
  return m ? { text: m[1]!, href: m[2]! } : null;
}

test('links read as the regex reads them, whatever brackets, parentheses and spaces surround them', (t) => {
  fc.assert(
    fc.property(fc.string({ unit: fc.constantFrom('[', ']', '(', ')', 'a', ' ', '\t', '*', '\\'), maxLength: 40 }), (middle) => {
      // Letters at both ends: no heading, list or button line, and no trailing space trimmed.
      const line = `a${middle}a`;
      // Walk the line as inline() does: an escape takes two characters, a link its whole length.
      const expected: { text: string; href: string }[] = [];
      for (let i = 0; i < line.length; ) {
        if (line[i] === '\\' && i + 1 < line.length && '\\*[]{}'.includes(line[i + 1]!)) i += 2;
        else if (line[i] === '[') {
          const m = linkByRegex(line, i);
          if (m) {
            expected.push(m);
            i += `[${m.text}](${m.href})`.length;
          } else i += 1;
        } else i += 1;
      }
      const doc = markupToDocument(line);
      const found = (doc.content.flatMap((b) => ('content' in b && b.type === 'paragraph' ? (b.content ?? []) : [])) as { type: string; text?: string; marks?: { type: string; attrs?: { href: string } }[] }[])
        .filter((n) => n.marks?.some((m) => m.type === 'link'))
        .map((n) => ({ text: n.text!, href: n.marks!.find((m) => m.type === 'link')!.attrs!.href }));
      t.deepEqual(found, expected, JSON.stringify(line));
    }),
    { numRuns: 2000 },
  );
});

test('a 2 MB line of unclosed brackets or link openings is read (a form the size the console takes), with its text kept', (t) => {
  // Read quadratically, 100 KB of these took over ten seconds and 2 MB would take hours: the
  // test's timeout is the check, not a clock in the test.
  for (const unit of ['[', '[a](', '[[', '[a](b']) {
    const line = unit.repeat(Math.floor((2 * 1024 * 1024) / unit.length));
    const doc = markupToDocument(line);
    t.is(doc.content.length, 1);
    const text = (doc.content[0] as { content?: { text?: string }[] }).content?.map((n) => n.text ?? '').join('') ?? '';
    t.is(text.length, line.length, JSON.stringify(unit));
  }
});

test('a 2 MB line of button openings is read as one paragraph, and a button after such text still is one', (t) => {
  // The button pattern tried every ']](' and scanned to the line's end from each: minutes for
  // this line. The test's timeout is the check.
  const line = '[[' + 'a]]('.repeat(512 * 1024);
  const doc = markupToDocument(line);
  t.is(doc.content.length, 1);
  t.is(doc.content[0]!.type, 'paragraph');
  t.deepEqual(markupToDocument(`${line}x)`).content, [{ type: 'button', attrs: { text: 'a', url: `${'a]]('.repeat(512 * 1024 - 1)}x` } }]);
  t.deepEqual(markupToDocument('[[Go ]](x]](https://example.com/a)').content, [{ type: 'button', attrs: { text: 'Go ', url: 'x]](https://example.com/a' } }]);
});
