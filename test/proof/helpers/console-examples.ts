// The world the console fuzz suite (test/proof/fuzz-console) runs in, and one valid example
// request for every console route: team A (signed in as a member, and as an operator for the
// operator pages) with one of everything, and team B, whose every name, address and subject
// carries LEAK_MARKER, so any answer to team A showing B's data is caught.
import Router from '@koa/router';
import type { App } from '../../../src/app.js';
import { consolePages } from '../../../src/console/console-module.js';
import type { PageDeps } from '../../../src/console/console-deps.js';
import type { TestApp } from '../../helpers/test-app.js';
import { addVerifiedDomain } from '../../helpers/domain-fixtures.js';
import { smtpSend } from '../../inbound/helpers/smtp-client.js';
import { consoleUser, PASSWORD } from '../../console/helpers/console-client.js';

/** In every piece of team B's data; never in an answer to team A's member. */
export const LEAK_MARKER = 'zqleakb';

export type FormPairs = [string, string][];

/** Who sends a route's requests: team A's member, team A's operator, a session made for the one request (sign-out), or nobody (sign-in). */
export type Actor = 'member' | 'operator' | 'throwaway' | 'anonymous';

export interface ConsoleExample {
  /** Path parameters, raw (the request percent-encodes them). */
  params: Record<string, string>;
  /** Team B's id for the same parameter, where there is one. */
  foreign: Record<string, string>;
  query: [string, string][];
  /** The form fields of a POST, without the CSRF token. */
  form: FormPairs;
  /** The CSV file of the multipart import. */
  csv?: string;
  actor: Actor;
  /** Numeric ids that a mutated id of this route (parsed as the route parses it) must not hit: what the suite itself needs. */
  protect?: number[];
}

export interface ConsoleRoute {
  method: 'GET' | 'POST';
  /** With the /console prefix, as the router has it: '/console/contacts/:bookId'. */
  path: string;
}

export const routeKey = (r: ConsoleRoute) => `${r.method} ${r.path}`;

/** The console's routes, read from its router: every page module mountConsole registers. */
export function consoleRoutes(): ConsoleRoute[] {
  const r = new Router({ prefix: '/console' });
  // Registering reads only these at the time; the handlers are never run here.
  consolePages(r, { publicUrl: 'http://127.0.0.1', services: {} } as unknown as PageDeps);
  return r.stack.flatMap((layer) => layer.methods.filter((m) => m === 'GET' || m === 'POST').map((m) => ({ method: m as 'GET' | 'POST', path: String(layer.path) })));
}

export interface ConsoleWorld {
  member: { id: number; email: string };
  operator: { id: number; email: string };
  /** A user only the sign-in form is fuzzed with (its failures lock only it). */
  loginEmail: string;
  teamB: number;
  a: Record<string, string>;
  b: Record<string, string>;
  examples: Map<string, ConsoleExample>;
}

