import type { ApiFixtures, RouteExample } from './api-examples.js';

/** A valid request for each operator route (/admin/v1), the starting point of the fuzz mutations. */
export function adminExamples(fixtures: ApiFixtures): Map<string, RouteExample> {
  const teamId = String(1);
  return new Map<string, RouteExample>([
    ['GET /queue', { params: {} }],
    ['GET /queue/messages', { params: {}, query: { destination: 'example.net', state: 'ready', limit: '10' } }],
    ['GET /queue/suspensions', { params: {} }],
    ['POST /queue/suspensions', { params: {}, body: { destination: 'fuzz.example', minutes: 1, reason: 'fuzz' } }],
    ['DELETE /queue/suspensions/:suspensionId', { params: { suspensionId: 'su_fuzz000000000000000' } }],
    ['DELETE /queue/shaping-holds/:holdId', { params: { holdId: 'sh_fuzz000000000000000' } }],
    ['POST /queue/retry', { params: {}, body: { destination: 'fuzz.example' } }],
    ['POST /queue/bounce', { params: {}, body: { destination: 'fuzz.example', reason: 'fuzz' } }],
    ['GET /emails/:emailId/trace', { params: { emailId: 'em_fuzz00000000000000000' } }],
    ['GET /teams', { params: {} }],
    ['POST /teams', { params: {}, body: { name: 'Fuzz team', rateLimit: 5 } }],
    ['PATCH /teams/:teamId', { params: { teamId }, body: { name: `Team of ${fixtures.domain.name}` } }],
    ['PATCH /domains/:domainId', { params: { domainId: String(fixtures.domain.id) }, body: { pool: 'default' } }],
    ['GET /audit', { params: {}, query: { limit: '5' } }],
    ['GET /health', { params: {} }],
    ['GET /openapi.json', { params: {} }],
  ]);
}
