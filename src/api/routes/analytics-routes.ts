import type { AnalyticsScope, AnalyticsService } from '../../core/analytics/analytics-service.js';
import type { AuthContext } from '../../core/api-keys/api-key-service.js';
import { intChoiceQuery, intIdQuery } from '../params.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { reputationSchema, timeSeriesSchema } from '../schemas/analytics-schemas.js';

function scope(auth: AuthContext): AnalyticsScope {
  return { teamId: auth.teamId, domainId: auth.domainId };
}

export function analyticsRoutes(analytics: AnalyticsService): RouteDef[] {
  const tag = 'Analytics';
  const domainId = intIdQuery('Only this domain.');
  return [
    defineRoute({
      method: 'GET',
      path: '/analytics/email-time-series',
      access: 'full',
      tag,
      summary: 'Daily sent/delivered/opened/clicked/bounced/complained for the last 7 or 30 days, with totals.',
      request: { query: { days: intChoiceQuery([7, 30], 30, 'How many days, ending today.'), domainId } },
      response: timeSeriesSchema,
      errors: [404],
      handler: async ({ auth, input: { query } }) => analytics.timeSeries(scope(auth), { days: query.days, domainId: query.domainId }),
    }),
    defineRoute({
      method: 'GET',
      path: '/analytics/reputation-metrics',
      access: 'full',
      tag,
      summary: 'All-time delivered, hard bounces and complaints, with bounce and complaint rates in percent.',
      request: { query: { domainId } },
      response: reputationSchema,
      errors: [404],
      handler: async ({ auth, input: { query } }) => analytics.reputation(scope(auth), { domainId: query.domainId }),
    }),
  ];
}
