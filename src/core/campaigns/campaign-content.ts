import { parseEditorDocument } from '../../render/editor-document.js';
import { renderEditorHtml } from '../../render/editor-html-renderer.js';
import { renderEditorText } from '../../render/editor-text-renderer.js';
import { plainTextAlternative } from '../../render/html-to-plain-text.js';
import { RenderError } from '../../render/render-error.js';
import { hasUnsubscribePlaceholder } from '../../render/unsubscribe-link.js';
import { substituteVariables } from '../../render/variables.js';
import { badRequest } from '../errors.js';

export const UNSUBSCRIBE_VARIABLE = 'unsubscribeUrl';
// useSend's placeholder names, accepted so campaigns written for it keep their link.
const LEGACY_UNSUBSCRIBE = /\{\{\s*(?:usesend|unsend)_unsubscribe_url\s*\}\}/gi;

/**
 * Renders a campaign body once (from editor content or given HTML); the footer is added when
 * missing. Given HTML has a text only when it can be made (plainTextAlternative: at most
 * HTML_TO_TEXT_MAX_CHARS, on this request's thread, and readable to the converter): null
 * otherwise, and the campaign goes out HTML-only, its footer link in the HTML.
 */
export function renderCampaignBody(input: { content?: string | null; html?: string | null; previewText?: string | null }): { html: string; text: string | null } {
  let html: string;
  let text: string | undefined;
  if (input.content) {
    try {
      const doc = parseEditorDocument(input.content);
      html = renderEditorHtml(doc, { previewText: input.previewText ?? undefined });
      text = renderEditorText(doc);
    } catch (err) {
      if (err instanceof RenderError) throw badRequest(`content: ${err.message}`);
      throw err;
    }
  } else if (input.html) {
    html = input.html;
    text = plainTextAlternative(input.html);
  } else {
    throw badRequest('content or html is required');
  }
  if (text === undefined) return { html: withUnsubscribeLink(html), text: null };
  text = text.replace(LEGACY_UNSUBSCRIBE, '{{unsubscribeUrl}}');
  if (!hasUnsubscribePlaceholder(text)) text = `${text.trimEnd()}\n\n--\nUnsubscribe: {{unsubscribeUrl}}\n`;
  return { html: withUnsubscribeLink(html), text };
}

/**
 * The HTML as sent: useSend's placeholder read as ours, and a footer with the link when there is
 * none. Idempotent. Given HTML is stored as given, so the sender applies it to every body.
 */
export function withUnsubscribeLink(html: string): string {
  html = html.replace(LEGACY_UNSUBSCRIBE, '{{unsubscribeUrl}}');
  if (hasUnsubscribePlaceholder(html)) return html;
  // Every campaign message carries a way out (CAN-SPAM, RFC 8058 context): add a footer.
  const footer =
    '<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0"><tr><td align="center" style="padding:16px;font-family:Arial,sans-serif;font-size:12px;color:#6b7280;">' +
    'You receive this because you subscribed. <a href="{{unsubscribeUrl}}" style="color:#6b7280;text-decoration:underline;">Unsubscribe</a></td></tr></table>';
  return /<\/body>/i.test(html) ? html.replace(/<\/body>/i, `${footer}</body>`) : `${html}${footer}`;
}

/** Personalises subject, HTML and text for one contact. */
export function personalizeCampaign(
  parts: { subject: string; html: string; text: string },
  values: Record<string, string | undefined>,
): { subject: string; html: string; text: string } {
  return {
    subject: substituteVariables(parts.subject, values, { escapeHtml: false }).replace(/\r?\n|\r/g, ' '),
    html: substituteVariables(parts.html, values, { escapeHtml: true }),
    text: substituteVariables(parts.text, values, { escapeHtml: false }),
  };
}
