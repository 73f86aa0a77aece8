import type { AuthContext } from '../../core/api-keys/api-key-service.js';
import type { ReceivedEmailService, ReceivedScope } from '../../core/received/received-email-service.js';
import { intIdListQuery, pageQueries, stringPath } from '../params.js';
import { pageEnvelope, pageOf } from '../pagination.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { pageEnvelopeSchema } from '../schemas/common-schemas.js';
import { rawMessageSchema, receivedEmailListItemSchema, receivedEmailSchema } from '../schemas/received-email-schemas.js';

function scope(auth: AuthContext): ReceivedScope {
  return { teamId: auth.teamId, domainId: auth.domainId };
}

export function receivedEmailsRoutes(received: ReceivedEmailService): RouteDef[] {
  const tag = 'Received emails';
  const params = { id: stringPath('Received email id.', { min: 3, max: 100 }) };
  return [
    defineRoute({
      method: 'GET',
      path: '/receivedEmails',
      access: 'full',
      tag,
      summary: 'List mail received for receiving domains, newest first.',
      request: { query: { ...pageQueries(), domainId: intIdListQuery('Only mail for these domains (repeat the parameter for several).') } },
      response: pageEnvelopeSchema('receivedEmails', receivedEmailListItemSchema),
      handler: async ({ auth, input: { query } }) => {
        const page = pageOf(query);
        const { items, total } = await received.list(scope(auth), { offset: page.offset, limit: page.limit, domainIds: query.domainId });
        return pageEnvelope('receivedEmails', items, total, page);
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/receivedEmails/:id',
      access: 'full',
      tag,
      summary: 'Get one received email: parsed fields, headers, attachments and SPF/DKIM/DMARC results.',
      request: { params },
      response: receivedEmailSchema,
      errors: [404],
      handler: async ({ auth, input }) => received.get(scope(auth), input.params.id),
    }),
    defineRoute({
      method: 'GET',
      path: '/receivedEmails/:id/raw',
      access: 'full',
      tag,
      summary: 'The received message as stored (message/rfc822, as a download), with our trace fields on top.',
      request: { params },
      // RFC 2046 5.2.1: a whole message is message/rfc822.
      response: rawMessageSchema,
      contentType: 'message/rfc822',
      errors: [404],
      handler: async ({ auth, input, koa }) => {
        const { id, raw } = await received.raw(scope(auth), input.params.id);
        // Someone else's bytes from the API's origin: a download, never a page a browser renders.
        koa.set('Content-Disposition', `attachment; filename="${id.replace(/[^A-Za-z0-9_]/g, '')}.eml"`);
        return raw;
      },
    }),
  ];
}
