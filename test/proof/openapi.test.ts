import { readFileSync } from 'node:fs';
import test from 'ava';
import { operationId } from '../../src/api/openapi-document.js';
import type { RouteDef } from '../../src/api/route-types.js';
import { ManualClock } from '../../src/lib/clock.js';
import { smtpSend } from '../inbound/helpers/smtp-client.js';
import { sampleTlsReport, signedTlsReportMail } from '../helpers/tls-report-mail.js';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { startTestApp, type TestApp, type TestResponse } from '../helpers/test-app.js';
import { startWebhookReceiver, type WebhookReceiver } from '../webhooks/webhook-receiver.js';
import { OpenApiCheck, schemaPaths, unresolvedRefs } from './helpers/openapi-check.js';
import { remoteMessage } from './helpers/inbound-message.js';
import { incompatibilities, requestIncompatibilities, type UsesendShape } from './helpers/usesend-compat.js';

// The machine-readable interface, proven against the running server:
// - GET /v1/openapi.json is served without a key and is OpenAPI 3.1 whose every schema
//   compiles as JSON Schema 2020-12 (ajv, strict, formats on);
// - every route is one operation, every endpoint of the spec and of usesend's document is in it
//   (usesend's with a compatible 200 body, taking every request body and query parameter of theirs);
// - a tour calls every route for real, on a world with a verified domain, an SMTP sink, a
//   webhook receiver and mail received over SMTP, and validates every 200 against the
//   document; then every route is called again with no key, a SENDING key, unknown ids, a
//   body of the wrong type and each query parameter out of range, and each answer must be a
//   documented status with the documented error body.
// The tour fails when a route was not called, so a new route must come with its tour step.
// Fixtures: api-spec.md is a copy of the product spec (keep it in step with the spec);
// usesend-operations.json is the method, path, query parameter names and request and 200-body
// types of each operation of usesend's public OpenAPI document (its source is named inside).

const here = (p: string) => new URL(p, import.meta.url);
/** The test sources' own fixtures (dist/test/proof -> test/proof/fixtures). */
const fixture = (name: string) => readFileSync(here(`../../../test/proof/fixtures/${name}`), 'utf8');

const clock = new ManualClock(Date.UTC(2026, 10, 23, 9, 0, 0));
let w: MailWorld;
let receiver: WebhookReceiver;
let check: OpenApiCheck;
let doc: any;
let sendingKey: string;
/** A second server in sandbox mode, for the capture mailbox's routes (404 everywhere else). */
let sandbox: TestApp;
let sandboxSendingKey: string;

interface Call {
  method: string;
  /** The route path, e.g. '/domains/:id'. */
  route: string;
  params?: Record<string, string | number>;
  query?: string;
  body?: unknown;
  key?: string | null;
  headers?: Record<string, string>;
  prefix?: '/v1' | '/api/v1';
  /** Sent to the sandbox-mode server instead of the mail world's. */
  sandbox?: boolean;
}

/** Successful calls by route, replayed by the error sweep. */
const toured = new Map<string, Call>();
const routeKey = (method: string, route: string) => `${method} ${route}`;

function concrete(c: Call): string {
  const path = c.route.replace(/:([A-Za-z]+)/g, (_, name: string) => {
    const v = c.params?.[name];
    if (v === undefined) throw new Error(`${c.route}: no value for :${name}`);
    return encodeURIComponent(String(v));
  });
  return (c.prefix ?? '/v1') + path + (c.query ? `?${c.query}` : '');
}

async function send(c: Call): Promise<TestResponse> {
  return (c.sandbox ? sandbox : w.t0).request(c.method, concrete(c), { body: c.body, key: c.key, headers: c.headers });
}

/** Calls a route, expects `status`, and validates the answer against the document. */
async function expectStatus(t: { deepEqual(a: unknown, b: unknown, m?: string): void; is(a: unknown, b: unknown, m?: string): void }, c: Call, status: number) {
  const res = await send(c);
  t.is(res.status, status, `${c.method} ${concrete(c)}: ${JSON.stringify(res.body).slice(0, 300)}`);
  t.deepEqual(check.check(c.method, c.route, res), [], `${c.method} ${concrete(c)}`);
  return res;
}

