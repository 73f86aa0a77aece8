import type { AuthContext } from '../../core/api-keys/api-key-service.js';
import type { ReceivedTlsReportScope, ReceivedTlsReportService } from '../../core/tls-reports/received-tls-report-service.js';
import { intIdListQuery, pageQueries, stringPath } from '../params.js';
import { pageEnvelope, pageOf } from '../pagination.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { pageEnvelopeSchema } from '../schemas/common-schemas.js';
import { tlsReportListItemSchema, tlsReportSchema } from '../schemas/tls-report-schemas.js';

function scope(auth: AuthContext): ReceivedTlsReportScope {
  return { teamId: auth.teamId, domainId: auth.domainId };
}

/** TLS reports (RFC 8460) other senders sent about the team's receiving domains. */
export function tlsReportsRoutes(reports: ReceivedTlsReportService): RouteDef[] {
  const tag = 'TLS reports';
  return [
    defineRoute({
      method: 'GET',
      path: '/tlsReports',
      access: 'full',
      tag,
      summary: 'List TLS reports (RFC 8460) received for receiving domains, newest first.',
      request: { query: { ...pageQueries(), domainId: intIdListQuery('Only reports for these domains (repeat the parameter for several).') } },
      response: pageEnvelopeSchema('tlsReports', tlsReportListItemSchema),
      handler: async ({ auth, input: { query } }) => {
        const page = pageOf(query);
        const { items, total } = await reports.list(scope(auth), { offset: page.offset, limit: page.limit, domainIds: query.domainId });
        return pageEnvelope('tlsReports', items, total, page);
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/tlsReports/:id',
      access: 'full',
      tag,
      summary: 'Get one TLS report: per policy, the session counts and the failure details.',
      request: { params: { id: stringPath('TLS report id.', { min: 3, max: 100 }) } },
      response: tlsReportSchema,
      errors: [404],
      handler: async ({ auth, input }) => reports.get(scope(auth), input.params.id),
    }),
  ];
}
