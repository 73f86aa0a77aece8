import type { RouteDef } from '../api/route-types.js';
import { analyticsRoutes } from '../api/routes/analytics-routes.js';
import { apiKeysRoutes } from '../api/routes/api-keys-routes.js';
import { campaignsRoutes } from '../api/routes/campaigns-routes.js';
import { contactBooksRoutes } from '../api/routes/contact-books-routes.js';
import { contactsRoutes } from '../api/routes/contacts-routes.js';
import { domainsRoutes } from '../api/routes/domains-routes.js';
import { emailsRoutes } from '../api/routes/emails-routes.js';
import { receivedEmailsRoutes } from '../api/routes/received-emails-routes.js';
import { sandboxRoutes } from '../api/routes/sandbox-routes.js';
import { segmentsRoutes } from '../api/routes/segments-routes.js';
import { suppressionsRoutes } from '../api/routes/suppressions-routes.js';
import { templatesRoutes } from '../api/routes/templates-routes.js';
import { tlsReportsRoutes } from '../api/routes/tls-reports-routes.js';
import { webhooksRoutes } from '../api/routes/webhooks-routes.js';
import { openApiRoute } from '../api/openapi-document.js';

/** The services the public API's routes are built on. */
export interface ApiRouteServices {
  apiKeys: Parameters<typeof apiKeysRoutes>[0];
  domains: Parameters<typeof domainsRoutes>[0];
  emails: Parameters<typeof emailsRoutes>[0];
  templates: Parameters<typeof templatesRoutes>[0];
  campaigns: Parameters<typeof campaignsRoutes>[0];
  contactBooks: Parameters<typeof contactBooksRoutes>[0];
  contacts: Parameters<typeof contactsRoutes>[0];
  segments: Parameters<typeof segmentsRoutes>[0];
  suppressions: Parameters<typeof suppressionsRoutes>[0];
  received: Parameters<typeof receivedEmailsRoutes>[0];
  webhooks: Parameters<typeof webhooksRoutes>[0];
  analytics: Parameters<typeof analyticsRoutes>[0];
  sandbox: Parameters<typeof sandboxRoutes>[0];
  receivedTlsReports: Parameters<typeof tlsReportsRoutes>[0];
}

/** Every route of the public API (/v1 and /api/v1), and the OpenAPI document that describes them and itself. */
export function publicApiRoutes(s: ApiRouteServices): RouteDef[] {
  const routes: RouteDef[] = [
    ...apiKeysRoutes(s.apiKeys),
    ...domainsRoutes(s.domains),
    ...emailsRoutes(s.emails),
    ...templatesRoutes(s.templates),
    ...campaignsRoutes(s.campaigns),
    ...contactBooksRoutes(s.contactBooks),
    ...contactsRoutes(s.contacts),
    ...segmentsRoutes(s.segments),
    ...suppressionsRoutes(s.suppressions),
    ...receivedEmailsRoutes(s.received),
    ...webhooksRoutes(s.webhooks),
    ...analyticsRoutes(s.analytics),
    ...sandboxRoutes(s.sandbox),
    ...tlsReportsRoutes(s.receivedTlsReports),
  ];
  // GET /api/v1/doc is where useSend serves its document: the same one is there too.
  routes.push(...openApiRoute(() => routes, undefined, ['/doc']));
  return routes;
}
