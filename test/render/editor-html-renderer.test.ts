import test from 'ava';
import { parseEditorDocument, validateEditorDocument, EMPTY_DOCUMENT } from '../../src/render/editor-document.js';
import { CONTENT_WIDTH, renderEditorFragment, renderEditorHtml } from '../../src/render/editor-html-renderer.js';
import { substituteVariables } from '../../src/render/variables.js';
import { inspectHtml } from './helpers/html-check.js';
import { KITCHEN_SINK_JSON } from './helpers/fixtures.js';

/** Renders block nodes given as raw editor JSON, validating them first like stored content. */
function blocks(...content: unknown[]): string {
  return renderEditorFragment(validateEditorDocument({ type: 'doc', content }));
}

/** Renders one paragraph holding the given inline nodes. */
function inline(...content: unknown[]): string {
  return blocks({ type: 'paragraph', content });
}

function text(value: string, ...marks: unknown[]) {
  return marks.length > 0 ? { type: 'text', text: value, marks } : { type: 'text', text: value };
}

function assertClean(t: import('ava').ExecutionContext, html: string): void {
  const report = inspectHtml(html);
  t.deepEqual(report.problems, [], 'rendered HTML must be well formed and safe');
}

// ---------------------------------------------------------------------------
// One snapshot per node type (plus exact fragments for the essentials).

test('node: paragraph', (t) => {
  const html = blocks(
    { type: 'paragraph', content: [text('Plain & simple <text>')] },
    { type: 'paragraph', attrs: { textAlign: 'center' }, content: [text('Centered')] },
    { type: 'paragraph', attrs: { textAlign: 'right' }, content: [text('Right')] },
    { type: 'paragraph', attrs: { textAlign: 'justify' }, content: [text('Justified')] },
    { type: 'paragraph' },
  );
  t.true(html.includes('>Plain &amp; simple &lt;text&gt;</p>'));
  t.regex(html, /<p style="[^"]*text-align:center[^"]*">Centered<\/p>/);
  t.regex(html, /<p style="[^"]*text-align:right[^"]*">Right<\/p>/);
  t.regex(html, /<p style="[^"]*text-align:justify[^"]*">Justified<\/p>/);
  t.true(html.includes('>&nbsp;</p>'), 'an empty paragraph keeps its line');
  t.snapshot(html);
});

test('node: heading levels 1-3', (t) => {
  const html = blocks(
    { type: 'heading', attrs: { level: 1 }, content: [text('One')] },
    { type: 'heading', attrs: { level: 2, textAlign: 'center' }, content: [text('Two')] },
    { type: 'heading', attrs: { level: 3 }, content: [text('Three')] },
  );
  t.regex(html, /<h1 style="[^"]*font-size:28px[^"]*">One<\/h1>/);
  t.regex(html, /<h2 style="[^"]*text-align:center[^"]*">Two<\/h2>/);
  t.regex(html, /<h3 style="[^"]*font-size:18px[^"]*">Three<\/h3>/);
  t.snapshot(html);
});

test('node: text', (t) => {
  const html = inline(text('just text'));
  t.regex(html, /^<p style="[^"]*">just text<\/p>$/);
  t.snapshot(html);
});

test('node: bulletList and listItem', (t) => {
  const html = blocks({
    type: 'bulletList',
    content: [
      { type: 'listItem', content: [{ type: 'paragraph', content: [text('Apples')] }] },
      {
        type: 'listItem',
        content: [
          { type: 'paragraph', content: [text('Pears')] },
          { type: 'bulletList', content: [{ type: 'listItem', content: [{ type: 'paragraph', content: [text('Nashi')] }] }] },
        ],
      },
    ],
  });
  t.regex(html, /^<ul style="[^"]*list-style-type:disc[^"]*">/);
  t.is(html.match(/<li /g)?.length, 3);
  t.true(html.includes('>Nashi</p></li>'));
  t.snapshot(html);
});

test('node: orderedList with start', (t) => {
  const html = blocks(
    { type: 'orderedList', attrs: { start: 3 }, content: [{ type: 'listItem', content: [{ type: 'paragraph', content: [text('Third')] }] }] },
    { type: 'orderedList', attrs: { start: 1 }, content: [{ type: 'listItem', content: [{ type: 'paragraph', content: [text('First')] }] }] },
  );
  t.regex(html, /<ol start="3" style="[^"]*list-style-type:decimal/);
  t.regex(html, /<ol style="/, 'start=1 is the default and is omitted');
  t.snapshot(html);
});