test.before(async () => {
  w = await startMailWorld({ clock, overrides: { webhooks: { allowPrivate: true }, http: { bodyLimitBytes: 256 * 1024 } } });
  receiver = await startWebhookReceiver();
  sendingKey = (await w.t0.app.services.apiKeys.create(w.t0.teamId, { name: 'sending', permission: 'SENDING' })).token;
  sandbox = await startTestApp({ overrides: { sandbox: true } });
  sandboxSendingKey = (await sandbox.app.services.apiKeys.create(sandbox.teamId, { name: 'sending', permission: 'SENDING' })).token;
  const res = await w.t0.request('GET', '/v1/openapi.json', { key: null });
  if (res.status !== 200) throw new Error(`openapi.json: ${res.status}`);
  doc = res.body;
  check = new OpenApiCheck(doc);
});
test.after.always(async () => {
  await sandbox?.close();
  await receiver?.close();
  await w?.close();
});

test.serial('the document is served without a key, is OpenAPI 3.1 and every schema in it compiles', async (t) => {
  // GET /api/v1/doc: where useSend serves its document (and so where its users look).
  for (const path of ['/v1/openapi.json', '/api/v1/openapi.json', '/api/v1/doc']) {
    const res = await w.t0.request('GET', path, { key: null });
    t.is(res.status, 200);
    t.regex(res.headers.get('content-type') ?? '', /^application\/json/);
    // Public: no team, so no rate limit and no rate-limit headers.
    t.is(res.headers.get('x-ratelimit-limit'), null);
    t.deepEqual(res.body, doc);
  }
  t.regex(doc.openapi, /^3\.1\.\d+$/);
  t.is(doc.info.version, '1.0.0', 'spec, Versioning 1');
  t.is(doc.info['x-server-version'], JSON.parse(readFileSync(here('../../../package.json'), 'utf8')).version);
  t.deepEqual(doc.components.securitySchemes.bearerAuth, { type: 'http', scheme: 'bearer', description: doc.components.securitySchemes.bearerAuth.description });
  t.deepEqual(unresolvedRefs(doc), []);
  const compiled = check.compileAll();
  t.true(compiled > 300, `${compiled} schemas`);
  t.log(`${compiled} schemas compiled (parameters, bodies, responses, components)`);
});

test.serial('every route is exactly one operation, with a unique operationId, its parameters and its errors', (t) => {
  const routes: RouteDef[] = w.t0.app.routes;
  const ops = Object.entries<any>(doc.paths).flatMap(([path, item]) => Object.entries<any>(item).map(([method, op]) => ({ path, method, op })));
  t.is(ops.length, routes.length, 'one operation per route, no more');
  const ids = new Set(ops.map((o) => o.op.operationId));
  t.is(ids.size, ops.length, 'operationIds are unique');
  for (const r of routes) {
    const op = check.operation(r.method, r.path);
    t.truthy(op, `${r.method} ${r.path}`);
    if (!op) continue;
    t.is(op.operationId, operationId(r));
    t.is(op.summary, r.summary);
    const pathParams = (op.parameters ?? []).filter((p: any) => p.in === 'path').map((p: any) => p.name);
    t.deepEqual(pathParams, [...r.path.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1]), `${r.method} ${r.path} path parameters`);
    t.true('200' in op.responses);
    if (r.access !== 'public') {
      t.true('401' in op.responses && '429' in op.responses, `${r.method} ${r.path}: 401 and 429`);
      t.is(op.security, undefined, 'authenticated routes use the global bearer requirement');
    } else t.deepEqual(op.security, []);
  }
  t.log(`${ops.length} operations`);
});

