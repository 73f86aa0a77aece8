import test from 'ava';
import { EMPTY_DOCUMENT, parseEditorDocument, validateEditorDocument } from '../../src/render/editor-document.js';
import { RenderError } from '../../src/render/render-error.js';
import { KITCHEN_SINK_JSON } from './helpers/fixtures.js';

function fails(t: import('ava').ExecutionContext, json: string, message: string | RegExp, path: string): void {
  const err = t.throws(() => parseEditorDocument(json), { instanceOf: RenderError });
  if (!err) return;
  if (typeof message === 'string') t.is(err.message, message);
  else t.regex(err.message, message);
  t.is((err as RenderError).path, path);
}

function docJson(...content: unknown[]): string {
  return JSON.stringify({ type: 'doc', content });
}

const para = (...content: unknown[]) => ({ type: 'paragraph', content });

test('parses every node and mark the editor produces', (t) => {
  const doc = parseEditorDocument(KITCHEN_SINK_JSON);
  t.is(doc.type, 'doc');
  t.deepEqual(
    doc.content.map((n) => n.type),
    ['logo', 'heading', 'heading', 'heading', 'paragraph', 'bulletList', 'orderedList', 'blockquote', 'codeBlock', 'horizontalRule', 'button', 'spacer', 'image', 'paragraph', 'unsubscribeFooter'],
  );
});

test('normalises: null attrs and unknown attrs are dropped, aliases resolved', (t) => {
  const doc = parseEditorDocument(
    docJson(
      { type: 'paragraph', attrs: { textAlign: null, id: 'x' }, content: [{ type: 'variable', attrs: { id: null, name: 'firstName', fallback: '' } }] },
      { type: 'heading', attrs: { level: 2, textAlign: null } },
      { type: 'button', attrs: { text: 'Go', url: 'https://example.com', alignment: 'left', textAlign: 'center', component: 'button' } },
      { type: 'paragraph', content: [{ type: 'text', text: 'x', marks: [{ type: 'link', attrs: { href: 'https://a.example', target: null, rel: 'noopener', class: null } }] }] },
    ),
  );
  t.deepEqual(doc.content[0], { type: 'paragraph', content: [{ type: 'variable', attrs: { id: 'firstName' } }] });
  t.deepEqual(doc.content[1], { type: 'heading', attrs: { level: 2 } });
  t.deepEqual(doc.content[2], { type: 'button', attrs: { text: 'Go', url: 'https://example.com', alignment: 'center' } });
  t.deepEqual(doc.content[3], { type: 'paragraph', content: [{ type: 'text', text: 'x', marks: [{ type: 'link', attrs: { href: 'https://a.example' } }] }] });
});

test('heading without level defaults to 1; missing doc content is an empty document', (t) => {
  t.deepEqual(parseEditorDocument(docJson({ type: 'heading' })).content[0], { type: 'heading', attrs: { level: 1 } });
  t.deepEqual(parseEditorDocument('{"type":"doc"}'), { type: 'doc', content: [] });
});

test('EMPTY_DOCUMENT is an empty, frozen doc that round-trips', (t) => {
  t.deepEqual(EMPTY_DOCUMENT, { type: 'doc', content: [] });
  t.true(Object.isFrozen(EMPTY_DOCUMENT));
  t.true(Object.isFrozen(EMPTY_DOCUMENT.content));
  t.deepEqual(parseEditorDocument(JSON.stringify(EMPTY_DOCUMENT)), EMPTY_DOCUMENT);
});

test('RenderError carries name, message and path', (t) => {
  const err = t.throws(() => parseEditorDocument(docJson(para(), { type: 'nope' })));
  t.true(err instanceof RenderError);
  t.true(err instanceof Error);
  t.is(err?.name, 'RenderError');
  t.is((err as RenderError).path, 'content[1]');
});

test('invalid JSON', (t) => {
  fails(t, '{"type":"doc",', /^content is not valid JSON: /, '');
  fails(t, '', /^content is not valid JSON: /, '');
});

test('root must be a doc', (t) => {
  fails(t, '[]', 'the document root must be an object with type "doc", got an array', '');
  fails(t, 'null', 'the document root must be an object with type "doc", got null', '');
  fails(t, '{"type":"paragraph"}', 'the document root must have type "doc", got "paragraph"', '');
  fails(t, '{"content":[]}', 'the document root must have type "doc", got undefined', '');
});

test('unknown node type names the nested path', (t) => {
  fails(
    t,
    docJson(para(), para(), { type: 'blockquote', content: [{ type: 'foo' }] }),
    'unknown node type "foo" at content[2].content[0]',
    'content[2].content[0]',
  );
  fails(t, docJson({ type: 'taskList', content: [] }), 'unknown node type "taskList" at content[0]', 'content[0]');
});

