import test from 'ava';
import { DEFAULT_TEMPLATES } from '../../src/core/templates/default-templates.js';
import { parseEditorDocument, type BlockNode } from '../../src/render/editor-document.js';
import { renderEditorHtml } from '../../src/render/editor-html-renderer.js';
import { renderEditorText } from '../../src/render/editor-text-renderer.js';
import { listVariables, substituteVariables } from '../../src/render/variables.js';
import { inspectHtml } from './helpers/html-check.js';

function types(nodes: BlockNode[]): string[] {
  return nodes.flatMap((n) => [n.type, ...('content' in n && Array.isArray(n.content) ? types(n.content.filter((c): c is BlockNode => 'type' in c && c.type !== 'text' && c.type !== 'hardBreak' && c.type !== 'variable') as BlockNode[]) : [])]);
}

const EXPECTED: Record<string, string[]> = {
  Welcome: ['firstName', 'productName', 'dashboardUrl', 'unsubscribeUrl'],
  'Verify email': ['firstName', 'verifyUrl'],
  'Password reset': ['firstName', 'resetUrl'],
  'Payment receipt': ['amount', 'invoiceUrl'],
  'Product update': ['productName', 'firstName', 'changelogUrl', 'unsubscribeUrl'],
};

test('five starter templates with distinct names', (t) => {
  t.deepEqual(
    DEFAULT_TEMPLATES.map((d) => d.name),
    ['Welcome', 'Verify email', 'Password reset', 'Payment receipt', 'Product update'],
  );
  for (const tpl of DEFAULT_TEMPLATES) {
    t.true(tpl.subject.trim().length > 0);
    t.is(typeof tpl.content, 'string');
  }
});

for (const tpl of DEFAULT_TEMPLATES) {
  test(`${tpl.name}: parses, renders clean HTML and text, lists its variables`, (t) => {
    const doc = parseEditorDocument(tpl.content);
    // Stored content is already normalised: parsing does not change it.
    t.deepEqual(doc, JSON.parse(tpl.content));

    const used = types(doc.content);
    for (const required of ['heading', 'paragraph', 'button', 'spacer', 'horizontalRule']) t.true(used.includes(required), `uses ${required}`);

    const html = renderEditorHtml(doc, { previewText: tpl.subject });
    t.deepEqual(inspectHtml(html).problems, []);

    const text = renderEditorText(doc);
    t.true(text.length > 100);
    t.false(/<[a-z]/i.test(text));

    const vars = listVariables(html);
    for (const name of EXPECTED[tpl.name] ?? []) t.true(vars.includes(name), `${tpl.name} uses {{${name}}}`);
    t.deepEqual(listVariables(text).sort(), [...vars].sort(), 'html and text use the same variables');
    for (const name of listVariables(tpl.subject)) t.true(vars.includes(name), `subject variable ${name} is also used in the body`);

    // Once filled in, no placeholder is left behind, even with no values at all.
    const filled = substituteVariables(html, {}, { escapeHtml: true });
    t.deepEqual(listVariables(filled), []);
    t.deepEqual(inspectHtml(filled).problems.filter((p) => !p.startsWith('disallowed URL')), []);
    t.snapshot(text, `${tpl.name} text`);
  });
}

test('fallbacks make the templates read well without data', (t) => {
  const welcome = DEFAULT_TEMPLATES.find((d) => d.name === 'Welcome')!;
  t.is(substituteVariables(welcome.subject, {}, { escapeHtml: false }), 'Welcome to our app, there!');
  t.is(substituteVariables(welcome.subject, { productName: 'Posthorn', firstName: 'Ada' }, { escapeHtml: false }), 'Welcome to Posthorn, Ada!');
  const text = substituteVariables(renderEditorText(parseEditorDocument(welcome.content)), {}, { escapeHtml: false });
  t.true(text.startsWith('Welcome aboard, there!'));
});
