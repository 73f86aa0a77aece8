import type { EditorDoc, InlineNode, Mark } from '../../render/editor-document.js';
import { parseEditorDocument } from '../../render/editor-document.js';
import { renderEditorHtml } from '../../render/editor-html-renderer.js';
import { renderEditorText } from '../../render/editor-text-renderer.js';
import { RenderError } from '../../render/render-error.js';
import { listVariables, substituteVariables } from '../../render/variables.js';
import { badRequest } from '../errors.js';

/*
 * The double opt-in confirmation email (usesend-notes 3.10). A book may bring its own editor
 * document; it must link to {{confirmUrl}} (useSend's {{doubleOptInUrl}} is accepted too, so
 * content written for useSend keeps working). An empty one means this default.
 */

export const DEFAULT_CONFIRMATION_SUBJECT = 'Please confirm your subscription';
export const CONFIRM_URL_VARIABLE = 'confirmUrl';
export const LEGACY_CONFIRM_URL_VARIABLE = 'doubleOptInUrl';

const muted: Mark = { type: 'textStyle', attrs: { color: '#6b7280', fontSize: '13px' } };
const t = (text: string, ...marks: Mark[]): InlineNode => (marks.length ? { type: 'text', text, marks } : { type: 'text', text });
const v = (id: string, fallback?: string): InlineNode => ({ type: 'variable', attrs: fallback === undefined ? { id } : { id, fallback } });

export const DEFAULT_CONFIRMATION_DOCUMENT: EditorDoc = {
  type: 'doc',
  content: [
    { type: 'heading', attrs: { level: 2 }, content: [t('Confirm your subscription')] },
    { type: 'paragraph', content: [t('Hi '), v('firstName', 'there'), t(',')] },
    {
      type: 'paragraph',
      content: [t('Please confirm that you want to receive email from us at '), v('email'), t('. Nothing will be sent until you do.')],
    },
    {
      type: 'button',
      attrs: { text: 'Confirm subscription', url: `{{${CONFIRM_URL_VARIABLE}}}`, alignment: 'left', borderRadius: 6, buttonColor: '#2563eb', textColor: '#ffffff', borderColor: '#2563eb', borderWidth: 0 },
    },
    {
      type: 'paragraph',
      content: [
        t('If the button does not work, copy this link into your browser: ', muted),
        t(`{{${CONFIRM_URL_VARIABLE}}}`, muted, { type: 'link', attrs: { href: `{{${CONFIRM_URL_VARIABLE}}}`, target: '_blank' } }),
      ],
    },
    { type: 'horizontalRule' },
    { type: 'paragraph', content: [t('If you did not ask to subscribe, ignore this email and you will not be added to the list.', muted)] },
  ],
};

export interface ConfirmationTemplate {
  subject: string;
  /** Rendered once per book; placeholders are filled per contact. */
  html: string;
  text: string;
}

function renderDocument(doc: EditorDoc): { html: string; text: string } {
  return { html: renderEditorHtml(doc, { previewText: 'Confirm your subscription' }), text: renderEditorText(doc) };
}

/**
 * Validates stored-to-be content: valid editor JSON whose rendering links to the confirmation
 * URL. Returns the JSON to store, or null for "use the default" (empty input).
 */
export function validateConfirmationContent(content: string | null | undefined, field = 'doubleOptInContent'): string | null {
  if (content === null || content === undefined || content.trim() === '') return null;
  let doc: EditorDoc;
  try {
    doc = parseEditorDocument(content);
  } catch (err) {
    if (err instanceof RenderError) throw badRequest(`${field}: ${err.path ? `${err.path}: ` : ''}${err.message}`);
    throw err;
  }
  const names = listVariables(renderDocument(doc).html);
  if (!names.includes(CONFIRM_URL_VARIABLE) && !names.includes(LEGACY_CONFIRM_URL_VARIABLE)) {
    throw badRequest(`${field}: must contain a link to {{${CONFIRM_URL_VARIABLE}}} (for example a button), or the contact cannot confirm`);
  }
  return content;
}

export function confirmationTemplate(book: { subject: string | null; content: string | null }): ConfirmationTemplate {
  const doc = book.content ? parseEditorDocument(book.content) : DEFAULT_CONFIRMATION_DOCUMENT;
  return { subject: book.subject || DEFAULT_CONFIRMATION_SUBJECT, ...renderDocument(doc) };
}

/** Fills the placeholders for one contact; values in HTML are escaped, the subject and text are not. */
export function personalize(tpl: ConfirmationTemplate, values: Record<string, string>): ConfirmationTemplate {
  return {
    subject: substituteVariables(tpl.subject, values, { escapeHtml: false }).replace(/\r?\n|\r/g, ' '),
    html: substituteVariables(tpl.html, values, { escapeHtml: true }),
    text: substituteVariables(tpl.text, values, { escapeHtml: false }),
  };
}