test('node: blockquote', (t) => {
  const html = blocks({ type: 'blockquote', content: [{ type: 'paragraph', content: [text('Wise words')] }] });
  t.regex(html, /^<blockquote style="[^"]*border-left:4px solid #d1d5db/);
  t.true(html.includes('>Wise words</p>'));
  t.snapshot(html);
});

test('node: codeBlock', (t) => {
  const html = blocks({ type: 'codeBlock', attrs: { language: 'ts' }, content: [text('if (a < b && c) {\n  go();\n}')] });
  t.regex(html, /^<pre style="[^"]*white-space:pre-wrap[^"]*">if \(a &lt; b &amp;&amp; c\) \{\n  go\(\);\n\}<\/pre>$/);
  t.snapshot(html);
});

test('node: horizontalRule', (t) => {
  const html = blocks({ type: 'horizontalRule' });
  t.regex(html, /^<hr style="[^"]*border-top:1px solid #e5e7eb[^"]*">$/);
  t.snapshot(html);
});

test('node: hardBreak', (t) => {
  const html = inline(text('line one'), { type: 'hardBreak' }, text('line two'));
  t.true(html.includes('>line one<br>line two</p>'));
  t.snapshot(html);
});

test('node: button', (t) => {
  const html = blocks(
    { type: 'button', attrs: { text: 'Verify', url: 'https://example.com/verify?a=1&b=2' } },
    {
      type: 'button',
      attrs: {
        text: 'Centered',
        url: '{{verifyUrl}}',
        alignment: 'center',
        borderRadius: '12',
        buttonColor: '#16a34a',
        textColor: 'rgb(255, 255, 255)',
        borderColor: '#14532d',
        borderWidth: 2,
      },
    },
    { type: 'button', attrs: { text: 'Right', url: 'mailto:hi@example.com', textAlign: 'right', borderRadius: 0 } },
  );
  t.true(html.includes('<a href="https://example.com/verify?a=1&amp;b=2" target="_blank" rel="noopener noreferrer"'));
  t.true(html.includes('bgcolor="#16a34a"'));
  t.true(html.includes('border:2px solid #14532d'));
  t.true(html.includes('border-radius:12px'));
  t.true(html.includes('href="{{verifyUrl}}"'));
  t.regex(html, /<td align="right"/);
  t.regex(html, /<table role="presentation" align="center" cellpadding="0"/);
  t.snapshot(html);
});

test('node: image', (t) => {
  const html = blocks(
    { type: 'image', attrs: { src: 'https://cdn.example.com/a.png', alt: 'A chart', width: 300, height: 150, alignment: 'left' } },
    { type: 'image', attrs: { src: 'https://cdn.example.com/wide.png', alt: 'Wide', width: '1200', height: '600' } },
    { type: 'image', attrs: { src: 'https://cdn.example.com/half.png', width: '50%', alignment: 'right' } },
    { type: 'image', attrs: { src: 'https://cdn.example.com/linked.png', alt: 'Shop', externalLink: 'https://shop.example.com', borderRadius: '8', borderWidth: '1', borderColor: '#000000' } },
  );
  t.true(html.includes('<img src="https://cdn.example.com/a.png" alt="A chart" width="300" height="150"'));
  // Wider than the column: Outlook gets a clamped width and proportional height.
  t.true(html.includes(`width="${CONTENT_WIDTH}" height="${CONTENT_WIDTH / 2}"`));
  t.true(html.includes('width="50%"'));
  t.regex(html, /<a href="https:\/\/shop\.example\.com" target="_blank" rel="noopener noreferrer" style="[^"]*"><img src="https:\/\/cdn\.example\.com\/linked\.png"/);
  t.true(html.includes('border:1px solid #000000'));
  t.snapshot(html);
});

test('node: spacer sizes', (t) => {
  const html = blocks(
    { type: 'spacer', attrs: { height: 'sm' } },
    { type: 'spacer', attrs: { height: 'md' } },
    { type: 'spacer', attrs: { height: 'lg' } },
    { type: 'spacer', attrs: { height: 'xl' } },
    { type: 'spacer', attrs: { height: 24 } },
    { type: 'spacer', attrs: { height: '40px' } },
    { type: 'spacer' },
  );
  const heights = [...html.matchAll(/<td height="(\d+)"/g)].map((m) => Number(m[1]));
  t.deepEqual(heights, [8, 16, 32, 64, 24, 40, 16]);
  t.snapshot(html);
});

