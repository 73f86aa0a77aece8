import type { BlockNode, EditorDoc, InlineNode, Mark } from '../../../src/render/editor-document.js';

export function doc(...content: BlockNode[]): EditorDoc {
  return { type: 'doc', content };
}

export function p(...content: InlineNode[]): BlockNode {
  return { type: 'paragraph', content };
}

export function t(text: string, ...marks: Mark[]): InlineNode {
  return marks.length > 0 ? { type: 'text', text, marks } : { type: 'text', text };
}

/** One of every node and mark, as the editor would store it (null attrs included). */
export const KITCHEN_SINK_JSON = JSON.stringify({
  type: 'doc',
  content: [
    { type: 'logo', attrs: { src: 'https://cdn.example.com/logo.png', alt: 'Acme', size: 'md', alignment: 'center' } },
    { type: 'heading', attrs: { level: 1, textAlign: 'center' }, content: [{ type: 'text', text: 'Hello ' }, { type: 'variable', attrs: { id: 'firstName', fallback: 'there' } }] },
    { type: 'heading', attrs: { level: 2, textAlign: null }, content: [{ type: 'text', text: 'Second level' }] },
    { type: 'heading', attrs: { level: 3 }, content: [{ type: 'text', text: 'Third level' }] },
    {
      type: 'paragraph',
      attrs: { textAlign: 'left' },
      content: [
        { type: 'text', text: 'Bold', marks: [{ type: 'bold' }] },
        { type: 'text', text: ' italic', marks: [{ type: 'italic' }] },
        { type: 'text', text: ' underline', marks: [{ type: 'underline' }] },
        { type: 'text', text: ' strike', marks: [{ type: 'strike' }] },
        { type: 'text', text: ' code', marks: [{ type: 'code' }] },
        { type: 'hardBreak' },
        { type: 'text', text: 'a link', marks: [{ type: 'link', attrs: { href: 'https://example.com/?a=1&b=2', target: '_blank', rel: 'noopener', class: null } }] },
        { type: 'text', text: ' red', marks: [{ type: 'textStyle', attrs: { color: '#dc2626', fontSize: '18px', fontWeight: '700' } }] },
        { type: 'text', text: ' blue', marks: [{ type: 'color', attrs: { color: 'rgb(37, 99, 235)' } }] },
      ],
    },
    { type: 'bulletList', content: [{ type: 'listItem', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'First' }] }] }, { type: 'listItem', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'Second' }] }, { type: 'bulletList', content: [{ type: 'listItem', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'Nested' }] }] }] }] }] },
    { type: 'orderedList', attrs: { start: 1, type: null }, content: [{ type: 'listItem', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'One' }] }] }, { type: 'listItem', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'Two' }] }] }] },
    { type: 'blockquote', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'Quoted words' }] }] },
    { type: 'codeBlock', attrs: { language: 'js' }, content: [{ type: 'text', text: 'const a = 1 < 2;\nconsole.log(a);' }] },
    { type: 'horizontalRule' },
    { type: 'button', attrs: { component: 'button', text: 'Confirm', url: '{{verifyUrl}}', alignment: 'center', borderRadius: '8', buttonColor: 'rgb(0, 0, 0)', textColor: 'rgb(255, 255, 255)', borderColor: 'rgb(0, 0, 0)', borderWidth: '1' } },
    { type: 'spacer', attrs: { height: 'lg' } },
    { type: 'image', attrs: { src: 'https://cdn.example.com/hero.png', alt: 'Hero', title: null, width: '600', height: '300', alignment: 'center', externalLink: 'https://example.com', isUploading: false, borderRadius: '0', borderWidth: '0', borderColor: 'rgb(0, 0, 0)' } },
    { type: 'paragraph' },
    { type: 'unsubscribeFooter', attrs: { component: 'unsubscribeFooter' }, content: [{ type: 'text', text: 'You signed up at example.com.' }] },
  ],
});