async function ok<T = any>(res: Promise<{ status: number; body: T }>, what: string): Promise<T> {
  const r = await res;
  if (r.status !== 200) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** One team's things, made through the API with its key; `mark` goes into every name. */
async function teamData(t0: TestApp, key: string, mark: string, domainName: string, inboxName: string): Promise<Record<string, string>> {
  const ids: Record<string, string> = {};
  const req = (method: string, path: string, body?: unknown) => t0.request(method, path, { body, key });
  const domain = await addVerifiedDomain(t0, domainName, key);
  ids.domain = String(domain.id);
  const inbox = await addVerifiedDomain(t0, inboxName, key);
  ids.inbox = String(inbox.id);
  await ok(req('PATCH', `/v1/domains/${inbox.id}`, { receiving: true }), 'receiving');
  ids.email = (await ok(req('POST', '/v1/emails', { from: `news@${domainName}`, to: `${mark}-rcpt@example.net`, subject: `Subject ${mark}`, html: `<p>${mark}</p>`, text: `text ${mark}` }), 'email')).emailId;
  ids.scheduledEmail = (await ok(req('POST', '/v1/emails', { from: `news@${domainName}`, to: `${mark}-later@example.net`, subject: `Later ${mark}`, text: 't', scheduledAt: '2099-01-01T00:00:00.000Z' }), 'scheduled email')).emailId;
  ids.book = (await ok(req('POST', '/v1/contactBooks', { name: `Book ${mark}` }), 'book')).id;
  ids.doomedBook = (await ok(req('POST', '/v1/contactBooks', { name: `Doomed book ${mark}` }), 'book')).id;
  ids.contact = (await ok(req('POST', `/v1/contactBooks/${ids.book}/contacts`, { email: `${mark}-1@example.org`, firstName: `First ${mark}`, properties: { plan: mark } }), 'contact')).contactId;
  ids.doomedContact = (await ok(req('POST', `/v1/contactBooks/${ids.book}/contacts`, { email: `${mark}-2@example.org` }), 'contact')).contactId;
  ids.segment = (await ok(req('POST', '/v1/segments', { name: `Segment ${mark}`, contactBookId: ids.book, filters: { match: 'all', conditions: [{ field: 'email', op: 'contains', value: mark }] } }), 'segment')).id;
  ids.doomedSegment = (await ok(req('POST', '/v1/segments', { name: `Doomed segment ${mark}`, contactBookId: ids.book, filters: { match: 'all', conditions: [] } }), 'segment')).id;
  ids.template = (await ok(req('POST', '/v1/templates', { name: `Template ${mark}`, subject: `Hello ${mark}`, content: JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: `Hello ${mark}` }] }] }) }), 'template')).id;
  await ok(req('POST', `/v1/templates/${ids.template}/publish`), 'publish');
  ids.doomedTemplate = (await ok(req('POST', '/v1/templates', { name: `Doomed template ${mark}`, subject: 'S' }), 'template')).id;
  const campaign = (name: string) => ok(req('POST', '/v1/campaigns', { name: `${name} ${mark}`, from: `news@${domainName}`, subject: `Campaign ${mark}`, contactBookId: ids.book, html: `<p>${mark}</p>` }), 'campaign');
  ids.campaign = (await campaign('Draft')).id;
  ids.scheduleCampaign = (await campaign('To schedule')).id;
  ids.doomedCampaign = (await campaign('Doomed')).id;
  ids.webhook = (await ok(req('POST', '/v1/webhooks', { url: `http://127.0.0.1:9/${mark}`, eventTypes: ['email.sent'], description: `Hook ${mark}` }), 'webhook')).id;
  ids.doomedWebhook = (await ok(req('POST', '/v1/webhooks', { url: `http://127.0.0.1:9/doomed-${mark}`, eventTypes: ['email.sent'] }), 'webhook')).id;
  ids.suppressed = `${mark}-suppressed@example.org`;
  await ok(req('POST', '/v1/suppressions', { email: ids.suppressed }), 'suppression');
  const sent = await smtpSend({ port: t0.app.listeners.inbound!.port, from: `${mark}@remote.example`, to: [`in@${inboxName}`], raw: `From: ${mark}@remote.example\r\nTo: in@${inboxName}\r\nSubject: Inbound ${mark}\r\nContent-Type: text/html\r\n\r\n<p>${mark}</p>\r\n` });
  if (!sent.ok) throw new Error(sent.response);
  ids.received = (await ok(req('GET', '/v1/receivedEmails'), 'received')).receivedEmails[0].id;
  return ids;
}

