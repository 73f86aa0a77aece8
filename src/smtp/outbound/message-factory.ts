import type { DomainRecord } from '../../core/domains/domain-service.js';
import type { EmailBody, EmailHead } from '../../core/deliveries/delivery-service.js';
import { HTML_TO_TEXT_MAX_CHARS } from '../../render/html-to-plain-text.js';
import type { DkimSigner } from './dkim-signer.js';

/** Rewrites the HTML of one email before it is composed (open pixel, click links). */
export type HtmlTransform = (html: string, email: EmailHead, domain: DomainRecord) => Promise<string> | string;

export interface MessageFactory {
  /** The signed RFC 5322 message for an email: composed once, shared by all its recipients. */
  build(email: EmailHead, body: EmailBody, domain: DomainRecord): Promise<Buffer>;
}

export function createMessageFactory(opts: { signer: DkimSigner; transformHtml?: HtmlTransform }): MessageFactory {
  const list = (json: string | null): string[] => (json ? (JSON.parse(json) as string[]) : []);
  return {
    async build(email, body, domain) {
      let html = body.html_body;
      if (html && opts.transformHtml) html = await opts.transformHtml(html, email, domain);
      // An HTML-only message gets a plain-text alternative (accessibility, text-only clients,
      // spam scoring), made from the HTML as given (the links as written, not tracked) by the
      // composer: in a signing worker, as the conversion is slow. HTML over the bound goes
      // HTML-only without being handed over twice.
      const textFromHtml = body.text_body == null && body.html_body && body.html_body.length <= HTML_TO_TEXT_MAX_CHARS ? body.html_body : null;
      const headers: Record<string, string> = {
        ...(email.headers_json ? (JSON.parse(email.headers_json) as Record<string, string>) : {}),
        'X-Posthorn-Email-ID': email.id,
      };
      return opts.signer.composeAndSign({
        from: email.from_addr,
        to: list(email.to_json),
        cc: list(email.cc_json),
        replyTo: list(email.reply_to_json),
        subject: email.subject,
        text: body.text_body,
        textFromHtml,
        html,
        headers,
        attachments: body.attachments_json ? (JSON.parse(body.attachments_json) as { filename: string; content: string }[]) : [],
        messageId: email.message_id,
        // A scheduled send is dated when it was due to go out, not when it was accepted days
        // before (Date is "when the message was ready for delivery", RFC 5322 §3.6.1).
        date: dateOf(email),
        inReplyTo: email.in_reply_to,
        references: email.references_json ? (JSON.parse(email.references_json) as string[]) : undefined,
      }, { domain: domain.name, selector: domain.dkimSelector, privateKey: domain.dkimPrivateKey });
    },
  };
}

function dateOf(email: EmailHead): Date {
  const created = Date.parse(email.created_at);
  const scheduled = email.scheduled_at ? Date.parse(email.scheduled_at) : NaN;
  return new Date(Number.isFinite(scheduled) && scheduled > created ? scheduled : created);
}
