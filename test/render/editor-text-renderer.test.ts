import test from 'ava';
import { parseEditorDocument, validateEditorDocument, EMPTY_DOCUMENT } from '../../src/render/editor-document.js';
import { renderEditorText } from '../../src/render/editor-text-renderer.js';
import { KITCHEN_SINK_JSON } from './helpers/fixtures.js';

function text(...content: unknown[]): string {
  return renderEditorText(validateEditorDocument({ type: 'doc', content }));
}

const p = (...content: unknown[]) => ({ type: 'paragraph', content });
const s = (value: string, ...marks: unknown[]) => (marks.length > 0 ? { type: 'text', text: value, marks } : { type: 'text', text: value });
const li = (...content: unknown[]) => ({ type: 'listItem', content });
const link = (href: string) => ({ type: 'link', attrs: { href } });

test('paragraphs are separated by a blank line; marks other than links add nothing', (t) => {
  t.is(text(p(s('One ', { type: 'bold' }), s('two', { type: 'italic' })), p(s('Three', { type: 'code' }))), 'One two\n\nThree');
});

test('headings are underlined by level', (t) => {
  t.is(
    text(
      { type: 'heading', attrs: { level: 1 }, content: [s('Title')] },
      { type: 'heading', attrs: { level: 2 }, content: [s('Section')] },
      { type: 'heading', attrs: { level: 3 }, content: [s('Small')] },
    ),
    'Title\n=====\n\nSection\n-------\n\nSmall',
  );
});

test('bullet lists use "- " and nest by indentation', (t) => {
  t.is(
    text({
      type: 'bulletList',
      content: [li(p(s('Apples'))), li(p(s('Pears')), { type: 'bulletList', content: [li(p(s('Nashi'))), li(p(s('Conference')))] })],
    }),
    '- Apples\n- Pears\n  - Nashi\n  - Conference',
  );
});

test('ordered lists number from their start', (t) => {
  t.is(text({ type: 'orderedList', content: [li(p(s('a'))), li(p(s('b')))] }), '1. a\n2. b');
  t.is(text({ type: 'orderedList', attrs: { start: 9 }, content: [li(p(s('nine'))), li(p(s('ten')), p(s('more')))] }), '9. nine\n10. ten\n    more');
});

test('links read as "text (url)"', (t) => {
  t.is(text(p(s('Read '), s('the docs', link('https://docs.example.com')), s('.'))), 'Read the docs (https://docs.example.com).');
  t.is(text(p(s('https://example.com', link('https://example.com')))), 'https://example.com', 'no repetition when the text is the url');
  t.is(text(p(s('Email us', link('mailto:hi@example.com')))), 'Email us (mailto:hi@example.com)');
});

test('one link split over several text nodes gets one url', (t) => {
  t.is(text(p(s('click ', link('https://x.example')), s('here', link('https://x.example'), { type: 'bold' }), s(' now'))), 'click here (https://x.example) now');
});

test('unsafe links become plain text', (t) => {
  t.is(text(p(s('bad', link('javascript:alert(1)')))), 'bad');
});

test('buttons read as "text: url"', (t) => {
  t.is(text({ type: 'button', attrs: { text: 'Verify email', url: '{{verifyUrl}}' } }), 'Verify email: {{verifyUrl}}');
  t.is(text({ type: 'button', attrs: { text: 'No link', url: 'javascript:x' } }), 'No link');
  t.is(text({ type: 'button', attrs: { text: '  ', url: 'https://x.example' } }), '');
});

test('horizontal rule, hard break, blockquote and code block', (t) => {
  t.is(
    text(
      p(s('a'), { type: 'hardBreak' }, s('b')),
      { type: 'horizontalRule' },
      { type: 'blockquote', content: [p(s('quoted')), p(s('twice'))] },
      { type: 'codeBlock', content: [s('x = 1\ny = 2')] },
    ),
    'a\nb\n\n---\n\n> quoted\n>\n> twice\n\nx = 1\ny = 2',
  );
});

test('variables stay placeholders', (t) => {
  t.is(
    text(p(s('Hi '), { type: 'variable', attrs: { id: 'firstName', fallback: 'there' } }, s(', your code is '), { type: 'variable', attrs: { id: 'code' } })),
    'Hi {{firstName,fallback=there}}, your code is {{code}}',
  );
});

test('images, logos and spacers: only linked images leave text', (t) => {
  t.is(
    text(
      { type: 'logo', attrs: { src: 'https://a.example/l.png' } },
      p(s('before')),
      { type: 'spacer', attrs: { height: 'xl' } },
      { type: 'image', attrs: { src: 'https://a.example/i.png', alt: 'Plain' } },
      { type: 'image', attrs: { src: 'https://a.example/i.png', alt: 'Spring sale', externalLink: 'https://shop.example' } },
      p(s('after')),
    ),
    'before\n\nSpring sale (https://shop.example)\n\nafter',
  );
});

test('unsubscribe footer ends with the unsubscribe placeholder', (t) => {
  t.is(text({ type: 'unsubscribeFooter' }), 'Unsubscribe: {{unsubscribeUrl}}');
  t.is(text({ type: 'unsubscribeFooter', content: [s('You signed up.')] }), 'You signed up.\nUnsubscribe: {{unsubscribeUrl}}');
  t.is(text({ type: 'unsubscribeFooter', content: [s('Leave', link('{{unsubscribeUrl}}'))] }), 'Leave ({{unsubscribeUrl}})');
});

test('empty paragraphs do not pile up blank lines', (t) => {
  t.is(text(p(s('a')), { type: 'paragraph' }, { type: 'paragraph' }, p(s('b'))), 'a\n\nb');
  t.is(renderEditorText(EMPTY_DOCUMENT), '');
});

test('kitchen sink', (t) => {
  const out = renderEditorText(parseEditorDocument(KITCHEN_SINK_JSON));
  t.false(/<[a-z]/i.test(out), 'no markup');
  t.true(out.includes('a link (https://example.com/?a=1&b=2)'));
  t.true(out.includes('Confirm: {{verifyUrl}}'));
  t.snapshot(out);
});
