// A valid request for every API route, against real resources, so mutated requests get past
// routing and id lookups and reach the deep validation. DELETE routes (and the key revoke)
// point at throwaway resources, so the first successful delete takes nothing the other
// routes need.
import { addVerifiedDomain } from '../../helpers/domain-fixtures.js';
import type { TestApp } from '../../helpers/test-app.js';
import { smtpSend } from '../../inbound/helpers/smtp-client.js';
import { sampleTlsReport, signedTlsReportMail } from '../../helpers/tls-report-mail.js';

export type QueryValue = string | string[];

export interface RouteExample {
  /** Values for the route's :params. */
  params: Record<string, string>;
  query?: Record<string, QueryValue>;
  /** The JSON body (undefined: none). */
  body?: unknown;
}

export interface ApiFixtures {
  domain: any;
  /** The id of the key the suite itself uses (t0.key): revoking it would end the run. */
  ownKeyId: number;
  examples: Map<string, RouteExample>;
}

const doc = (text: string) => JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text }] }] });

async function ok(t0: TestApp, method: string, path: string, body?: unknown): Promise<any> {
  const res = await t0.request(method, path, { body });
  if (res.status !== 200) throw new Error(`fixture ${method} ${path} failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

export function routeKey(route: { method: string; path: string }): string {
  return `${route.method} ${route.path}`;
}

/** Builds the resources and returns one valid example per route (keyed "METHOD /path"). */
export async function buildApiFixtures(t0: TestApp): Promise<ApiFixtures> {
  const domain = await addVerifiedDomain(t0, 'sender.dev');
  const throwawayDomain = await ok(t0, 'POST', '/v1/domains', { name: 'throwaway.dev', region: 'local' });
  const spareKey = await ok(t0, 'POST', '/v1/apiKeys', { name: 'spare', permission: 'SENDING' });
  const from = 'Fuzz Sender <hello@sender.dev>';

  const book = await ok(t0, 'POST', '/v1/contactBooks', { name: 'Fuzz book', variables: ['company'], properties: { plan: 'free' } });
  const throwawayBook = await ok(t0, 'POST', '/v1/contactBooks', { name: 'Throwaway book' });
  const contact = await ok(t0, 'POST', `/v1/contactBooks/${book.id}/contacts`, { email: 'alice@example.net', firstName: 'Alice', properties: { plan: 'pro' } });
  const throwawayContact = await ok(t0, 'POST', `/v1/contactBooks/${book.id}/contacts`, { email: 'gone@example.net' });
  const bulkContact = await ok(t0, 'POST', `/v1/contactBooks/${book.id}/contacts`, { email: 'bulk@example.net' });
  const filters = { match: 'all', conditions: [{ field: 'properties.plan', op: 'eq', value: 'pro' }, { match: 'any', conditions: [{ field: 'email', op: 'contains', value: 'example' }, { field: 'subscribed', op: 'eq', value: true }] }] };
  const segment = await ok(t0, 'POST', '/v1/segments', { name: 'Pros', contactBookId: book.id, filters });
  const throwawaySegment = await ok(t0, 'POST', '/v1/segments', { name: 'Gone', contactBookId: book.id, filters: { match: 'all', conditions: [] } });

  const template = await ok(t0, 'POST', '/v1/templates', { name: 'Receipt', subject: 'Hi {{firstName}}', content: doc('Hello {{company}}') });
  await ok(t0, 'POST', `/v1/templates/${template.id}/publish`);
  const throwawayTemplate = await ok(t0, 'POST', '/v1/templates', { name: 'Gone', subject: 's', content: doc('x') });

  const campaignBody = { name: 'Launch', from, subject: 'News for {{firstName}}', contactBookId: book.id, html: '<p>Hello {{unsubscribeUrl}}</p>' };
  const campaign = await ok(t0, 'POST', '/v1/campaigns', campaignBody);
  const throwawayCampaign = await ok(t0, 'POST', '/v1/campaigns', campaignBody);

  const sendBody = {
    from,
    to: ['Alice <alice@example.net>'],
    cc: 'carol@example.net',
    bcc: ['bob@example.org'],
    replyTo: 'Support <support@sender.dev>',
    subject: 'Hello there',
    text: 'Plain text',
    html: '<p>HTML</p>',
    headers: { 'X-Fuzz': 'yes' },
    attachments: [{ filename: 'notes.txt', content: Buffer.from('hello').toString('base64') }],
    tags: ['fuzz'],
    scheduledAt: 'in 2 hours',
  };
  const scheduled = await ok(t0, 'POST', '/v1/emails', sendBody);
  const toCancel = await ok(t0, 'POST', '/v1/emails', sendBody);

  await ok(t0, 'POST', '/v1/suppressions', { email: 'blocked@example.net' });
  await ok(t0, 'POST', '/v1/suppressions', { email: 'unblock@example.net' });

  const webhookBody = { url: 'http://127.0.0.1:9/hook', eventTypes: ['email.sent', 'email.bounced'], description: 'fuzz', domainIds: [domain.id] };
  const webhook = await ok(t0, 'POST', '/v1/webhooks', webhookBody);
  const throwawayWebhook = await ok(t0, 'POST', '/v1/webhooks', webhookBody);

  // One received email, so its get and raw routes have something to serve.
  await ok(t0, 'PATCH', `/v1/domains/${domain.id}`, { receiving: true });
  const delivered = await smtpSend({
    port: t0.app.listeners.inbound!.port,
    from: 'someone@remote.test',
    to: ['inbox@sender.dev'],
    raw: 'From: someone@remote.test\r\nTo: inbox@sender.dev\r\nSubject: Hi\r\nMessage-ID: <fixture@remote.test>\r\n\r\nHello\r\n',
    plaintext: true,
  });
  if (!delivered.ok) throw new Error(`fixture inbound message refused: ${delivered.response}`);
  const receivedList = await ok(t0, 'GET', '/v1/receivedEmails');
  const receivedId = receivedList.receivedEmails[0]?.id as string;
  if (!receivedId) throw new Error('fixture: no received email stored');
  // One TLS report received for the domain, for its get route.
  const tlsTo = `tlsrpt+${domain.id}@${t0.config.hostname}`;
  const tlsReport = await smtpSend({ port: t0.app.listeners.inbound!.port, from: 'reporter@remote.test', to: [tlsTo], raw: await signedTlsReportMail(t0.zone, tlsTo, sampleTlsReport(domain.name)), plaintext: true });
  const tlsReportId = /queued as (tlsr_\S+)/.exec(tlsReport.response)?.[1];
  if (!tlsReportId) throw new Error(`fixture TLS report refused: ${tlsReport.response}`);

  // One sent now, so the sandbox's capture mailbox has a message to list and serve.
  await ok(t0, 'POST', '/v1/emails', { ...sendBody, scheduledAt: null });
  t0.app.engine.wake();
  await t0.app.engine.whenIdle();
  const sandboxList = await ok(t0, 'GET', '/v1/sandbox/messages');
  const sandboxMessageId = sandboxList.messages[0]?.id as string;
  if (!sandboxMessageId) throw new Error('fixture: no captured message (is the server in sandbox mode, and did a fixture send?)');

  const page = { page: '1', limit: '10' };
  const dom = String(domain.id);
  const e: [string, RouteExample][] = [
    // The public API routes: the static OpenAPI document, at its two paths.
    ['GET /openapi.json', { params: {} }],
    ['GET /doc', { params: {} }],
    ['GET /apiKeys', { params: {} }],
    ['POST /apiKeys', { params: {}, body: { name: 'fuzz key', permission: 'SENDING', domainId: domain.id } }],
    ['DELETE /apiKeys/:apiKeyId', { params: { apiKeyId: String(spareKey.id) } }],
    ['GET /domains', { params: {} }],
    ['POST /domains', { params: {}, body: { name: 'fresh-domain.dev', region: 'local' } }],
    ['GET /domains/:id', { params: { id: dom } }],
    ['PUT /domains/:id/verify', { params: { id: dom } }],
    ['PATCH /domains/:id', { params: { id: dom }, body: { clickTracking: false, openTracking: true, trackingDomain: null, tlsPolicy: 'OPPORTUNISTIC', receiving: true } }],
    ['DELETE /domains/:id', { params: { id: String(throwawayDomain.id) } }],
    ['POST /emails', { params: {}, body: sendBody }],
    ['POST /emails/batch', { params: {}, body: [sendBody, { from, to: 'alice@example.net', templateId: template.id, variables: { company: 'Acme', firstName: 'Al', n: 1, b: true }, scheduledAt: 'tomorrow 9am' }] }],
    ['GET /emails', { params: {}, query: { ...page, domainId: dom, tag: 'fuzz', startDate: '2020-01-01T00:00:00Z', endDate: '2100-01-01T00:00:00Z' } }],
    ['GET /emails/:emailId', { params: { emailId: scheduled.emailId } }],
    ['PATCH /emails/:emailId', { params: { emailId: scheduled.emailId }, body: { scheduledAt: 'in 3 hours' } }],
    ['POST /emails/:emailId/cancel', { params: { emailId: toCancel.emailId } }],
    ['GET /templates', { params: {}, query: { ...page, search: 'Rec' } }],
    ['POST /templates', { params: {}, body: { name: 'New', subject: 'Subject {{firstName}}', content: doc('Body') } }],
    ['GET /templates/:templateId', { params: { templateId: template.id } }],
    ['PATCH /templates/:templateId', { params: { templateId: template.id }, body: { name: 'Receipt 2', subject: 'Hi again', content: doc('Hello again') } }],
    ['DELETE /templates/:templateId', { params: { templateId: throwawayTemplate.id } }],
    ['POST /templates/:templateId/duplicate', { params: { templateId: template.id } }],
    ['POST /templates/:templateId/publish', { params: { templateId: template.id } }],
    ['GET /templates/:templateId/versions', { params: { templateId: template.id } }],
    ['POST /templates/:templateId/rollback', { params: { templateId: template.id }, body: { versionNumber: 1 } }],
    ['POST /campaigns', { params: {}, body: { ...campaignBody, segmentId: segment.id, previewText: 'Preview', replyTo: ['reply@sender.dev'], cc: null, bcc: null, batchSize: 50, sendNow: false, scheduledAt: null } }],
    ['GET /campaigns', { params: {}, query: { ...page, status: 'DRAFT', search: 'Launch' } }],
    ['GET /campaigns/:campaignId', { params: { campaignId: campaign.id } }],
    ['PATCH /campaigns/:campaignId', { params: { campaignId: campaign.id }, body: { name: 'Launch 2', subject: 'News', previewText: null, html: '<p>Hi</p>', batchSize: 10, segmentId: null } }],
    ['DELETE /campaigns/:campaignId', { params: { campaignId: throwawayCampaign.id } }],
    ['POST /campaigns/:campaignId/schedule', { params: { campaignId: campaign.id }, body: { scheduledAt: 'in 1 day', batchSize: 20 } }],
    ['POST /campaigns/:campaignId/pause', { params: { campaignId: campaign.id } }],
    ['POST /campaigns/:campaignId/resume', { params: { campaignId: campaign.id } }],
    ['GET /contactBooks', { params: {} }],
    ['POST /contactBooks', { params: {}, body: { name: 'Another', emoji: '📘', properties: { plan: 'free' }, variables: ['company'], doubleOptInEnabled: false, doubleOptInFrom: from, doubleOptInSubject: 'Confirm', doubleOptInContent: null } }],
    ['GET /contactBooks/:contactBookId', { params: { contactBookId: book.id } }],
    ['PATCH /contactBooks/:contactBookId', { params: { contactBookId: book.id }, body: { name: 'Fuzz book', emoji: '📗', variables: ['company'], doubleOptInFrom: from, doubleOptInSubject: 'Please confirm' } }],
    ['DELETE /contactBooks/:contactBookId', { params: { contactBookId: throwawayBook.id } }],
    ['POST /contactBooks/:contactBookId/contacts', { params: { contactBookId: book.id }, body: { email: 'new@example.net', firstName: 'New', lastName: 'Person', properties: { plan: 'pro', seats: 3, trial: false }, subscribed: true } }],
    ['GET /contactBooks/:contactBookId/contacts', { params: { contactBookId: book.id }, query: { ...page, emails: 'alice@example.net,new@example.net', ids: contact.contactId } }],
    ['POST /contactBooks/:contactBookId/contacts/bulk', { params: { contactBookId: book.id }, body: [{ email: 'b1@example.net', firstName: 'B' }, { email: 'b2@example.net', properties: { plan: 'free' }, subscribed: false }] }],
    ['DELETE /contactBooks/:contactBookId/contacts/bulk', { params: { contactBookId: book.id }, body: { contactIds: [bulkContact.contactId] } }],
    ['GET /contactBooks/:contactBookId/contacts/:contactId', { params: { contactBookId: book.id, contactId: contact.contactId } }],
    ['PATCH /contactBooks/:contactBookId/contacts/:contactId', { params: { contactBookId: book.id, contactId: contact.contactId }, body: { firstName: 'Alicia', lastName: null, properties: { plan: 'pro' }, subscribed: true } }],
    ['PUT /contactBooks/:contactBookId/contacts/:contactId', { params: { contactBookId: book.id, contactId: contact.contactId }, body: { email: 'alice@example.net', firstName: 'Alice', properties: { plan: 'pro' } } }],
    ['DELETE /contactBooks/:contactBookId/contacts/:contactId', { params: { contactBookId: book.id, contactId: throwawayContact.contactId } }],
    ['GET /segments', { params: {}, query: { ...page, contactBookId: book.id } }],
    ['POST /segments', { params: {}, body: { name: 'New segment', contactBookId: book.id, filters } }],
    ['GET /segments/:segmentId', { params: { segmentId: segment.id } }],
    ['PATCH /segments/:segmentId', { params: { segmentId: segment.id }, body: { name: 'Pros 2', filters } }],
    ['DELETE /segments/:segmentId', { params: { segmentId: throwawaySegment.id } }],
    ['GET /segments/:segmentId/contacts', { params: { segmentId: segment.id }, query: page }],
    ['GET /suppressions', { params: {}, query: { ...page, reason: 'MANUAL', search: 'example' } }],
    ['POST /suppressions', { params: {}, body: { email: 'another@example.net', reason: 'MANUAL', source: 'fuzz' } }],
    ['POST /suppressions/bulk', { params: {}, body: { emails: ['x1@example.net', 'x2@example.net'], reason: 'COMPLAINT', source: null } }],
    ['POST /suppressions/bulk/remove', { params: {}, body: { emails: ['x1@example.net'] } }],
    ['GET /suppressions/:email', { params: { email: 'blocked@example.net' } }],
    ['DELETE /suppressions/:email', { params: { email: 'unblock@example.net' } }],
    ['GET /receivedEmails', { params: {}, query: { ...page, domainId: dom } }],
    ['GET /receivedEmails/:id', { params: { id: receivedId } }],
    ['GET /receivedEmails/:id/raw', { params: { id: receivedId } }],
    // The fuzzed server runs in sandbox mode: the capture mailbox holds what the fixtures sent.
    ['GET /sandbox/messages', { params: {}, query: page }],
    ['GET /sandbox/messages/:id', { params: { id: sandboxMessageId } }],
    ['GET /tlsReports', { params: {}, query: { ...page, domainId: dom } }],
    ['GET /tlsReports/:id', { params: { id: tlsReportId } }],
    ['GET /webhooks', { params: {}, query: page }],
    ['POST /webhooks', { params: {}, body: webhookBody }],
    ['GET /webhooks/:webhookId', { params: { webhookId: webhook.id } }],
    ['PATCH /webhooks/:webhookId', { params: { webhookId: webhook.id }, body: { url: 'http://127.0.0.1:9/hook2', eventTypes: ['email.delivered'], description: null, domainIds: null, rotateSecret: false } }],
    ['DELETE /webhooks/:webhookId', { params: { webhookId: throwawayWebhook.id } }],
    ['GET /webhooks/:webhookId/attempts', { params: { webhookId: webhook.id }, query: { limit: '10' } }],
    ['POST /webhooks/:webhookId/test', { params: { webhookId: webhook.id } }],
    ['GET /analytics/email-time-series', { params: {}, query: { days: '7', domainId: dom } }],
    ['GET /analytics/reputation-metrics', { params: {}, query: { domainId: dom } }],
  ];
  const keys = (await ok(t0, 'GET', '/v1/apiKeys')) as { id: number; name: string }[];
  const ownKeyId = keys.find((k) => k.name === 'test')!.id;
  return { domain, ownKeyId, examples: new Map(e) };
}
