import type Router from '@koa/router';
import { renderContent } from '../../core/templates/template-service.js';
import { AppError } from '../../core/errors.js';
import { parseEditorDocument } from '../../render/editor-document.js';
import { documentToMarkup, markupToDocument } from '../../render/editor-markup.js';
import { route, type PageDeps } from '../console-deps.js';
import type { ConsoleContext } from '../console-context.js';
import { html, type SafeHtml } from '../html.js';
import { select, textarea } from '../layout.js';
import { emailFrameCsp, setPageHeaders } from '../security-headers.js';

// The message editor of templates and campaigns: content is an editor document (JSON), written
// here either in the small text markup of render/editor-markup.ts or as the JSON itself, with
// a preview rendered by core (renderContent) into a sandboxed frame.

const MARKUP_HELP = '# Heading · **bold** · *italic* · [link](https://…) · - list item · [[Button]](https://…) · --- · {{firstName}}';

/** How stored content is shown for editing: as markup when it can be, else as JSON. */
export function editableContent(content: string | null | undefined): { format: 'markup' | 'json'; text: string } {
  if (!content) return { format: 'markup', text: '' };
  try {
    const markup = documentToMarkup(parseEditorDocument(content));
    if (markup !== null) return { format: 'markup', text: markup };
    return { format: 'json', text: JSON.stringify(JSON.parse(content), null, 2) };
  } catch {
    return { format: 'json', text: content };
  }
}

/** The editor document JSON of the form's content field. */
export function contentFromForm(f: URLSearchParams): string {
  const text = f.get('content') ?? '';
  if (f.get('format') === 'json') return text;
  return JSON.stringify(markupToDocument(text));
}

export function contentFields(content: { format: 'markup' | 'json'; text: string }, frameName: string): SafeHtml {
  return html`${select({ name: 'format', label: 'Write the content as', value: content.format, options: [['markup', 'Text with simple formatting'], ['json', 'Editor JSON']] })}
${textarea({ name: 'content', label: 'Content', value: content.text, rows: 14, mono: true, hint: `Text formatting: ${MARKUP_HELP}` })}
<div class="button-row"><button type="submit" class="btn secondary" formaction="/console/content/preview" formtarget="${frameName}">Preview</button></div>`;
}

export function previewFrame(name: string, src: string): SafeHtml {
  return html`<iframe class="email-frame" sandbox name="${name}" title="Preview" src="${src}"></iframe>`;
}

/** Sends rendered HTML (or a message) as a sandboxed frame document. */
export function sendFrame(ctx: ConsoleContext, body: string): void {
  setPageHeaders(ctx, emailFrameCsp(false));
  ctx.type = 'html';
  ctx.body = body;
}

export function contentPreviewRoute(r: Router, _d: PageDeps): void {
  route(r, 'post', '/content/preview', async (ctx) => {
    try {
      sendFrame(ctx, renderContent(contentFromForm(ctx.state.console.form)).html);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      sendFrame(ctx, html`<p>This content cannot be rendered: ${err.message}</p>`.value);
    }
  });
}