test('node: variable', (t) => {
  const html = inline(
    text('Hi '),
    { type: 'variable', attrs: { id: 'firstName', fallback: 'there' } },
    text(' / '),
    { type: 'variable', attrs: { id: 'contact.email', fallback: null } },
    text(' / '),
    { type: 'variable', attrs: { id: 'company', fallback: 'Tom & "Jerry"' } },
  );
  t.true(html.includes('Hi {{firstName,fallback=there}} / {{contact.email}} / {{company,fallback=Tom &amp; &quot;Jerry&quot;}}'));
  t.snapshot(html);
});

test('node: logo', (t) => {
  const html = blocks(
    { type: 'logo', attrs: { src: 'https://cdn.example.com/logo.png', size: 'sm' } },
    { type: 'logo', attrs: { src: 'https://cdn.example.com/logo.png', size: 'md', alignment: 'center', alt: 'Acme' } },
    { type: 'logo', attrs: { src: 'https://cdn.example.com/logo.png', size: 'lg', alignment: 'right' } },
  );
  t.true(html.includes('alt="Logo" width="40" height="40"'));
  t.true(html.includes('alt="Acme" width="48" height="48"'));
  t.true(html.includes('width="64" height="64"'));
  t.snapshot(html);
});

test('node: unsubscribeFooter', (t) => {
  const html = blocks(
    { type: 'unsubscribeFooter' },
    { type: 'unsubscribeFooter', content: [text('You subscribed at example.com.')] },
    { type: 'unsubscribeFooter', content: [text('Opt out here', { type: 'link', attrs: { href: '{{unsubscribeUrl}}' } })] },
  );
  t.is(html.match(/href="\{\{unsubscribeUrl\}\}"/g)?.length, 3, 'one link per footer, never a duplicate');
  t.regex(html, /<p style="[^"]*font-size:12px[^"]*text-align:center">You subscribed at example\.com\.<br><a href="\{\{unsubscribeUrl\}\}"/);
  t.snapshot(html);
});

// ---------------------------------------------------------------------------
// One snapshot per mark.

test('mark: bold', (t) => {
  const html = inline(text('strong', { type: 'bold' }));
  t.true(html.includes('<strong>strong</strong>'));
  t.snapshot(html);
});

test('mark: italic', (t) => {
  const html = inline(text('slanted', { type: 'italic' }));
  t.true(html.includes('<em>slanted</em>'));
  t.snapshot(html);
});

test('mark: underline', (t) => {
  const html = inline(text('under', { type: 'underline' }));
  t.true(html.includes('<u>under</u>'));
  t.snapshot(html);
});

test('mark: strike', (t) => {
  const html = inline(text('gone', { type: 'strike' }));
  t.true(html.includes('<s style="text-decoration:line-through">gone</s>'));
  t.snapshot(html);
});

test('mark: code', (t) => {
  const html = inline(text('npm <i>', { type: 'code' }));
  t.regex(html, /<code style="font-family:SFMono-Regular[^"]*">npm &lt;i&gt;<\/code>/);
  t.snapshot(html);
});

test('mark: link', (t) => {
  const html = inline(
    text('site', { type: 'link', attrs: { href: 'https://example.com/a?b=1&c=2', target: '_blank' } }),
    text(' mail', { type: 'link', attrs: { href: 'mailto:team@example.com', target: null } }),
    text(' self', { type: 'link', attrs: { href: 'https://example.com', target: '_self' } }),
    text(' odd target', { type: 'link', attrs: { href: 'https://example.com', target: 'x" onclick="y' } }),
  );
  t.true(html.includes('<a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer" style="color:#2563eb;text-decoration:underline">site</a>'));
  t.true(html.includes('href="mailto:team@example.com" target="_blank"'));
  t.true(html.includes('target="_self"'));
  t.false(html.includes('onclick'));
  t.snapshot(html);
});

test('mark: textStyle', (t) => {
  const html = inline(
    text('styled', { type: 'textStyle', attrs: { color: '#ff0000', fontSize: '20px', fontWeight: 600 } }),
    text(' empty', { type: 'textStyle', attrs: { color: null } }),
  );
  t.true(html.includes('<span style="color:#ff0000;font-size:20px;font-weight:600">styled</span>'));
  t.true(html.includes('</span> empty</p>'), 'a textStyle with nothing set adds no span');
  t.snapshot(html);
});

test('mark: color', (t) => {
  const html = inline(text('tinted', { type: 'color', attrs: { color: 'rgb(22, 163, 74)' } }));
  t.true(html.includes('<span style="color:rgb(22, 163, 74)">tinted</span>'));
  t.snapshot(html);
});