export async function buildConsoleWorld(t0: TestApp): Promise<ConsoleWorld> {
  const app: App = t0.app;
  // Team B first: its domains take the lowest ids, which are what a mangled id parses to most often.
  const teamB = await app.services.teams.create(`Team ${LEAK_MARKER}`);
  const keyB = (await app.services.apiKeys.create(teamB, { name: `key ${LEAK_MARKER}`, permission: 'FULL' })).token;
  const b = await teamData(t0, keyB, LEAK_MARKER, `${LEAK_MARKER}.dev`, `in-${LEAK_MARKER}.dev`);
  await consoleUser(app, `${LEAK_MARKER}@team-b.example`, teamB);
  b.import = (await app.services.contactImports.start({ teamId: teamB, domainId: null }, b.book, `${LEAK_MARKER}.csv`, `email\n${LEAK_MARKER}-3@example.org\n`)).id;

  const a = await teamData(t0, t0.key, 'alpha', 'fuzz-a.dev', 'in-fuzz-a.dev');
  a.import = (await app.services.contactImports.start({ teamId: t0.teamId, domainId: null }, a.book, 'a.csv', 'email\nalpha-3@example.org\n')).id;
  a.doomedDomain = String((await ok(t0.request('POST', '/v1/domains', { body: { name: 'doomed-a.dev', region: 'local' } }), 'domain')).id);
  const keys = await app.services.apiKeys.list(t0.teamId);
  a.key = String(keys[0]!.id);
  a.doomedKey = String((await app.services.apiKeys.create(t0.teamId, { name: 'doomed', permission: 'FULL' })).id);

  const member = await consoleUser(app, 'member@fuzz-a.dev', t0.teamId);
  const operator = await consoleUser(app, 'operator@fuzz-a.dev', t0.teamId, true);
  const loginEmail = 'login@fuzz-a.dev';
  await consoleUser(app, loginEmail, t0.teamId);

  // The queue: team A's mail waits for example.net (no MX in the test zone); bounce-me.example
  // is the destination the bounce form may empty; one suspension to resume.
  await ok(t0.request('POST', '/v1/emails', { body: { from: 'news@fuzz-a.dev', to: 'give-up@example.net', subject: 'to give up', text: 't' } }), 'email');
  await ok(t0.request('POST', '/v1/emails', { body: { from: 'news@fuzz-a.dev', to: 'x@bounce-me.example', subject: 'to bounce', text: 't' } }), 'email');
  const queued = await app.services.queue.messages({ destination: 'example.net' }, 100);
  const deliveryOf = (to: string) => String(queued.messages.find((m) => m.recipient === to)?.deliveryId ?? queued.messages[0]!.deliveryId);
  const actor = { consoleUserId: operator.id, email: operator.email };
  const suspension = await app.services.queue.suspend(actor, { destination: 'held.example', minutes: 60, reason: 'fuzz' });

  const M = 'member' as const;
  const e = (params: Record<string, string>, o: Partial<ConsoleExample> = {}): ConsoleExample => ({ params, foreign: {}, query: [], form: [], actor: M, ...o });
  const contentForm: FormPairs = [['format', 'markup'], ['content', '# Hello\n\nA **bold** word and a [link](https://example.com).']];
  const examples = new Map<string, ConsoleExample>([
    ['GET /console/login', e({}, { actor: 'anonymous', query: [['next', '/console/emails']] })],
    ['POST /console/login', e({}, { actor: 'anonymous', form: [['email', loginEmail], ['password', PASSWORD], ['next', '/console']] })],
    ['POST /console/logout', e({}, { actor: 'throwaway' })],
    ['GET /console', e({})],
    ['GET /console/emails', e({}, { query: [['domainId', a.domain!], ['tag', 'news'], ['since', '2000-01-01'], ['until', '2099-12-31'], ['page', '1']] })],
    ['POST /console/emails/send', e({}, { form: [['fromLocal', 'hello'], ['fromDomain', 'fuzz-a.dev'], ['to', 'someone@example.net'], ['subject', 'A test'], ['text', 'Hello']] })],
    ['GET /console/emails/:id', e({ id: a.email! }, { foreign: { id: b.email! }, query: [['images', '1']] })],
    ['GET /console/emails/:id/body.html', e({ id: a.email! }, { foreign: { id: b.email! }, query: [['images', '1']] })],
    ['POST /console/emails/:id/cancel', e({ id: a.scheduledEmail! }, { foreign: { id: b.scheduledEmail! } })],
    ['GET /console/domains', e({})],
    ['POST /console/domains', e({}, { form: [['name', 'new-a.dev']] })],
    ['GET /console/domains/:id', e({ id: a.domain! }, { foreign: { id: b.domain! } })],
    ['POST /console/domains/:id/verify', e({ id: a.domain! }, { foreign: { id: b.domain! } })],
    ['POST /console/domains/:id/settings', e({ id: a.domain! }, { foreign: { id: b.domain! }, form: [['openTracking', 'on'], ['clickTracking', 'on'], ['trackingDomain', ''], ['tlsPolicy', 'OPPORTUNISTIC']] })],
    ['POST /console/domains/:id/delete', e({ id: a.doomedDomain! }, { foreign: { id: b.domain! }, protect: [Number(a.domain), Number(a.inbox)] })],
    ['GET /console/api-keys', e({})],
    ['POST /console/api-keys', e({}, { form: [['name', 'web app'], ['permission', 'SENDING'], ['domainId', a.domain!]] })],
    ['POST /console/api-keys/:id/revoke', e({ id: a.doomedKey! }, { protect: [Number(a.key)] })],
    ['GET /console/contacts', e({})],
    ['POST /console/contacts', e({}, { form: [['name', 'Another book']] })],
    ['GET /console/contacts/:bookId', e({ bookId: a.book! }, { foreign: { bookId: b.book! }, query: [['q', 'alpha'], ['page', '1']] })],
    ['POST /console/contacts/:bookId/settings', e({ bookId: a.book! }, { foreign: { bookId: b.book! }, form: [['name', 'Book alpha'], ['doubleOptInFrom', '']] })],
    ['POST /console/contacts/:bookId/delete', e({ bookId: a.doomedBook! }, { foreign: { bookId: b.book! } })],
    ['POST /console/contacts/:bookId/contacts', e({ bookId: a.book! }, { foreign: { bookId: b.book! }, form: [['email', 'new@example.org'], ['firstName', 'New'], ['lastName', 'Person']] })],
    ['GET /console/contacts/:bookId/contacts/:contactId', e({ bookId: a.book!, contactId: a.contact! }, { foreign: { bookId: b.book!, contactId: b.contact! } })],
    ['POST /console/contacts/:bookId/contacts/:contactId', e({ bookId: a.book!, contactId: a.contact! }, { foreign: { bookId: b.book!, contactId: b.contact! }, form: [['firstName', 'Ann'], ['lastName', 'Alpha'], ['subscribed', 'on'], ['properties', 'plan=alpha\ncity=Oslo']] })],
    ['POST /console/contacts/:bookId/contacts/:contactId/delete', e({ bookId: a.book!, contactId: a.doomedContact! }, { foreign: { bookId: b.book!, contactId: b.contact! } })],
    ['POST /console/contacts/:bookId/import', e({ bookId: a.book! }, { foreign: { bookId: b.book! }, csv: 'email,firstName,plan\nimported@example.org,Imp,gold\n' })],
    ['GET /console/contacts/:bookId/imports/:importId', e({ bookId: a.book!, importId: a.import! }, { foreign: { bookId: b.book!, importId: b.import! } })],
    ['GET /console/contacts/:bookId/export.csv', e({ bookId: a.book! }, { foreign: { bookId: b.book! } })],
    ['GET /console/segments', e({}, { query: [['page', '1']] })],
    ['GET /console/segments/new', e({}, { query: [['book', a.book!]] })],
    ['POST /console/segments/preview', e({}, { form: [['contactBookId', a.book!], ['mode', 'builder'], ['name', 'Preview'], ['match', 'all'], ['field', 'email'], ['prop', ''], ['op', 'contains'], ['value', 'alpha'], ['field', 'property'], ['prop', 'plan'], ['op', 'eq'], ['value', 'alpha']] })],
    ['POST /console/segments', e({}, { form: [['contactBookId', a.book!], ['mode', 'json'], ['name', 'Gold'], ['filtersJson', '{"match":"any","conditions":[{"field":"properties.plan","op":"eq","value":"gold"},{"match":"all","conditions":[{"field":"subscribed","op":"eq","value":true}]}]}']] })],
    ['GET /console/segments/:id', e({ id: a.segment! }, { foreign: { id: b.segment! }, query: [['mode', 'json'], ['page', '1']] })],
    ['POST /console/segments/:id', e({ id: a.segment! }, { foreign: { id: b.segment! }, form: [['contactBookId', a.book!], ['mode', 'builder'], ['segmentId', a.segment!], ['name', 'Segment alpha'], ['match', 'any'], ['field', 'subscribed'], ['prop', ''], ['op', 'eq'], ['value', 'true']] })],
    ['POST /console/segments/:id/delete', e({ id: a.doomedSegment! }, { foreign: { id: b.segment! } })],
    ['POST /console/content/preview', e({}, { form: contentForm })],
    ['GET /console/templates', e({}, { query: [['q', 'Template'], ['page', '1']] })],
    ['POST /console/templates', e({}, { form: [['name', 'Another template'], ['subject', 'Hi {{firstName}}']] })],
    ['GET /console/templates/:id', e({ id: a.template! }, { foreign: { id: b.template! } })],
    ['POST /console/templates/:id', e({ id: a.template! }, { foreign: { id: b.template! }, form: [['name', 'Template alpha'], ['subject', 'Hello'], ...contentForm] })],
    ['GET /console/templates/:id/preview.html', e({ id: a.template! }, { foreign: { id: b.template! } })],
    ['GET /console/templates/:id/versions/:n/preview.html', e({ id: a.template!, n: '1' }, { foreign: { id: b.template! } })],
    ['POST /console/templates/:id/publish', e({ id: a.template! }, { foreign: { id: b.template! } })],
    ['POST /console/templates/:id/rollback', e({ id: a.template! }, { foreign: { id: b.template! }, form: [['versionNumber', '1']] })],
    ['POST /console/templates/:id/duplicate', e({ id: a.template! }, { foreign: { id: b.template! } })],
    ['POST /console/templates/:id/delete', e({ id: a.doomedTemplate! }, { foreign: { id: b.template! } })],
    ['GET /console/campaigns', e({}, { query: [['status', 'draft'], ['page', '1']] })],
    ['POST /console/campaigns', e({}, { form: [['name', 'Spring'], ['from', 'Newsletter <news@fuzz-a.dev>'], ['contactBookId', a.book!], ['segmentId', a.segment!], ['templateId', a.template!], ['subject', 'Spring news']] })],
    ['GET /console/campaigns/:id', e({ id: a.campaign! }, { foreign: { id: b.campaign! } })],
    ['GET /console/campaigns/:id/preview.html', e({ id: a.campaign! }, { foreign: { id: b.campaign! } })],
    ['POST /console/campaigns/:id', e({ id: a.campaign! }, { foreign: { id: b.campaign! }, form: [['name', 'Draft alpha'], ['from', 'news@fuzz-a.dev'], ['subject', 'Campaign alpha'], ['previewText', 'Read on'], ['contactBookId', a.book!], ['segmentId', ''], ...contentForm] })],
    ['POST /console/campaigns/:id/schedule', e({ id: a.scheduleCampaign! }, { foreign: { id: b.scheduleCampaign! }, form: [['scheduledAt', '2099-01-31T09:00'], ['batchSize', '100']] })],
    ['POST /console/campaigns/:id/pause', e({ id: a.scheduleCampaign! }, { foreign: { id: b.campaign! } })],
    ['POST /console/campaigns/:id/resume', e({ id: a.scheduleCampaign! }, { foreign: { id: b.campaign! } })],
    ['POST /console/campaigns/:id/delete', e({ id: a.doomedCampaign! }, { foreign: { id: b.campaign! } })],
    ['GET /console/suppressions', e({}, { query: [['q', 'alpha'], ['reason', 'manual'], ['page', '1']] })],
    ['POST /console/suppressions', e({}, { form: [['email', 'blocked@example.org']] })],
    ['POST /console/suppressions/remove', e({}, { form: [['email', a.suppressed!]] })],
    ['GET /console/webhooks', e({})],
    ['POST /console/webhooks', e({}, { form: [['url', 'http://127.0.0.1:9/new'], ['description', 'New hook'], ['eventTypes', 'email.sent'], ['eventTypes', 'email.bounced']] })],
    ['GET /console/webhooks/:id', e({ id: a.webhook! }, { foreign: { id: b.webhook! }, query: [['watch', '1']] })],
    ['POST /console/webhooks/:id/test', e({ id: a.webhook! }, { foreign: { id: b.webhook! } })],
    // ACTIVE: re-enabling an active endpoint changes nothing, so the other examples keep theirs.
    ['POST /console/webhooks/:id/status', e({ id: a.webhook! }, { foreign: { id: b.webhook! }, form: [['status', 'ACTIVE']] })],
    ['POST /console/webhooks/:id/rotate', e({ id: a.webhook! }, { foreign: { id: b.webhook! } })],
    ['POST /console/webhooks/:id/delete', e({ id: a.doomedWebhook! }, { foreign: { id: b.webhook! } })],
    ['GET /console/received', e({}, { query: [['domainId', a.inbox!], ['page', '1']] })],
    ['GET /console/received/:id', e({ id: a.received! }, { foreign: { id: b.received! }, query: [['images', '1']] })],
    ['GET /console/received/:id/body.html', e({ id: a.received! }, { foreign: { id: b.received! } })],
    ['GET /console/received/:id/raw.eml', e({ id: a.received! }, { foreign: { id: b.received! } })],
    ['GET /console/account', e({})],
    ['POST /console/account/password', e({}, { form: [['username', 'member@fuzz-a.dev'], ['currentPassword', PASSWORD], ['newPassword', PASSWORD], ['confirmPassword', PASSWORD]] })],
    ['GET /console/operator/teams', e({}, { actor: 'operator' })],
    ['POST /console/operator/teams', e({}, { actor: 'operator', form: [['name', 'Team gamma'], ['rateLimit', '50']] })],
    ['POST /console/operator/teams/:id', e({ id: String(t0.teamId) }, { actor: 'operator', form: [['name', 'Team alpha'], ['rateLimit', '']] })],
    ['GET /console/operator/queue', e({}, { actor: 'operator' })],
    ['GET /console/operator/queue/destinations/:destination', e({ destination: 'example.net' }, { actor: 'operator' })],
    ['POST /console/operator/queue/suspensions', e({}, { actor: 'operator', form: [['destination', 'paused.example'], ['minutes', '30'], ['reason', 'maintenance']] })],
    ['POST /console/operator/queue/suspensions/:id/resume', e({ id: suspension.id }, { actor: 'operator' })],
    ['POST /console/operator/queue/destinations/:destination/retry', e({ destination: 'example.net' }, { actor: 'operator' })],
    ['POST /console/operator/queue/destinations/:destination/bounce', e({ destination: 'bounce-me.example' }, { actor: 'operator', form: [['reason', 'mailbox gone']] })],
    ['POST /console/operator/queue/deliveries/:id/retry', e({ id: deliveryOf('alpha-rcpt@example.net') }, { actor: 'operator' })],
    ['POST /console/operator/queue/deliveries/:id/give-up', e({ id: deliveryOf('give-up@example.net') }, { actor: 'operator' })],
  ]);
  return { member, operator, loginEmail, teamB, a, b, examples };
}