test.serial('every endpoint of the spec is in the document', (t) => {
  const spec = fixture('api-spec.md');
  const normal = (p: string) => p.replace(/\{[^}]+\}/g, '{}');
  const endpoints = [...spec.matchAll(/^\| (GET|POST|PUT|PATCH|DELETE) \| (\/v1\/[^ |]+) \|/gm)].map((m) => `${m[1]} ${normal(m[2]!)}`);
  t.true(endpoints.length >= 60, `${endpoints.length} endpoints parsed from the spec`);
  const documented = new Set(Object.entries<any>(doc.paths).flatMap(([path, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${normal(path)}`)));
  t.deepEqual(endpoints.filter((e) => !documented.has(e)), [], 'spec endpoints missing from the document');
  const additions = [...documented].filter((d) => !endpoints.includes(d)).sort();
  t.log(`${endpoints.length} spec endpoints; additions: ${additions.join(', ')}`);
});

test.serial("every operation of usesend's document is in ours, with a compatible 200 body", (t) => {
  const usesend = JSON.parse(fixture('usesend-operations.json')) as { operations: { method: string; path: string; response: UsesendShape | null }[] };
  t.is(usesend.operations.length, 33);
  for (const op of usesend.operations) {
    const ours = doc.paths[op.path]?.[op.method.toLowerCase()];
    t.truthy(ours, `${op.method} ${op.path} is missing`);
    if (!ours) continue;
    const schema = ours.responses['200'].content['application/json'].schema;
    t.deepEqual(incompatibilities(doc, schema, op.response), [], `${op.method} ${op.path}`);
  }
});

test.serial("every request body and query parameter of usesend's document is taken by ours (the usesend-js SDK's calls)", (t) => {
  const usesend = JSON.parse(fixture('usesend-operations.json')) as { operations: { method: string; path: string; query?: string[]; request?: UsesendShape }[] };
  for (const op of usesend.operations) {
    const ours = doc.paths[op.path]?.[op.method.toLowerCase()];
    if (!ours) continue; // reported by the test above
    const names = new Set((ours.parameters ?? []).filter((p: any) => p.in === 'query').map((p: any) => p.name));
    t.deepEqual((op.query ?? []).filter((q) => !names.has(q)), [], `${op.method} ${op.path}: query parameters we lack`);
    if (!op.request) continue;
    const body = ours.requestBody?.content?.['application/json']?.schema;
    t.truthy(body, `${op.method} ${op.path} takes no JSON body`);
    if (body) t.deepEqual(requestIncompatibilities(doc, body, op.request), [], `${op.method} ${op.path} request`);
  }
});

// ---------------------------------------------------------------------------------------
// The tour: every route, for real.

test.serial('tour: every route answers 200 with a body that matches the document', async (t) => {
  const ok = async (c: Call) => {
    const res = await expectStatus(t, c, 200);
    toured.set(routeKey(c.method, c.route), c);
    return res.body;
  };
  const domain = w.domain;
  const from = `Tour <tour@${domain.name}>`;

  await ok({ method: 'GET', route: '/openapi.json', key: null });
  await ok({ method: 'GET', route: '/doc', key: null });

  // API keys
  const key = await ok({ method: 'POST', route: '/apiKeys', body: { name: 'tour', permission: 'SENDING', domainId: domain.id } });
  await ok({ method: 'GET', route: '/apiKeys' });
  await ok({ method: 'DELETE', route: '/apiKeys/:apiKeyId', params: { apiKeyId: key.id } });

  // Domains: a subdomain with a tracking domain (a CNAME record), checked unpublished, deleted.
  const other = await ok({ method: 'POST', route: '/domains', body: { name: 'news.tour-other.dev', region: 'local' } });
  await ok({ method: 'PATCH', route: '/domains/:id', params: { id: other.id }, body: { trackingDomain: 'links', clickTracking: true, openTracking: true, tlsPolicy: 'ENFORCED' } });
  await ok({ method: 'PUT', route: '/domains/:id/verify', params: { id: other.id } });
  const unverified = await ok({ method: 'GET', route: '/domains/:id', params: { id: other.id } });
  t.is(unverified.status, 'PENDING');
  await ok({ method: 'GET', route: '/domains', prefix: '/api/v1' });
  await ok({ method: 'DELETE', route: '/domains/:id', params: { id: other.id } });
  // The sending domain receives mail too (an MX record), for the received-email routes.
  await ok({ method: 'PATCH', route: '/domains/:id', params: { id: domain.id }, body: { receiving: true } });
  await ok({ method: 'PUT', route: '/domains/:id/verify', params: { id: domain.id } });
  await ok({ method: 'GET', route: '/domains/:id', params: { id: domain.id } });

  // Templates: create, edit, publish twice, roll back, duplicate and delete the copy.
  const content = JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'Hello {{name}}' }] }] });
  const tpl = await ok({ method: 'POST', route: '/templates', body: { name: 'Tour', subject: 'Hi {{name}}', content } });
  await ok({ method: 'POST', route: '/templates/:templateId/publish', params: { templateId: tpl.id } });
  await ok({ method: 'PATCH', route: '/templates/:templateId', params: { templateId: tpl.id }, body: { subject: 'Hello {{name}}' } });
  await ok({ method: 'POST', route: '/templates/:templateId/publish', params: { templateId: tpl.id } });
  await ok({ method: 'POST', route: '/templates/:templateId/rollback', params: { templateId: tpl.id }, body: { versionNumber: 1 } });
  await ok({ method: 'GET', route: '/templates/:templateId/versions', params: { templateId: tpl.id } });
  await ok({ method: 'GET', route: '/templates/:templateId', params: { templateId: tpl.id } });
  await ok({ method: 'GET', route: '/templates', query: 'page=1&limit=2&search=Tour' });
  const copy = await ok({ method: 'POST', route: '/templates/:templateId/duplicate', params: { templateId: tpl.id } });
  await ok({ method: 'DELETE', route: '/templates/:templateId', params: { templateId: copy.id } });

  // Emails: plain (idempotent), templated, with everything, a bounce, a batch, a scheduled one.
  w.sink.setBehaviour({ onRcpt: (a) => (a === 'gone@example.net' ? { code: 550, message: '5.1.1 <gone@example.net>: user unknown' } : undefined) });
  const idem = { 'Idempotency-Key': 'tour-1' };
  const first = await ok({ method: 'POST', route: '/emails', headers: idem, body: sendBody(w, { from, tags: ['tour'] }) });
  const replay = await ok({ method: 'POST', route: '/emails', headers: idem, body: sendBody(w, { from, tags: ['tour'] }) });
  t.is(replay.emailId, first.emailId);
  await expectStatus(t, { method: 'POST', route: '/emails', headers: idem, body: sendBody(w, { from, subject: 'other' }) }, 409);
  await ok({ method: 'POST', route: '/emails', body: { from, to: 'templated@example.net', templateId: tpl.id, variables: { name: 'Ada' } } });
  const full = await ok({
    method: 'POST',
    route: '/emails',
    body: sendBody(w, {
      from,
      to: ['alice@example.net', 'bob@example.org'],
      cc: ['carol@example.net', 'cecil@example.org'],
      bcc: ['dave@example.org', 'dora@example.net'],
      replyTo: ['reply@example.net', 'reply2@example.net'],
      html: '<p>Hi <a href="https://example.com/x">there</a></p>',
      headers: { 'X-Tour': 'yes' },
      attachments: [{ filename: 'a.txt', content: Buffer.from('attached').toString('base64') }],
      tags: ['tour', 'full'],
    }),
  });
  const bounced = await ok({ method: 'POST', route: '/emails', body: sendBody(w, { from, to: 'gone@example.net' }) });
  const batch = await ok({ method: 'POST', route: '/emails/batch', body: [sendBody(w, { from, to: 'b1@example.net' }), sendBody(w, { from, to: 'b2@example.org', tags: ['tour'] })] });
  t.is(batch.data.length, 2);
  const later = await ok({ method: 'POST', route: '/emails', body: sendBody(w, { from, scheduledAt: 'tomorrow 9am', cc: 'cc@example.net', openTracking: false, clickTracking: true }) });
  await ok({ method: 'PATCH', route: '/emails/:emailId', params: { emailId: later.emailId }, body: { scheduledAt: new Date(clock.nowMs() + 3 * 86_400_000).toISOString() } });
  await ok({ method: 'GET', route: '/emails', query: 'limit=100' });
  await ok({ method: 'GET', route: '/emails/:emailId', params: { emailId: later.emailId } });
  await ok({ method: 'POST', route: '/emails/:emailId/cancel', params: { emailId: later.emailId } });
  await w.settle();
  await ok({ method: 'GET', route: '/emails', query: `tag=tour&domainId=${domain.id}&startDate=2026-01-01&limit=10&page=1` });
  const delivered = await ok({ method: 'GET', route: '/emails/:emailId', params: { emailId: full.emailId } });
  t.is(delivered.latestStatus, 'DELIVERED');
  const bounce = await ok({ method: 'GET', route: '/emails/:emailId', params: { emailId: bounced.emailId }, key: sendingKey });
  t.is(bounce.latestStatus, 'BOUNCED');
  w.sink.setBehaviour({ onRcpt: undefined });

  // Contact books and contacts.
  const confirmContent = JSON.stringify({ type: 'doc', content: [{ type: 'button', attrs: { text: 'Yes', url: '{{confirmUrl}}' } }] });
  const book = await ok({
    method: 'POST',
    route: '/contactBooks',
    body: { name: 'Tour', emoji: '🧭', properties: { owner: 'tour' }, variables: ['plan'], doubleOptInFrom: from, doubleOptInSubject: 'Confirm', doubleOptInContent: confirmContent },
  });
  const spare = await ok({ method: 'POST', route: '/contactBooks', body: { name: 'Spare' } });
  await ok({ method: 'PATCH', route: '/contactBooks/:contactBookId', params: { contactBookId: book.id }, body: { doubleOptInSubject: 'Please confirm', emoji: '📘' } });
  await ok({ method: 'GET', route: '/contactBooks/:contactBookId', params: { contactBookId: book.id } });
  await ok({ method: 'DELETE', route: '/contactBooks/:contactBookId', params: { contactBookId: spare.id } });
  const bookParams = { contactBookId: book.id };
  const ada = await ok({ method: 'POST', route: '/contactBooks/:contactBookId/contacts', params: bookParams, body: { email: 'ada@example.net', firstName: 'Ada', properties: { plan: 'pro' } } });
  const bulk = await ok({
    method: 'POST',
    route: '/contactBooks/:contactBookId/contacts/bulk',
    params: bookParams,
    body: [{ email: 'b1@example.net', lastName: 'One' }, { email: 'not an address' }, { email: 'b2@example.org', subscribed: false }, { email: 'b3@example.net' }],
  });
  t.is(bulk.errors.length, 1);
  const listed = await ok({ method: 'GET', route: '/contactBooks/:contactBookId/contacts', params: bookParams, query: 'limit=10&page=1' });
  await ok({ method: 'GET', route: '/contactBooks/:contactBookId/contacts', params: bookParams, query: 'emails=ada@example.net,b1@example.net,' });
  await ok({ method: 'GET', route: '/contactBooks', prefix: '/api/v1' });
  const contactParams = { contactBookId: book.id, contactId: ada.contactId };
  await ok({ method: 'PATCH', route: '/contactBooks/:contactBookId/contacts/:contactId', params: contactParams, body: { lastName: 'Lovelace', properties: { plan: 'team' } } });
  await ok({ method: 'PUT', route: '/contactBooks/:contactBookId/contacts/:contactId', params: contactParams, body: { email: 'ada@example.net', subscribed: true } });
  await ok({ method: 'GET', route: '/contactBooks/:contactBookId/contacts/:contactId', params: contactParams });
  const b3 = listed.find((c: any) => c.email === 'b3@example.net');
  const b2 = listed.find((c: any) => c.email === 'b2@example.org');
  const optedOut = await ok({ method: 'GET', route: '/contactBooks/:contactBookId/contacts/:contactId', params: { contactBookId: book.id, contactId: b2.id } });
  t.is(optedOut.unsubscribeReason, 'UNSUBSCRIBED');
  await ok({ method: 'DELETE', route: '/contactBooks/:contactBookId/contacts/:contactId', params: { contactBookId: book.id, contactId: b3.id } });

  // Segments: nested groups, every value type.
  const filters = {
    match: 'all',
    conditions: [
      { field: 'email', op: 'endsWith', value: '@example.net' },
      { match: 'any', conditions: [{ field: 'properties.plan', op: 'exists' }, { field: 'subscribed', op: 'eq', value: true }, { match: 'all', conditions: [{ field: 'email', op: 'in', value: ['ada@example.net', 'b1@example.net'] }] }] },
      { field: 'properties.plan', op: 'gte', value: 1 },
    ],
  };
  const everyone = { match: 'any', conditions: [{ field: 'email', op: 'contains', value: '@' }] };
  const seg = await ok({ method: 'POST', route: '/segments', body: { name: 'Net', contactBookId: book.id, filters: everyone } });
  const segSpare = await ok({ method: 'POST', route: '/segments', body: { name: 'Spare', contactBookId: book.id, filters } });
  await ok({ method: 'PATCH', route: '/segments/:segmentId', params: { segmentId: segSpare.id }, body: { name: 'Spare people', filters } });
  await ok({ method: 'GET', route: '/segments', query: `contactBookId=${book.id}` });
  await ok({ method: 'GET', route: '/segments/:segmentId', params: { segmentId: segSpare.id } });
  const members = await ok({ method: 'GET', route: '/segments/:segmentId/contacts', params: { segmentId: seg.id }, query: 'limit=5' });
  t.true(members.contacts.length >= 2);
  await ok({ method: 'DELETE', route: '/segments/:segmentId', params: { segmentId: segSpare.id } });

  // Campaigns: one sent in batches of 1, paused and resumed on the way; one scheduled and deleted.
  const campaignBody = { name: 'Tour', from, subject: 'News', contactBookId: book.id, content, replyTo: ['reply@example.net'], cc: ['cc1@example.net', 'cc2@example.net'], bcc: 'bcc@example.net', batchSize: 1, openTracking: true, clickTracking: false };
  const draft = await ok({ method: 'POST', route: '/campaigns', body: campaignBody });
  await ok({ method: 'PATCH', route: '/campaigns/:campaignId', params: { campaignId: draft.id }, body: { subject: 'News!', segmentId: seg.id, previewText: 'Preview' } });
  await ok({ method: 'POST', route: '/campaigns/:campaignId/schedule', params: { campaignId: draft.id }, body: { scheduledAt: null } });
  await w.t0.app.runCampaigns();
  await w.settle();
  const running = await ok({ method: 'GET', route: '/campaigns/:campaignId', params: { campaignId: draft.id } });
  t.is(running.status, 'RUNNING');
  await ok({ method: 'POST', route: '/campaigns/:campaignId/pause', params: { campaignId: draft.id } });
  await ok({ method: 'POST', route: '/campaigns/:campaignId/resume', params: { campaignId: draft.id } });
  await ok({ method: 'GET', route: '/campaigns', query: 'status=RUNNING&search=News' });
  const scrap = await ok({ method: 'POST', route: '/campaigns', body: { ...campaignBody, name: 'Scrap', segmentId: seg.id, previewText: 'Soon', scheduledAt: 'tomorrow 9am' } });
  await ok({ method: 'DELETE', route: '/campaigns/:campaignId', params: { campaignId: scrap.id } });
  await ok({ method: 'DELETE', route: '/contactBooks/:contactBookId/contacts/bulk', params: bookParams, body: { contactIds: [b2.id] } });

  // Suppressions.
  await ok({ method: 'POST', route: '/suppressions', body: { email: 'Stop@Example.net', source: 'tour' } });
  await ok({ method: 'POST', route: '/suppressions/bulk', body: { emails: ['s1@example.net', 's2@example.net', 'stop@example.net'], reason: 'COMPLAINT', source: 'tour-bulk' } });
  await ok({ method: 'GET', route: '/suppressions', query: 'search=example&reason=COMPLAINT&limit=5' });
  await ok({ method: 'GET', route: '/suppressions/:email', params: { email: 'gone@example.net' } });
  await ok({ method: 'DELETE', route: '/suppressions/:email', params: { email: 'STOP@example.net' } });
  await ok({ method: 'POST', route: '/suppressions/bulk/remove', body: { emails: ['s1@example.net'] } });

  // Webhooks: an endpoint on the receiver; a test event refused once (a failed attempt with a
  // retry due), another delivered; attempts listed a page at a time. The endpoint listens for
  // events the tour never causes: mail of the earlier steps (a running campaign's batches) may
  // still be delivered now, and its calls would take the receiver's first, refused, reply.
  const hook = await ok({ method: 'POST', route: '/webhooks', body: { url: receiver.url, eventTypes: ['email.complained', 'email.failed'], domainIds: [domain.id] } });
  const spareHook = await ok({ method: 'POST', route: '/webhooks', body: { url: receiver.url, eventTypes: [] } });
  await ok({ method: 'PATCH', route: '/webhooks/:webhookId', params: { webhookId: hook.id }, body: { rotateSecret: true, description: 'tour' } });
  await ok({ method: 'PATCH', route: '/webhooks/:webhookId', params: { webhookId: hook.id }, body: { eventTypes: ['email.complained'] } });
  let testCalls = 0;
  receiver.reply((call) => (call.json?.type === 'webhook.test' && testCalls++ === 0 ? { status: 500, body: 'try later' } : { status: 200, body: 'ok' }));
  await ok({ method: 'POST', route: '/webhooks/:webhookId/test', params: { webhookId: hook.id } });
  await receiver.waitFor(1);
  await w.t0.app.webhookDispatcher.whenIdle();
  await ok({ method: 'POST', route: '/webhooks/:webhookId/test', params: { webhookId: hook.id } });
  await receiver.waitFor(2);
  await w.t0.app.webhookDispatcher.whenIdle();
  const page1 = await ok({ method: 'GET', route: '/webhooks/:webhookId/attempts', params: { webhookId: hook.id }, query: 'limit=1' });
  t.is(page1.attempts.length, 1);
  t.truthy(page1.nextCursor);
  const page2 = await ok({ method: 'GET', route: '/webhooks/:webhookId/attempts', params: { webhookId: hook.id }, query: `limit=1&cursor=${encodeURIComponent(page1.nextCursor)}` });
  t.is(page2.attempts[0].status, 'FAILED');
  await ok({ method: 'GET', route: '/webhooks', query: 'page=1' });
  await ok({ method: 'GET', route: '/webhooks/:webhookId', params: { webhookId: hook.id } });
  await ok({ method: 'DELETE', route: '/webhooks/:webhookId', params: { webhookId: spareHook.id } });

  // Received email: a signed message over SMTP to the receiving domain.
  const message = await remoteMessage(w.zone, 'partner.example.com', `support@${domain.name}`);
  const smtp = await smtpSend({ port: w.t0.app.listeners.inbound!.port, from: 'someone@partner.example.com', to: [`support@${domain.name}`], raw: message, plaintext: true });
  t.true(smtp.ok, smtp.response);
  const inbox = await ok({ method: 'GET', route: '/receivedEmails', query: `domainId=${domain.id}` });
  t.is(inbox.receivedEmails.length, 1);
  const receivedId = inbox.receivedEmails[0].id;
  const got = await ok({ method: 'GET', route: '/receivedEmails/:id', params: { id: receivedId } });
  t.is(got.authResults.dkim.result, 'pass');
  const rawRes = await ok({ method: 'GET', route: '/receivedEmails/:id/raw', params: { id: receivedId } });
  t.regex(String(rawRes), /Subject: Tour inbound/);

  // Sandbox mode: a domain that never verified sends; the capture mailbox has the message.
  const fresh = (await sandbox.request('POST', '/v1/domains', { body: { name: 'tour-sandbox.dev', region: 'local' } })).body;
  const captured = await sandbox.request('POST', '/v1/emails', {
    body: {
      from: `Tour <tour@${fresh.name}>`,
      to: 'reader@example.org',
      cc: 'copy@example.net',
      replyTo: `replies@${fresh.name}`,
      subject: 'Tour sandbox',
      text: 'Plain',
      html: '<p>Rich</p>',
      attachments: [{ filename: 'a.txt', content: Buffer.from('a').toString('base64') }],
    },
  });
  t.is(captured.status, 200, JSON.stringify(captured.body));
  sandbox.app.engine.wake();
  await sandbox.app.engine.whenIdle();
  const mailbox = await ok({ method: 'GET', route: '/sandbox/messages', query: 'page=1&limit=10', sandbox: true });
  t.is(mailbox.total, 2); // one per recipient domain
  const capturedMessage = await ok({ method: 'GET', route: '/sandbox/messages/:id', params: { id: mailbox.messages[0].id }, sandbox: true });
  t.is(capturedMessage.emailId, captured.body.emailId);
  // Outside sandbox mode the same routes are 404, as documented.
  await expectStatus(t, { method: 'GET', route: '/sandbox/messages' }, 404);
  // TLS reports: one mailed by a remote reporter to the receiving domain's TLS-RPT mailbox.
  const tlsTo = `tlsrpt+${domain.id}@${w.t0.config.hostname}`;
  const tlsMail = await smtpSend({ port: w.t0.app.listeners.inbound!.port, from: 'reporter@company-x.example', to: [tlsTo], raw: await signedTlsReportMail(w.zone, tlsTo, sampleTlsReport(domain.name)), plaintext: true });
  t.true(tlsMail.ok, tlsMail.response);
  const tlsReports = await ok({ method: 'GET', route: '/tlsReports', query: `domainId=${domain.id}` });
  t.is(tlsReports.tlsReports.length, 1);
  const tlsReport = await ok({ method: 'GET', route: '/tlsReports/:id', params: { id: tlsReports.tlsReports[0].id } });
  t.is(tlsReport.policies[0].failureDetails.length, 2);

  // Analytics.
  const series = await ok({ method: 'GET', route: '/analytics/email-time-series', query: 'days=7' });
  t.is(series.result.length, 7);
  t.true(series.totalCounts.delivered >= 1);
  await ok({ method: 'GET', route: '/analytics/reputation-metrics', query: `domainId=${domain.id}` });

  t.log(`${toured.size} routes toured`);
});

test.serial('the tour called every route and saw almost every documented field with a value', (t) => {
  const routes: RouteDef[] = w.t0.app.routes;
  const missing = routes.map((r) => routeKey(r.method, r.path)).filter((k) => !toured.has(k));
  t.deepEqual(missing, [], 'routes without a tour step');
  t.is(toured.size, routes.length);
  // A schema can only be as tight as the values it was checked against: count the documented
  // 200 fields the tour saw non-null at least once.
  let declared = 0;
  const unseen: string[] = [];
  for (const r of routes) {
    if (r.path === '/openapi.json') continue;
    const op = check.operation(r.method, r.path);
    const media = Object.values<any>(op.responses['200'].content)[0];
    const seen = check.seen.get(routeKey(r.method, r.path)) ?? new Set();
    for (const p of schemaPaths(doc, media.schema)) {
      declared++;
      if (!seen.has(p)) unseen.push(`${r.method} ${r.path} ${p}`);
    }
  }
  t.log(`${declared - unseen.length} of ${declared} documented 200 fields seen with a value; never: ${unseen.join('; ')}`);
  t.true(unseen.length <= declared * 0.03, `${unseen.length} of ${declared} fields never seen`);
});

// ---------------------------------------------------------------------------------------
// Errors: every route again, wrong in each way it can be, each answer as documented.

/** A well-formed id that names nothing. */
function unknownValue(value: string | number): string | number {
  if (typeof value === 'number') return 2147483647;
  if (value.includes('@')) return 'nobody-at-all@example.com';
  return `${value.slice(0, 3)}zzzzzzzzzzzzzzzzzzzz`;
}

/** A value each declared query parameter must refuse, from its documented schema. */
function invalidQueryValue(schema: any): string | undefined {
  const s = schema.type === 'array' ? schema.items : schema;
  if (s.type === 'integer') return s.maximum !== undefined && s.maximum < 1_000_000 ? String(s.maximum + 1) : 'abc';
  if (s.enum || s.const !== undefined || s.anyOf) return 'NOT-A-VALUE';
  if (s.type === 'string' && s.maxLength !== undefined) return 'x'.repeat(s.maxLength + 1);
  if (s.type === 'string' && s.minLength !== undefined && s.minLength > 1) return 'x';
  if (s.format === 'date-time') return 'never';
  return undefined;
}

test.serial('errors: no key, a SENDING key, unknown ids, wrong bodies and bad query values answer documented errors', async (t) => {
  const routes: RouteDef[] = w.t0.app.routes;
  const counts = { unauthorized: 0, forbidden: 0, notFound: 0, badBody: 0, badQuery: 0 };
  for (const r of routes) {
    const c = toured.get(routeKey(r.method, r.path));
    if (!c) continue; // reported by the tour test
    if (r.access !== 'public') {
      const res = await expectStatus(t, { ...c, key: null }, 401);
      t.is(res.body.error.code, 'UNAUTHORIZED');
      counts.unauthorized++;
    }
    if (r.access === 'full') {
      const res = await expectStatus(t, { ...c, key: c.sandbox ? sandboxSendingKey : sendingKey }, 403);
      t.is(res.body.error.code, 'FORBIDDEN');
      counts.forbidden++;
    }
    if (c.params) {
      const params = Object.fromEntries(Object.entries(c.params).map(([k, v]) => [k, unknownValue(v)]));
      const res = await expectStatus(t, { ...c, params, key: undefined }, 404);
      t.is(res.body.error.code, 'NOT_FOUND');
      counts.notFound++;
    }
    if (r.request?.body) {
      const res = await expectStatus(t, { ...c, body: 42, headers: undefined, key: undefined }, 400);
      t.is(res.body.error.code, 'BAD_REQUEST');
      counts.badBody++;
    }
    for (const p of check.operation(r.method, r.path).parameters ?? []) {
      if (p.in !== 'query') continue;
      const bad = invalidQueryValue(p.schema);
      if (bad === undefined) continue;
      const res = await expectStatus(t, { ...c, query: `${p.name}=${encodeURIComponent(bad)}`, key: undefined }, 400);
      t.regex(res.body.error.message, new RegExp(`^${p.name}: `), `${r.method} ${r.path} ?${p.name}=${bad}`);
      counts.badQuery++;
    }
  }
  t.log(JSON.stringify(counts));
  t.true(counts.unauthorized >= 60 && counts.notFound >= 40 && counts.badBody >= 25 && counts.badQuery >= 25, JSON.stringify(counts));
});

test.serial('errors outside any operation: 404, 405, 413 and 429 carry the documented error body', async (t) => {
  const errorSchema = check.compile({ $ref: '#/components/schemas/Error' });
  const isError = (res: TestResponse, code: string) => {
    t.true(errorSchema(res.body), JSON.stringify(res.body));
    t.is(res.body.error.code, code);
    check.validated++;
  };
  const unknown = await w.t0.request('GET', '/v1/nothing-here');
  t.is(unknown.status, 404);
  isError(unknown, 'NOT_FOUND');
  const wrongMethod = await w.t0.request('PUT', '/v1/domains');
  t.is(wrongMethod.status, 405);
  t.is(wrongMethod.headers.get('allow'), 'GET, POST');
  isError(wrongMethod, 'METHOD_NOT_ALLOWED');
  // 413 is documented on every route with a body.
  const huge = await w.t0.request('POST', '/v1/suppressions', { rawBody: JSON.stringify({ email: 'x'.repeat(300 * 1024) }) });
  t.is(huge.status, 413);
  t.deepEqual(check.check('POST', '/suppressions', huge), []);
  // 429 on a team limited to 1 request per second (the clock stands still).
  const teamId = await w.t0.app.services.teams.create('Limited');
  await w.t0.app.services.teams.setRateLimit(teamId, 1);
  const limited = (await w.t0.app.services.apiKeys.create(teamId, { name: 'limited', permission: 'FULL' })).token;
  t.is((await w.t0.request('GET', '/v1/domains', { key: limited })).status, 200);
  const slow = await w.t0.request('GET', '/v1/domains', { key: limited });
  t.is(slow.status, 429);
  t.deepEqual(check.check('GET', '/domains', slow), []);
  t.regex(slow.headers.get('retry-after') ?? '', /^\d+$/);
  t.log(`${check.validated} responses validated against the document in this run`);
});
