import type Router from '@koa/router';
import type { CampaignService } from '../core/campaigns/campaign-service.js';
import { escapeHtml } from '../render/html-escape.js';

// Unsubscribe pages outside the API. GET only shows a confirmation page: link scanners and
// previewers fetch links, and must never unsubscribe anyone. POST unsubscribes: both the
// page's button and a mail client's RFC 8058 one-click POST ("List-Unsubscribe=One-Click").

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
        ctx.body = page('Invalid link', '<p>This unsubscribe link is not valid. Nothing was changed.</p>');
        return;
      }
      ctx.body = page(
        'Unsubscribe',
        // No action attribute: the form posts back to the page's own address, which keeps the
        // path of a publicUrl such as https://example.com/mail (a root-relative one would lose it).
        `<p>Stop receiving emails like “${escapeHtml(state.subject)}”?</p>
<form method="post"><button type="submit" style="background:#111827;color:#fff;border:0;border-radius:6px;padding:10px 20px;font-size:15px;cursor:pointer;">Unsubscribe</button></form>`,
      );
    });
    router.post('/unsubscribe/:token', async (ctx) => {
      ctx.req.resume(); // the form or one-click body carries nothing we need
      const ok = await campaigns.unsubscribe(ctx.params.token ?? '');
      ctx.type = 'html';
      ctx.status = ok ? 200 : 400;
      ctx.body = ok
        ? page('You are unsubscribed', '<p>You will not receive these emails any more.</p>')
        : page('Invalid link', '<p>This unsubscribe link is not valid. Nothing was changed.</p>');
    });
  };
}