test('nodes in the wrong place', (t) => {
  fails(t, docJson({ type: 'text', text: 'loose' }), 'node type "text" is not allowed inside doc at content[0]', 'content[0]');
  fails(t, docJson(para({ type: 'button', attrs: {} })), 'node type "button" is not allowed inside paragraph at content[0].content[0]', 'content[0].content[0]');
  fails(t, docJson({ type: 'bulletList', content: [para()] }), 'node type "paragraph" is not allowed inside bulletList at content[0].content[0]', 'content[0].content[0]');
  fails(t, docJson({ type: 'listItem', content: [] }), 'node type "listItem" is not allowed inside doc at content[0]', 'content[0]');
  fails(t, docJson({ type: 'codeBlock', content: [{ type: 'hardBreak' }] }), 'node type "hardBreak" is not allowed inside codeBlock at content[0].content[0]', 'content[0].content[0]');
  fails(t, docJson({ type: 'horizontalRule', content: [para()] }), 'horizontalRule cannot have content at content[0].content', 'content[0].content');
});

test('malformed nodes', (t) => {
  fails(t, docJson('paragraph'), 'node must be an object with a string "type" at content[0]', 'content[0]');
  fails(t, docJson({ content: [] }), 'node must be an object with a string "type" at content[0]', 'content[0]');
  fails(t, JSON.stringify({ type: 'doc', content: {} }), 'doc content must be an array, got an object at content', 'content');
  fails(t, docJson(para({ type: 'text' })), 'text node must have a string "text", got undefined at content[0].content[0].text', 'content[0].content[0].text');
  fails(t, docJson(para({ type: 'text', text: 5 })), 'text node must have a string "text", got 5 at content[0].content[0].text', 'content[0].content[0].text');
  fails(t, docJson({ type: 'paragraph', attrs: [] }), 'paragraph attrs must be an object, got an array at content[0].attrs', 'content[0].attrs');
});

test('unknown and malformed marks', (t) => {
  fails(
    t,
    docJson(para({ type: 'text', text: 'x', marks: [{ type: 'bold' }, { type: 'highlight' }] })),
    'unknown mark type "highlight" at content[0].content[0].marks[1]',
    'content[0].content[0].marks[1]',
  );
  fails(t, docJson(para({ type: 'text', text: 'x', marks: 'bold' })), 'marks must be an array at content[0].content[0].marks', 'content[0].content[0].marks');
  fails(t, docJson(para({ type: 'text', text: 'x', marks: [{}] })), 'mark must be an object with a string "type" at content[0].content[0].marks[0]', 'content[0].content[0].marks[0]');
  fails(
    t,
    docJson(para({ type: 'text', text: 'x', marks: [{ type: 'link', attrs: { href: 42 } }] })),
    'invalid link mark attribute "href": expected a string, got 42 at content[0].content[0].marks[0].attrs.href',
    'content[0].content[0].marks[0].attrs.href',
  );
  fails(
    t,
    docJson(para({ type: 'text', text: 'x', marks: [{ type: 'textStyle', attrs: { color: ['red'] } }] })),
    'invalid textStyle mark attribute "color": expected a string, got an array at content[0].content[0].marks[0].attrs.color',
    'content[0].content[0].marks[0].attrs.color',
  );
  fails(
    t,
    docJson(para({ type: 'text', text: 'x', marks: [{ type: 'textStyle', attrs: { fontWeight: true } }] })),
    /^invalid textStyle mark attribute "fontWeight"/,
    'content[0].content[0].marks[0].attrs.fontWeight',
  );
});

test('heading level outside 1-3', (t) => {
  for (const level of [0, 4, 6, 1.5, '2', -1]) {
    fails(
      t,
      docJson({ type: 'heading', attrs: { level } }),
      `invalid heading attribute "level": expected an integer from 1 to 3, got ${typeof level === 'string' ? JSON.stringify(level) : level} at content[0].attrs.level`,
      'content[0].attrs.level',
    );
  }
});

