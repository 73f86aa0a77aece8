import type Router from '@koa/router';
import type { CampaignService } from '../core/campaigns/campaign-service.js';
import { escapeHtml } from '../render/html-escape.js';

// Unsubscribe pages outside the API. GET only shows a confirmation page: link scanners and
// previewers fetch links, and must never unsubscribe anyone. POST unsubscribes: both the
// page's button and a mail client's RFC 8058 one-click POST ("List-Unsubscribe=One-Click").
// The page that says so offers "Subscribe again", a POST with action=resubscribe to the same
// address, for whoever pressed by mistake.

/** Bytes of a POST body read for its action field; the forms and one-click bodies are far smaller. */
const MAX_BODY_BYTES = 1024;

/** Whether the POST is the page's "Subscribe again": a form field, read from at most MAX_BODY_BYTES. */
async function asksToResubscribe(req: NodeJS.ReadableStream): Promise<boolean> {
  let body = '';
  for await (const chunk of req) {
    if (body.length < MAX_BODY_BYTES) body += String(chunk).slice(0, MAX_BODY_BYTES - body.length);
  }
  return new URLSearchParams(body).get('action') === 'resubscribe';
}

const BUTTON_STYLE = 'background:#111827;color:#fff;border:0;border-radius:6px;padding:10px 20px;font-size:15px;cursor:pointer;';
const invalidLink = () => page('Invalid link', '<p>This unsubscribe link is not valid. Nothing was changed.</p>');

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${escapeHtml(title)}</title></head>
<body style="font-family:Arial,Helvetica,sans-serif;background:#f4f4f5;margin:0;padding:40px 16px;"><div style="max-width:440px;margin:0 auto;background:#fff;border-radius:8px;padding:32px;text-align:center;">
<h1 style="font-size:20px;margin:0 0 12px;">${escapeHtml(title)}</h1>${body}</div></body></html>`;
}

export function unsubscribeRoutes(campaigns: CampaignService) {
  return (router: Router) => {
    router.get('/unsubscribe/:token', async (ctx) => {
      const state = await campaigns.unsubscribeState(ctx.params.token ?? '');
      ctx.type = 'html';
      if (!state) {
        ctx.status = 400;
        ctx.body = invalidLink();
        return;
      }
      ctx.body = page(
        'Unsubscribe',
        // No action attribute: the form posts back to the page's own address, which keeps the
        // path of a publicUrl such as https://example.com/mail (a root-relative one would lose it).
        `<p>Stop receiving emails like “${escapeHtml(state.subject)}”?</p>
<form method="post"><button type="submit" style="${BUTTON_STYLE}">Unsubscribe</button></form>`,
      );
    });
    router.post('/unsubscribe/:token', async (ctx) => {
      const token = ctx.params.token ?? '';
      const resubscribe = await asksToResubscribe(ctx.req);
      ctx.type = 'html';
      if (resubscribe) {
        const done = await campaigns.resubscribe(token);
        ctx.status = done === null ? 400 : 200;
        ctx.body =
          done === null
            ? invalidLink()
            : done
              ? page('You are subscribed again', '<p>You will receive these emails again.</p>')
              : page('Nothing was changed', '<p>This address could not be subscribed again here: mail to it bounced or was reported as spam, or it is no longer on the list. Ask the sender to add it again.</p>');
        return;
      }
      const ok = await campaigns.unsubscribe(token);
      ctx.status = ok ? 200 : 400;
      ctx.body = ok
        ? page(
            'You are unsubscribed',
            `<p>You will not receive these emails any more.</p>
<p style="margin-top:24px;color:#555;">Unsubscribed by mistake?</p><form method="post"><input type="hidden" name="action" value="resubscribe"><button type="submit" style="${BUTTON_STYLE}">Subscribe again</button></form>`,
          )
        : invalidLink();
    });
  };
}