test('marks: combined marks nest deterministically with the link outermost', (t) => {
  const marks = [{ type: 'link', attrs: { href: 'https://example.com' } }, { type: 'bold' }, { type: 'italic' }, { type: 'textStyle', attrs: { color: 'red' } }];
  const a = inline(text('all', ...marks));
  const b = inline(text('all', ...[...marks].reverse()));
  t.is(a, b);
  t.regex(a, /<a href="https:\/\/example\.com"[^>]*><span style="color:red"><em><strong>all<\/strong><\/em><\/span><\/a>/);
  t.snapshot(a);
});

// ---------------------------------------------------------------------------
// The whole document.

test('full document: shell, container, preheader', (t) => {
  const html = renderEditorHtml(parseEditorDocument(KITCHEN_SINK_JSON), { previewText: 'Your week <in> review & more' });
  t.true(html.startsWith('<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">'));
  t.true(html.includes('<meta name="viewport" content="width=device-width, initial-scale=1">'));
  t.regex(html, /<table role="presentation" width="600" align="center"[^>]*style="[^"]*max-width:600px/);
  t.regex(html, /<div style="display:none;[^"]*">Your week &lt;in&gt; review &amp; more/);
  t.false(/<style|<link|<script|url\(|@import/i.test(html));
  t.false(/\son[a-z]+=/i.test(html));
  assertClean(t, html);
  t.snapshot(html);
});

test('full document: no preheader without previewText', (t) => {
  const html = renderEditorHtml(parseEditorDocument(KITCHEN_SINK_JSON));
  t.false(html.includes('display:none'));
  t.is(renderEditorHtml(parseEditorDocument(KITCHEN_SINK_JSON), { previewText: '   ' }), html);
});

test('full document: every element inline-styled, no external resources besides allowed images', (t) => {
  const html = renderEditorHtml(parseEditorDocument(KITCHEN_SINK_JSON), { previewText: 'x' });
  const report = inspectHtml(html);
  t.deepEqual(report.problems, []);
  const names = new Set(report.elements.map((e) => e.name));
  for (const forbidden of ['script', 'link', 'style', 'iframe', 'form', 'object']) t.false(names.has(forbidden), forbidden);
  // Everything visible carries its own style (clients drop inherited CSS unpredictably).
  for (const e of report.elements) {
    if (['p', 'h1', 'h2', 'h3', 'ul', 'ol', 'a', 'img', 'pre', 'blockquote', 'code', 'hr'].includes(e.name)) {
      t.truthy(e.attribs.style, `<${e.name}> has an inline style`);
    }
  }
  const srcs = report.elements.filter((e) => e.attribs.src).map((e) => e.attribs.src);
  t.deepEqual(srcs, ['https://cdn.example.com/logo.png', 'https://cdn.example.com/hero.png']);
});

test('full document: empty document renders a valid shell', (t) => {
  const html = renderEditorHtml(EMPTY_DOCUMENT);
  assertClean(t, html);
  t.true(html.includes('</body>\n</html>'));
});

test('rendering is deterministic', (t) => {
  const d = parseEditorDocument(KITCHEN_SINK_JSON);
  t.is(renderEditorHtml(d, { previewText: 'p' }), renderEditorHtml(d, { previewText: 'p' }));
});

// ---------------------------------------------------------------------------
// Safety.

const HOSTILE_URLS = [
  'javascript:alert(1)',
  'JaVaScRiPt:alert(1)',
  '  javascript:alert(1)',
  'java\tscript:alert(1)',
  'java\nscript:alert(1)',
  'vbscript:msgbox(1)',
  'data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==',
  '/relative/path',
  '//evil.example.com',
  '#top',
  'https\u0000://example.com',
  '{{url,fallback=javascript:alert(1)}}',
  '{{not a placeholder}}',
];

test('javascript: and other non-http links render as plain text', (t) => {
  for (const href of HOSTILE_URLS) {
    const html = inline(text('click me', { type: 'link', attrs: { href } }));
    t.false(html.includes('<a '), `link ${JSON.stringify(href)} is dropped`);
    t.true(html.includes('>click me</p>'), 'its text stays');
  }
});

test('hostile button urls keep the label but lose the link', (t) => {
  for (const url of HOSTILE_URLS) {
    const html = blocks({ type: 'button', attrs: { text: 'Pay', url } });
    t.false(html.includes('href='), JSON.stringify(url));
    t.regex(html, /<span style="[^"]*">Pay<\/span>/);
  }
});