test('wrong attribute types and values', (t) => {
  fails(t, docJson({ type: 'paragraph', attrs: { textAlign: 'middle' } }), 'invalid paragraph attribute "textAlign": expected one of left, center, right, justify, got "middle" at content[0].attrs.textAlign', 'content[0].attrs.textAlign');
  fails(t, docJson({ type: 'orderedList', attrs: { start: 'one' }, content: [] }), /^invalid orderedList attribute "start": expected an integer/, 'content[0].attrs.start');
  fails(t, docJson({ type: 'codeBlock', attrs: { language: 3 } }), /^invalid codeBlock attribute "language": expected a string/, 'content[0].attrs.language');
  fails(t, docJson({ type: 'button', attrs: { text: 'x', url: 'https://a.example', borderRadius: 'round' } }), /^invalid button attribute "borderRadius": expected a non-negative number of pixels, got "round"/, 'content[0].attrs.borderRadius');
  fails(t, docJson({ type: 'button', attrs: { text: 'x', url: 'https://a.example', alignment: 'middle' } }), /^invalid button attribute "alignment": expected one of left, center, right/, 'content[0].attrs.alignment');
  fails(t, docJson({ type: 'button', attrs: { text: 7 } }), /^invalid button attribute "text": expected a string, got 7/, 'content[0].attrs.text');
  fails(t, docJson({ type: 'image', attrs: { src: 'https://a.example/x.png', width: 'wide' } }), /^invalid image attribute "width"/, 'content[0].attrs.width');
  fails(t, docJson({ type: 'image', attrs: { src: 'https://a.example/x.png', width: -5 } }), /^invalid image attribute "width"/, 'content[0].attrs.width');
  fails(t, docJson({ type: 'spacer', attrs: { height: 'huge' } }), /^invalid spacer attribute "height": expected a non-negative number of pixels, got "huge"/, 'content[0].attrs.height');
  fails(t, docJson({ type: 'logo', attrs: { src: 'https://a.example/l.png', size: 'xl' } }), /^invalid logo attribute "size"/, 'content[0].attrs.size');
});

test('accepts the attribute spellings the editor actually stores', (t) => {
  const doc = parseEditorDocument(
    docJson(
      { type: 'button', attrs: { text: 'x', url: '', borderRadius: '4', borderWidth: '1px' } },
      { type: 'button', attrs: { text: 'x', url: '', borderRadius: 8, borderWidth: 0 } },
      { type: 'image', attrs: { src: 'https://a.example/x.png', width: '600', height: 'auto' } },
      { type: 'image', attrs: { src: 'https://a.example/x.png', width: '50%', height: 300 } },
      { type: 'spacer', attrs: { height: 'xl' } },
      { type: 'spacer', attrs: { height: 20 } },
      { type: 'spacer', attrs: { height: '20px' } },
      { type: 'logo', attrs: { src: 'https://a.example/l.png', size: 'lg', textAlign: 'center' } },
    ),
  );
  t.is(doc.content.length, 8);
  t.deepEqual(doc.content[7], { type: 'logo', attrs: { src: 'https://a.example/l.png', size: 'lg', alignment: 'center' } });
});

test('variable names and fallbacks are validated', (t) => {
  fails(t, docJson(para({ type: 'variable', attrs: {} })), /^invalid variable attribute "id": expected a name made of letters/, 'content[0].content[0].attrs.id');
  fails(t, docJson(para({ type: 'variable', attrs: { id: 'first name' } })), /got "first name" at content\[0\]\.content\[0\]\.attrs\.id$/, 'content[0].content[0].attrs.id');
  fails(t, docJson(para({ type: 'variable', attrs: { id: 'x}}<b>' } })), /^invalid variable attribute "id"/, 'content[0].content[0].attrs.id');
  fails(t, docJson(para({ type: 'variable', attrs: { id: 'x', fallback: 'a}}b' } })), 'invalid variable attribute "fallback": it cannot contain "{{" or "}}" at content[0].content[0].attrs.fallback', 'content[0].content[0].attrs.fallback');
  const ok = parseEditorDocument(docJson(para({ type: 'variable', attrs: { id: 'contact.first_name2', fallback: 'my friend' } })));
  t.deepEqual(ok.content[0], { type: 'paragraph', content: [{ type: 'variable', attrs: { id: 'contact.first_name2', fallback: 'my friend' } }] });
});

test('absurdly deep documents are refused, not a stack overflow', (t) => {
  let node: unknown = para({ type: 'text', text: 'deep' });
  for (let i = 0; i < 200; i++) node = { type: 'blockquote', content: [node] };
  const err = t.throws(() => parseEditorDocument(docJson(node)), { instanceOf: RenderError });
  t.regex(err?.message ?? '', /^document is nested too deeply/);
});

test('validateEditorDocument checks an already-decoded value', (t) => {
  t.deepEqual(validateEditorDocument({ type: 'doc', content: [] }), { type: 'doc', content: [] });
  t.throws(() => validateEditorDocument({ type: 'doc', content: [{ type: 'video' }] }), { instanceOf: RenderError, message: 'unknown node type "video" at content[0]' });
});
