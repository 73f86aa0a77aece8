import type { AuthContext } from '../../core/api-keys/api-key-service.js';
import { badRequest } from '../../core/errors.js';
import type { ReceivedEmailService, ReceivedScope } from '../../core/inbound/received-email-service.js';
import { pageEnvelope, parsePage } from '../pagination.js';
import type { RouteDef } from '../route-types.js';
import { parseIntId } from '../validation.js';

function scope(auth: AuthContext): ReceivedScope {
  return { teamId: auth.teamId, domainId: auth.domainId };
}

function domainIds(v: string | string[] | undefined): number[] {
  if (v === undefined || v === '') return [];
  return (Array.isArray(v) ? v : [v]).map((x) => parseIntId(x, 'domainId'));
}

export function receivedEmailsRoutes(received: ReceivedEmailService): RouteDef[] {
  return [
    {
      method: 'GET',
      path: '/receivedEmails',
      access: 'full',
      summary: 'List mail received for receiving domains, newest first.',
      handler: async (req) => {
        const page = parsePage(req.query);
        const { items, total } = await received.list(scope(req.auth), { offset: page.offset, limit: page.limit, domainIds: domainIds(req.query.domainId) });
        return pageEnvelope('receivedEmails', items, total, page);
      },
    },
    {
      method: 'GET',
      path: '/receivedEmails/:id',
      access: 'full',
      summary: 'Get one received email: parsed fields, headers, attachments and SPF/DKIM/DMARC results.',
      handler: async (req) => received.get(scope(req.auth), req.params.id ?? ''),
    },
    {
      method: 'GET',
      path: '/receivedEmails/:id/raw',
      access: 'full',
      summary: 'The received message as stored (message/rfc822), with our trace fields on top.',
      handler: async (req) => {
        const id = req.params.id ?? '';
        if (!id) throw badRequest('id: required');
        const { raw } = await received.raw(scope(req.auth), id);
        // RFC 2046 5.2.1: a whole message is message/rfc822.
        req.koa.type = 'message/rfc822';
        req.koa.set('Content-Disposition', `inline; filename="${id.replace(/[^A-Za-z0-9_]/g, '')}.eml"`);
        req.koa.body = raw;
        return undefined;
      },
    },
  ];
}