test('hostile image sources drop the image; hostile image links drop the link', (t) => {
  for (const src of [...HOSTILE_URLS, 'mailto:a@example.com']) {
    t.is(blocks({ type: 'image', attrs: { src } }), '', JSON.stringify(src));
    t.is(blocks({ type: 'logo', attrs: { src } }), '', JSON.stringify(src));
  }
  for (const externalLink of HOSTILE_URLS) {
    const html = blocks({ type: 'image', attrs: { src: 'https://cdn.example.com/a.png', externalLink } });
    t.false(html.includes('<a '), JSON.stringify(externalLink));
    t.true(html.includes('<img src="https://cdn.example.com/a.png"'));
  }
});

test('placeholder URLs are allowed, with a vetted fallback', (t) => {
  const ok = inline(
    text('a', { type: 'link', attrs: { href: '{{ profileUrl }}' } }),
    text('b', { type: 'link', attrs: { href: '{{url,fallback=https://example.com/x}}' } }),
    text('c', { type: 'link', attrs: { href: '{{baseUrl}}/settings' } }),
  );
  t.is(ok.match(/<a /g)?.length, 3);
  t.true(ok.includes('href="{{url,fallback=https://example.com/x}}"'));
});

test('CSS values cannot smuggle declarations or external urls', (t) => {
  const html = inline(
    text('x', { type: 'textStyle', attrs: { color: 'red;background:url(https://evil.example/t.gif)', fontSize: '12px;position:fixed', fontWeight: 'bold;x:y' } }),
    text('y', { type: 'color', attrs: { color: 'expression(alert(1))' } }),
  );
  t.false(html.includes('url('));
  t.false(html.includes('expression'));
  t.false(html.includes('<span'));
  const button = blocks({ type: 'button', attrs: { text: 'B', url: 'https://example.com', buttonColor: '#fff;background-image:url(https://evil)', textColor: '"><script>' } });
  t.false(button.includes('evil'));
  t.false(button.includes('<script'));
  assertClean(t, button);
});

test('text and attribute values are escaped', (t) => {
  const html = renderEditorHtml(
    validateEditorDocument({
      type: 'doc',
      content: [
        { type: 'paragraph', content: [text('<script>alert("x")</script> & \'q\'')] },
        { type: 'heading', attrs: { level: 2 }, content: [text('<img src=x onerror=alert(1)>')] },
        { type: 'image', attrs: { src: 'https://cdn.example.com/a.png?x="><script>', alt: '"><script>alert(1)</script>' } },
        { type: 'paragraph', content: [text('link', { type: 'link', attrs: { href: 'https://example.com/"onmouseover="alert(1)' } })] },
        { type: 'button', attrs: { text: '<b>Go</b>', url: 'https://example.com/?q=<x>' } },
        { type: 'codeBlock', content: [text('</pre><script>1</script>')] },
        { type: 'paragraph', content: [{ type: 'variable', attrs: { id: 'name', fallback: '<i>friend</i>' } }] },
      ],
    }),
    { previewText: '</div><script>alert(1)</script>' },
  );
  t.true(html.includes('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39;'));
  t.true(html.includes('&lt;img src=x onerror=alert(1)&gt;'));
  t.true(html.includes('alt="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"'));
  t.true(html.includes('href="https://example.com/&quot;onmouseover=&quot;alert(1)"'));
  t.true(html.includes('&lt;b&gt;Go&lt;/b&gt;'));
  t.true(html.includes('&lt;/pre&gt;&lt;script&gt;1&lt;/script&gt;'));
  t.true(html.includes('{{name,fallback=&lt;i&gt;friend&lt;/i&gt;}}'));
  assertClean(t, html);
});

test('placeholders survive rendering and substitute correctly, escaped once', (t) => {
  const html = inline(
    { type: 'variable', attrs: { id: 'company', fallback: 'Tom & Jerry' } },
    text(' | '),
    { type: 'variable', attrs: { id: 'name' } },
  );
  const filled = substituteVariables(html, { name: '<Ada & co>' }, { escapeHtml: true });
  t.true(filled.includes('>Tom &amp; Jerry | &lt;Ada &amp; co&gt;</p>'));
  assertClean(t, filled);
});

test('renderers tolerate unvalidated documents with unknown nodes and marks', (t) => {
  const weird = {
    type: 'doc',
    content: [{ type: 'mystery' }, { type: 'paragraph', content: [{ type: 'text', text: 'ok', marks: [{ type: 'sparkle' }] }] }],
  } as unknown as import('../../src/render/editor-document.js').EditorDoc;
  const html = renderEditorFragment(weird);
  t.regex(html, /^<p style="[^"]*">ok<\/p>$/);
});
