import type { TestResponse } from '../../helpers/test-app.js';
import type { Ids, IsolationWorld } from './isolation-world.js';
import type { Made, Probe, ProbeEnv, Req, RouteCase } from './probe-runner.js';

// The isolation table: one entry per API route, keyed `${method} ${path}`. A route without an
// entry fails the suite, so a new endpoint cannot ship without saying who may touch what.
//
// cross(): team B's key against team A's ids (victim = A's first domain, me = B's first domain).
// restricted(): A's key bound to its first domain (me) against A's second domain (victim).
// sending(): A's SENDING key on the email routes (every other route must answer 403).
//
// What a domain-bound key may do (architecture.md, Decisions: API keys): it sends only from its domain
// and sees only its domain's emails, received mail, domain, webhooks, analytics and API keys;
// templates, contact books, contacts, segments, suppressions and campaigns are the team's,
// except that nothing it configures may send from another domain (campaign from, double
// opt-in sender, scheduling or resuming another domain's campaign).

type Step = Omit<Probe, 'label' | 'req' | 'expect'>;
const probe = (label: string, expect: Probe['expect'], req: (v: Ids, me: Ids, made: Made) => Req, more: Step = {}): Probe => ({ label, expect, req, ...more });
const get = (path: string): Req => ({ method: 'GET', path });
const post = (path: string, body?: unknown): Req => ({ method: 'POST', path, body });
const patch = (path: string, body: unknown): Req => ({ method: 'PATCH', path, body });
const put = (path: string, body: unknown): Req => ({ method: 'PUT', path, body });
const del = (path: string, body?: unknown): Req => ({ method: 'DELETE', path, body });

const doc = (text: string) => JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text }] }] });
const mail = (domain: string, extra: Record<string, unknown> = {}) => ({ from: `Probe <news@${domain}>`, to: 'probe-rcpt@example.org', subject: 'isolation probe', text: 'probe', ...extra });
const campaignBody = (from: string, bookId: string, extra: Record<string, unknown> = {}) => ({ name: 'probe campaign', from: `news@${from}`, subject: 'probe subject', contactBookId: bookId, content: doc('probe body'), ...extra });
const filters = { match: 'all', conditions: [{ field: 'email', op: 'contains', value: 'probe' }] };

/** Deletes what a 200 answer made (the probe's own object), by id. */
const cleanUp = (path: (id: string) => string, pick: (b: any) => string = (b) => b.id) => async (env: ProbeEnv, o: { res: TestResponse; control?: TestResponse }) => {
  for (const r of [o.res, o.control]) if (r?.status === 200) await env.as(env.role.key, del(path(pick(r.body))));
};

export function isolationCases(world: IsolationWorld): Record<string, RouteCase> {
  const { a } = world;
  const fullA = a.keys.full.token;
  const hook = `http://127.0.0.1:${world.receiver.port}/probe-hook`;
  const inDays = (n: number) => new Date(world.clock.nowMs() + n * 86_400_000).toISOString();
  const setup = (env: ProbeEnv, req: Req) => env.as(fullA, req);

  // Analytics: B's numbers must be B's own (A delivered more, so a mix-up shows); a bound key's
  // numbers must be its domain's.
  const deliveredOf = async (env: ProbeEnv, key: string, domainId?: number) => {
    let delivered = 0;
    for (let page = 1; ; page++) {
      const list = await env.as(key, get(`/emails?limit=100&page=${page}${domainId ? `&domainId=${domainId}` : ''}`));
      delivered += (list.data as any[]).filter((e) => ['DELIVERED', 'OPENED', 'CLICKED'].includes(e.latestStatus)).length;
      if (page * 100 >= list.count) return delivered;
    }
  };
  const analyticsCheck = (pick: (body: any) => number) => async (res: TestResponse, env: ProbeEnv) => {
    if (env.role.teamId === world.b.teamId) {
      env.t.is(pick(res.body), await deliveredOf(env, world.b.keys.full.token), `[${env.role.name}] analytics are team B's own`);
      env.t.not(pick(res.body), await deliveredOf(env, fullA), "A's total differs, so a mix-up would show");
    } else {
      env.t.is(pick(res.body), await deliveredOf(env, fullA, env.role.me.domainId), `[${env.role.name}] analytics are the key's domain's only`);
      env.t.not(pick(res.body), await deliveredOf(env, fullA), 'the team total differs, so the check can fail');
    }
  };
  const settleFirst = async (env: ProbeEnv) => {
    await env.world.settle();
  };

  const cases: Record<string, RouteCase> = {
    // ---------------------------------------------------------------- API keys
    'GET /apiKeys': {
      cross: () => [
        probe('list', 'clean', () => get('/apiKeys'), {
          check: (res, env) => env.t.false((res.body as any[]).some((k) => [a.keys.full.id, a.keys.sending.id, a.keys.d1.id, a.keys.d2.id].includes(k.id)), 'no key of team A'),
        }),
      ],
      restricted: () => [
        probe('list shows only keys bound to its domain', 'ok', () => get('/apiKeys'), {
          check: (res, env) => {
            const keys = res.body as any[];
            env.t.true(keys.some((k) => k.id === env.role.me.keyId), 'its own key is listed');
            env.t.true(keys.every((k) => k.domainId === env.role.me.domainId), `only keys of domain ${env.role.me.domainId}: ${JSON.stringify(keys.map((k) => [k.id, k.domainId]))}`);
          },
        }),
      ],
    },
    'POST /apiKeys': {
      cross: () => [probe("a key bound to A's domain", 'refused', (v) => post('/apiKeys', { name: 'probe-key', permission: 'FULL', domainId: v.domainId }), { control: true, after: cleanUp((id) => `/apiKeys/${id}`) })],
      restricted: () => [
        probe('a key bound to another domain', 'forbidden', (v) => post('/apiKeys', { name: 'probe-key', domainId: v.domainId })),
        probe('an unrestricted key (domainId null)', 'forbidden', () => post('/apiKeys', { name: 'probe-key', permission: 'FULL', domainId: null })),
        probe('without domainId: bound to its own domain', 'ok', () => post('/apiKeys', { name: 'probe-key', permission: 'FULL' }), {
          check: (res, env) => env.t.is(res.body.domainId, env.role.me.domainId, 'the new key inherits the domain'),
          after: cleanUp((id) => `/apiKeys/${id}`),
        }),
      ],
    },
    'DELETE /apiKeys/:apiKeyId': {
      cross: () => [
        probe("A's FULL key", 'hidden', (v) => del(`/apiKeys/${v.fullKeyId}`)),
        probe("A's SENDING key", 'hidden', (v) => del(`/apiKeys/${v.sendingKeyId}`)),
        probe("A's domain-bound key", 'hidden', (v) => del(`/apiKeys/${v.keyId}`)),
      ],
      restricted: () => [
        probe("the team's unrestricted key", 'hidden', (v) => del(`/apiKeys/${v.fullKeyId}`)),
        probe('a key bound to another domain', 'hidden', (v) => del(`/apiKeys/${v.keyId}`)),
        probe('a key bound to its own domain', 'ok', (_v, _me, m) => del(`/apiKeys/${m.id}`), {
          before: async (env) => setup(env, post('/apiKeys', { name: 'probe-own', domainId: env.role.me.domainId })),
        }),
      ],
    },

    // ---------------------------------------------------------------- domains
    'GET /domains': {
      cross: () => [probe('list', 'clean', () => get('/domains'), { check: (res, env) => env.t.false((res.body as any[]).some((d) => [a.d1.domainId, a.d2.domainId].includes(d.id)), 'no domain of A') })],
      restricted: () => [probe('list shows its domain only', 'ok', () => get('/domains'), { check: (res, env) => env.t.deepEqual((res.body as any[]).map((d) => d.id), [env.role.me.domainId]) })],
    },
    'POST /domains': {
      cross: () => [
        probe("adding A's domain name makes B's own unverified domain", 'ok', (v) => post('/domains', { name: v.domainName, region: 'probe' }), {
          late: true,
          check: async (res, env) => {
            env.t.is(res.body.teamId, world.b.teamId);
            env.t.not(res.body.id, a.d1.domainId);
            env.t.not(res.body.status, 'SUCCESS', "A's verification does not carry over");
            env.t.false(a.markers.includes(res.body.publicKey), "not A's DKIM key");
            // A's published records (its DKIM key) must not verify B's copy of the name.
            await env.call(put(`/domains/${res.body.id}/verify`, undefined), "verify B's copy against A's DNS", res.body.name);
            const again = await env.call(get(`/domains/${res.body.id}`), "B's copy after verify", res.body.name);
            env.t.not(again.body.status, 'SUCCESS', "B cannot verify A's domain with A's DNS records");
            env.t.is(again.body.dkimStatus, 'FAILED', "A's DKIM record is found but carries another key");
            const send = await env.call(post('/emails', mail(res.body.name)), "send from B's unverified copy", res.body.name);
            env.t.is(send.status, 403, 'no sending from the unverified copy');
          },
          after: cleanUp((id) => `/domains/${id}`),
        }),
      ],
      restricted: () => [probe('a bound key cannot add domains', 'forbidden', () => post('/domains', { name: 'probe-new.dev', region: 'probe' }))],
    },
    'GET /domains/:id': {
      cross: () => [probe("A's domain", 'hidden', (v) => get(`/domains/${v.domainId}`)), probe("A's second domain", 'hidden', () => get(`/domains/${a.d2.domainId}`))],
      restricted: () => [probe('another domain', 'hidden', (v) => get(`/domains/${v.domainId}`)), probe('its own domain', 'ok', (_v, me) => get(`/domains/${me.domainId}`))],
    },
    'PUT /domains/:id/verify': {
      cross: () => [probe("A's domain", 'hidden', (v) => put(`/domains/${v.domainId}/verify`, undefined))],
      restricted: () => [probe('another domain', 'hidden', (v) => put(`/domains/${v.domainId}/verify`, undefined)), probe('its own domain', 'ok', (_v, me) => put(`/domains/${me.domainId}/verify`, undefined))],
    },
    'PATCH /domains/:id': {
      cross: () => [
        probe("A's domain: tracking", 'hidden', (v) => patch(`/domains/${v.domainId}`, { clickTracking: true })),
        probe("A's domain: receiving off", 'hidden', (v) => patch(`/domains/${v.domainId}`, { receiving: false })),
      ],
      restricted: () => [
        probe('another domain', 'hidden', (v) => patch(`/domains/${v.domainId}`, { receiving: false })),
        probe('its own domain', 'ok', (_v, me) => patch(`/domains/${me.domainId}`, { clickTracking: false })),
      ],
    },
    'DELETE /domains/:id': {
      cross: () => [probe("A's domain", 'hidden', (v) => del(`/domains/${v.domainId}`)), probe("A's second domain", 'hidden', () => del(`/domains/${a.d2.domainId}`))],
      restricted: () => [probe('another domain', 'hidden', (v) => del(`/domains/${v.domainId}`))],
    },

    // ---------------------------------------------------------------- emails
    'POST /emails': {
      cross: () => [
        probe("from A's domain", 'refused', (v) => post('/emails', mail(v.domainName)), { control: true }),
        probe("with A's template", 'refused', (v, me) => post('/emails', mail(me.domainName, { templateId: v.templateId })), { control: true }),
        probe("in reply to A's email", 'refused', (v, me) => post('/emails', mail(me.domainName, { inReplyToId: v.emailId })), { control: true }),
        // Idempotency keys are per team: A's key is unknown to B (no replay of A's answer, no 409).
        probe("with an Idempotency-Key A has used", 'ok', (_v, me) => ({ ...post('/emails', mail(me.domainName)), headers: { 'idempotency-key': a.idempotency.key } }), {
          check: (res, env) => env.t.not(res.body.emailId, a.idempotency.emailId),
        }),
      ],
      sending: () => [
        probe('send', 'ok', (_v, me) => post('/emails', mail(me.domainName))),
        probe('send with a template, in reply to an email', 'ok', (_v, me) => post('/emails', mail(me.domainName, { templateId: me.templateId, inReplyToId: me.emailId }))),
      ],
      restricted: () => [
        probe('from another domain of the team', 'forbidden', (v) => post('/emails', mail(v.domainName))),
        probe("in reply to another domain's email", 'refused', (v, me) => post('/emails', mail(me.domainName, { inReplyToId: v.emailId })), { control: true }),
        probe("with the team's template", 'ok', (_v, me) => post('/emails', mail(me.domainName, { templateId: me.templateId }))),
      ],
    },
    'POST /emails/batch': {
      cross: () => [
        probe("one item from A's domain", 'refused', (v, me) => post('/emails/batch', [mail(me.domainName), mail(v.domainName)]), { control: true }),
        probe("one item with A's template", 'refused', (v, me) => post('/emails/batch', [mail(me.domainName), mail(me.domainName, { templateId: v.templateId })]), { control: true }),
        probe("one item in reply to A's email", 'refused', (v, me) => post('/emails/batch', [mail(me.domainName, { inReplyToId: v.emailId })]), { control: true }),
        probe("with an Idempotency-Key A has used", 'ok', (_v, me) => ({ ...post('/emails/batch', [mail(me.domainName)]), headers: { 'idempotency-key': a.idempotency.batchKey } }), {
          check: (res, env) => env.t.not(res.body.data[0].emailId, a.idempotency.batchEmailId),
        }),
      ],
      sending: () => [probe('batch', 'ok', (_v, me) => post('/emails/batch', [mail(me.domainName), mail(me.domainName, { templateId: me.templateId })]))],
      restricted: () => [
        probe('one item from another domain', 'forbidden', (v, me) => post('/emails/batch', [mail(me.domainName), mail(v.domainName)]), {
          // All or nothing: the valid first item was not sent either.
          before: async (env) => ({ count: (await env.as(fullA, get('/emails?limit=1'))).count }),
          check: async (_res, env, m) => env.t.is((await env.as(fullA, get('/emails?limit=1'))).count, m.count, 'nothing of the refused batch was sent'),
        }),
        probe('every item from its domain', 'ok', (_v, me) => post('/emails/batch', [mail(me.domainName)])),
      ],
    },
    'GET /emails': {
      cross: () => [
        probe('list', 'clean', () => get('/emails?limit=100'), { check: (res, env) => env.t.true(res.body.count > 0, 'B sees its own emails') }),
        probe("filtered by A's domain", 'clean', (v) => get(`/emails?domainId=${v.domainId}`), { check: (res, env) => env.t.deepEqual([res.body.data, res.body.count], [[], 0]) }),
        probe("filtered by A's tag", 'clean', () => get('/emails?tag=acme-tag'), { check: (res, env) => env.t.deepEqual([res.body.data, res.body.count], [[], 0]) }),
      ],
      sending: () => [
        probe('list', 'ok', () => get('/emails?limit=100'), {
          check: (res, env) => {
            const ids = (res.body.data as any[]).map((e) => e.id);
            env.t.true(ids.includes(a.d1.emailId) && ids.includes(a.d2.emailId), 'the team’s emails of every domain');
          },
        }),
      ],
      restricted: () => [
        probe('list shows its domain only', 'ok', () => get('/emails?limit=100'), {
          check: (res, env) => {
            const data = res.body.data as any[];
            env.t.true(data.some((e) => e.id === env.role.me.emailId), 'its domain’s email is listed');
            env.t.true(data.every((e) => e.domainId === env.role.me.domainId), 'nothing from another domain');
          },
        }),
        probe('filtered by another domain', 'ok', (v) => get(`/emails?domainId=${v.domainId}`), { check: (res, env) => env.t.deepEqual([res.body.data, res.body.count], [[], 0]) }),
      ],
    },
    'GET /emails/:emailId': {
      cross: () => [probe("A's delivered email", 'hidden', (v) => get(`/emails/${v.emailId}`)), probe("A's scheduled email", 'hidden', (v) => get(`/emails/${v.scheduledEmailId}`))],
      sending: () => [probe("the team's email", 'ok', (_v, me) => get(`/emails/${me.emailId}`))],
      restricted: () => [probe("another domain's email", 'hidden', (v) => get(`/emails/${v.emailId}`)), probe("its domain's email", 'ok', (_v, me) => get(`/emails/${me.emailId}`))],
    },
    'PATCH /emails/:emailId': {
      cross: () => [probe("reschedule A's email", 'hidden', (v) => patch(`/emails/${v.scheduledEmailId}`, { scheduledAt: inDays(5) }))],
      sending: () => [
        probe('reschedule', 'ok', (_v, _me, m) => patch(`/emails/${m.emailId}`, { scheduledAt: inDays(4) }), {
          before: async (env) => env.as(env.role.key, post('/emails', mail(env.role.me.domainName, { scheduledAt: inDays(3) }))),
        }),
      ],
      restricted: () => [
        probe("reschedule another domain's email", 'hidden', (v) => patch(`/emails/${v.scheduledEmailId}`, { scheduledAt: inDays(5) })),
        probe("reschedule its domain's email", 'ok', (_v, me) => patch(`/emails/${me.scheduledEmailId}`, { scheduledAt: inDays(2) })),
      ],
    },
    'POST /emails/:emailId/cancel': {
      cross: () => [probe("cancel A's email", 'hidden', (v) => post(`/emails/${v.scheduledEmailId}/cancel`))],
      sending: () => [
        probe('cancel', 'ok', (_v, _me, m) => post(`/emails/${m.emailId}/cancel`), {
          before: async (env) => env.as(env.role.key, post('/emails', mail(env.role.me.domainName, { scheduledAt: inDays(3) }))),
          check: async (_res, env, m) => env.t.is((await env.as(fullA, get(`/emails/${m.emailId}`))).latestStatus, 'CANCELLED'),
        }),
      ],
      restricted: () => [
        probe("cancel another domain's email", 'hidden', (v) => post(`/emails/${v.scheduledEmailId}/cancel`), {
          check: async (_res, env) => env.t.is((await env.as(fullA, get(`/emails/${env.role.victim.scheduledEmailId}`))).latestStatus, 'SCHEDULED'),
        }),
        probe("cancel its domain's email", 'ok', (_v, _me, m) => post(`/emails/${m.emailId}/cancel`), {
          before: async (env) => env.as(env.role.key, post('/emails', mail(env.role.me.domainName, { scheduledAt: inDays(3) }))),
        }),
      ],
    },

    // ---------------------------------------------------------------- templates (team-wide)
    'GET /templates': {
      cross: () => [probe('list', 'clean', () => get('/templates?limit=100')), probe("search for A's name", 'clean', () => get('/templates?search=acme'))],
      restricted: () => [probe('list (team-wide)', 'ok', () => get('/templates?limit=100'), { markers: false, check: (res, env) => env.t.true((res.body.templates as any[]).some((x) => x.id === env.role.me.templateId)) })],
    },
    'POST /templates': {
      cross: () => [
        probe("a template named like A's is B's own", 'ok', () => post('/templates', { name: 'acme template', subject: 'x' }), {
          late: true,
          check: (res, env) => env.t.not(res.body.id, a.d1.templateId),
          after: cleanUp((id) => `/templates/${id}`),
        }),
      ],
      restricted: () => [probe('create', 'ok', () => post('/templates', { name: 'probe template', subject: 'x' }), { markers: false, after: cleanUp((id) => `/templates/${id}`) })],
    },
    'GET /templates/:templateId': {
      cross: () => [probe("A's template", 'hidden', (v) => get(`/templates/${v.templateId}`))],
      restricted: () => [probe("the team's template", 'ok', (v) => get(`/templates/${v.templateId}`), { markers: false })],
    },
    'PATCH /templates/:templateId': {
      cross: () => [probe("A's template", 'hidden', (v) => patch(`/templates/${v.templateId}`, { name: 'taken over' }))],
      restricted: () => [probe("the team's template", 'ok', (v) => patch(`/templates/${v.templateId}`, { name: 'acme template' }), { markers: false })],
    },
    'DELETE /templates/:templateId': {
      cross: () => [probe("A's template", 'hidden', (v) => del(`/templates/${v.templateId}`))],
      restricted: () => [
        probe('a template of the team', 'ok', (_v, _me, m) => del(`/templates/${m.id}`), { markers: false, before: (env) => setup(env, post('/templates', { name: 'probe doomed', subject: 'x' })) }),
      ],
    },
    'POST /templates/:templateId/duplicate': {
      cross: () => [probe("A's template", 'hidden', (v) => post(`/templates/${v.templateId}/duplicate`))],
      restricted: () => [probe("the team's template", 'ok', (v) => post(`/templates/${v.templateId}/duplicate`), { markers: false, after: cleanUp((id) => `/templates/${id}`) })],
    },
    'POST /templates/:templateId/publish': {
      cross: () => [probe("A's template", 'hidden', (v) => post(`/templates/${v.templateId}/publish`))],
      restricted: () => [probe("the team's template", 'ok', (v) => post(`/templates/${v.templateId}/publish`), { markers: false })],
    },
    'GET /templates/:templateId/versions': {
      cross: () => [probe("A's template", 'hidden', (v) => get(`/templates/${v.templateId}/versions`))],
      restricted: () => [probe("the team's template", 'ok', (v) => get(`/templates/${v.templateId}/versions`), { markers: false })],
    },
    'POST /templates/:templateId/rollback': {
      cross: () => [probe("A's template", 'hidden', (v) => post(`/templates/${v.templateId}/rollback`, { versionNumber: 1 }))],
      restricted: () => [probe("the team's template", 'ok', (v) => post(`/templates/${v.templateId}/rollback`, { versionNumber: 2 }), { markers: false })],
    },

    // ---------------------------------------------------------------- campaigns
    'POST /campaigns': {
      cross: () => [
        probe("to A's contact book", 'refused', (v, me) => post('/campaigns', campaignBody(me.domainName, v.bookId)), { control: true, after: cleanUp((id) => `/campaigns/${id}`) }),
        probe("from A's domain", 'refused', (v, me) => post('/campaigns', campaignBody(v.domainName, me.bookId)), { control: true, after: cleanUp((id) => `/campaigns/${id}`) }),
        probe("with A's segment", 'refused', (v, me) => post('/campaigns', campaignBody(me.domainName, me.bookId, { segmentId: v.segmentId })), { control: true, after: cleanUp((id) => `/campaigns/${id}`) }),
      ],
      restricted: () => [
        probe('from another domain', 'forbidden', (v, me) => post('/campaigns', campaignBody(v.domainName, me.bookId))),
        probe('sent now from another domain', 'forbidden', (v, me) => post('/campaigns', campaignBody(v.domainName, me.bookId, { sendNow: true }))),
        probe('from its domain', 'ok', (_v, me) => post('/campaigns', campaignBody(me.domainName, me.bookId)), { markers: false, after: cleanUp((id) => `/campaigns/${id}`) }),
      ],
    },
    'GET /campaigns': {
      cross: () => [probe('list', 'clean', () => get('/campaigns?limit=100')), probe("search for A's name", 'clean', () => get('/campaigns?search=acme'))],
      restricted: () => [probe('list (team-wide)', 'ok', () => get('/campaigns?limit=100'), { markers: false })],
    },
    'GET /campaigns/:campaignId': {
      cross: () => [probe("A's draft", 'hidden', (v) => get(`/campaigns/${v.campaignId}`)), probe("A's running campaign", 'hidden', () => get(`/campaigns/${a.d2.campaignId}`))],
      restricted: () => [probe("another domain's campaign (team-wide read)", 'ok', (v) => get(`/campaigns/${v.campaignId}`), { markers: false })],
    },
    'PATCH /campaigns/:campaignId': {
      cross: () => [
        probe("A's draft", 'hidden', (v) => patch(`/campaigns/${v.campaignId}`, { name: 'taken over' })),
        probe("B's draft pointed at A's contact book", 'refused', (v, me) => patch(`/campaigns/${me.campaignId}`, { contactBookId: v.bookId, segmentId: null }), { control: true }),
        probe("B's draft sent from A's domain", 'refused', (v, me) => patch(`/campaigns/${me.campaignId}`, { from: `news@${v.domainName}` }), { control: true }),
        probe("B's draft with A's segment", 'refused', (v, me) => patch(`/campaigns/${me.campaignId}`, { segmentId: v.segmentId }), {
          control: true,
          after: async (env) => void (await env.as(env.role.key, patch(`/campaigns/${env.role.me.campaignId}`, { segmentId: null }))),
        }),
      ],
      restricted: () => [
        probe('its draft sent from another domain', 'forbidden', (v, me) => patch(`/campaigns/${me.campaignId}`, { from: `news@${v.domainName}` })),
        probe('its draft renamed', 'ok', (_v, me) => patch(`/campaigns/${me.campaignId}`, { name: 'acme campaign' }), { markers: false }),
      ],
    },
    'DELETE /campaigns/:campaignId': {
      cross: () => [probe("A's draft", 'hidden', (v) => del(`/campaigns/${v.campaignId}`)), probe("A's running campaign", 'hidden', () => del(`/campaigns/${a.d2.campaignId}`))],
      restricted: () => [
        probe('a draft of the team', 'ok', (_v, _me, m) => del(`/campaigns/${m.id}`), { markers: false, before: (env) => setup(env, post('/campaigns', campaignBody(env.role.me.domainName, env.role.me.bookId))) }),
      ],
    },
    'POST /campaigns/:campaignId/schedule': {
      cross: () => [probe("A's draft", 'hidden', (v) => post(`/campaigns/${v.campaignId}/schedule`, { scheduledAt: inDays(30) }))],
      restricted: () => [
        probe("another domain's draft", 'forbidden', (_v, _me, m) => post(`/campaigns/${m.id}/schedule`, { scheduledAt: inDays(30) }), {
          before: (env) => setup(env, post('/campaigns', campaignBody(env.role.victim.domainName, env.role.me.bookId))),
          after: async (env, o) => {
            env.t.is((await env.as(fullA, get(`/campaigns/${o.made.id}`))).status, 'DRAFT', 'still a draft');
            await env.as(fullA, del(`/campaigns/${o.made.id}`));
          },
        }),
        probe('its own draft', 'ok', (_v, _me, m) => post(`/campaigns/${m.id}/schedule`, { scheduledAt: inDays(30) }), {
          markers: false,
          before: (env) => setup(env, post('/campaigns', campaignBody(env.role.me.domainName, env.role.me.bookId))),
          after: async (env, o) => void (await env.as(fullA, del(`/campaigns/${o.made.id}`))),
        }),
      ],
    },
    'POST /campaigns/:campaignId/pause': {
      cross: () => [probe("A's running campaign", 'hidden', () => post(`/campaigns/${a.d2.campaignId}/pause`))],
      restricted: () => [
        // Pausing sends nothing: a campaign is the team's.
        probe("another domain's running campaign", 'ok', (v) => post(`/campaigns/${v.campaignId}/pause`), {
          markers: false,
          after: async (env) => void (await env.as(fullA, post(`/campaigns/${env.role.victim.campaignId}/resume`))),
        }),
      ],
    },
    'POST /campaigns/:campaignId/resume': {
      cross: () => [probe("A's campaign", 'hidden', () => post(`/campaigns/${a.d2.campaignId}/resume`))],
      restricted: () => [
        // Resuming would send from the other domain.
        probe("another domain's paused campaign", 'forbidden', (v) => post(`/campaigns/${v.campaignId}/resume`), {
          before: async (env) => void (await env.as(fullA, post(`/campaigns/${env.role.victim.campaignId}/pause`))),
          after: async (env) => {
            env.t.is((await env.as(fullA, get(`/campaigns/${env.role.victim.campaignId}`))).status, 'PAUSED', 'still paused');
            await env.as(fullA, post(`/campaigns/${env.role.victim.campaignId}/resume`));
          },
        }),
        probe('its own paused campaign', 'ok', (_v, _me, m) => post(`/campaigns/${m.id}/resume`), {
          markers: false,
          before: async (env) => {
            const c = await setup(env, post('/campaigns', campaignBody(env.role.me.domainName, env.role.me.bookId, { sendNow: true, batchSize: 1 })));
            await env.world.w.t0.app.runCampaigns();
            await env.as(fullA, post(`/campaigns/${c.id}/pause`));
            return c;
          },
          after: async (env, o) => {
            await env.as(fullA, post(`/campaigns/${o.made.id}/pause`));
            await env.world.settle();
          },
        }),
      ],
    },

    // ---------------------------------------------------------------- contact books
    'GET /contactBooks': {
      cross: () => [probe('list', 'clean', () => get('/contactBooks'))],
      restricted: () => [probe('list (team-wide)', 'ok', () => get('/contactBooks'), { markers: false })],
    },
    'POST /contactBooks': {
      cross: () => [
        probe("double opt-in from A's domain", 'refused', (v) => post('/contactBooks', { name: 'probe book', doubleOptInEnabled: true, doubleOptInFrom: `c@${v.domainName}` }), {
          control: true,
          after: cleanUp((id) => `/contactBooks/${id}`),
        }),
      ],
      restricted: () => [
        probe('double opt-in from another domain', 'forbidden', (v) => post('/contactBooks', { name: 'probe book', doubleOptInEnabled: true, doubleOptInFrom: `c@${v.domainName}` })),
        probe('double opt-in from its domain', 'ok', (_v, me) => post('/contactBooks', { name: 'probe book', doubleOptInEnabled: true, doubleOptInFrom: `c@${me.domainName}` }), {
          markers: false,
          after: cleanUp((id) => `/contactBooks/${id}`),
        }),
      ],
    },
    'GET /contactBooks/:contactBookId': {
      cross: () => [probe("A's book", 'hidden', (v) => get(`/contactBooks/${v.bookId}`)), probe("A's double opt-in book", 'hidden', (v) => get(`/contactBooks/${v.doiBookId}`))],
      restricted: () => [probe("another domain's double opt-in book (team-wide read)", 'ok', (v) => get(`/contactBooks/${v.doiBookId}`), { markers: false })],
    },
    'PATCH /contactBooks/:contactBookId': {
      cross: () => [
        probe("A's book", 'hidden', (v) => patch(`/contactBooks/${v.bookId}`, { name: 'taken over' })),
        probe("B's book with A's domain as sender", 'refused', (v, me) => patch(`/contactBooks/${me.bookId}`, { doubleOptInFrom: `c@${v.domainName}` }), {
          control: true,
          after: async (env) => void (await env.as(env.role.key, patch(`/contactBooks/${env.role.me.bookId}`, { doubleOptInFrom: null }))),
        }),
      ],
      restricted: () => [
        probe('sender moved to another domain', 'forbidden', (v, me) => patch(`/contactBooks/${me.doiBookId}`, { doubleOptInFrom: `c@${v.domainName}` })),
        probe("the team's book renamed", 'ok', (v) => patch(`/contactBooks/${v.bookId}`, { name: 'acme book' }), { markers: false }),
      ],
    },
    'DELETE /contactBooks/:contactBookId': {
      cross: () => [probe("A's book", 'hidden', (v) => del(`/contactBooks/${v.bookId}`))],
      restricted: () => [probe('a book of the team', 'ok', (_v, _me, m) => del(`/contactBooks/${m.id}`), { markers: false, before: (env) => setup(env, post('/contactBooks', { name: 'probe doomed' })) })],
    },

    // ---------------------------------------------------------------- contacts
    'POST /contactBooks/:contactBookId/contacts': {
      cross: () => [probe("into A's book", 'hidden', (v) => post(`/contactBooks/${v.bookId}/contacts`, { email: 'probe-new@example.net' }))],
      restricted: () => [
        probe("into a book confirming from another domain", 'forbidden', (v) => post(`/contactBooks/${v.doiBookId}/contacts`, { email: 'probe-new@example.net' }), {
          check: async (_res, env) => env.t.deepEqual(await env.as(fullA, get(`/contactBooks/${env.role.victim.doiBookId}/contacts`)), [], 'nothing written'),
        }),
        probe('into a book confirming from its domain', 'ok', (_v, me) => post(`/contactBooks/${me.doiBookId}/contacts`, { email: 'probe-new@example.net' }), {
          markers: false,
          after: cleanUp((id) => `/contactBooks/${a.d1.doiBookId}/contacts/${id}`, (b) => b.contactId),
        }),
      ],
    },
    'GET /contactBooks/:contactBookId/contacts': {
      cross: () => [
        probe("A's book", 'hidden', (v) => get(`/contactBooks/${v.bookId}/contacts`)),
        probe("B's book filtered by A's contact id", 'ghostEqual', (v, me) => get(`/contactBooks/${me.bookId}/contacts?ids=${v.contactId}`)),
        probe("B's book filtered by A's contact address", 'ghostEqual', (v, me) => get(`/contactBooks/${me.bookId}/contacts?emails=${v.contactEmail}`)),
      ],
      restricted: () => [probe("the team's book", 'ok', (v) => get(`/contactBooks/${v.bookId}/contacts`), { markers: false })],
    },
    'POST /contactBooks/:contactBookId/contacts/bulk': {
      cross: () => [probe("into A's book", 'hidden', (v) => post(`/contactBooks/${v.bookId}/contacts/bulk`, [{ email: 'probe-bulk@example.net' }]))],
      restricted: () => [
        probe('into a book confirming from another domain', 'forbidden', (v) => post(`/contactBooks/${v.doiBookId}/contacts/bulk`, [{ email: 'probe-bulk@example.net' }])),
        probe("into the team's book", 'ok', (v) => post(`/contactBooks/${v.bookId}/contacts/bulk`, [{ email: 'probe-bulk@example.net' }]), {
          markers: false,
          after: async (env) => {
            const [c] = await env.as(fullA, get(`/contactBooks/${a.d1.bookId}/contacts?emails=probe-bulk@example.net`));
            await env.as(fullA, del(`/contactBooks/${a.d1.bookId}/contacts/${c.id}`));
          },
        }),
      ],
    },
    'DELETE /contactBooks/:contactBookId/contacts/bulk': {
      cross: () => [
        probe("A's contacts in A's book", 'hidden', (v) => del(`/contactBooks/${v.bookId}/contacts/bulk`, { contactIds: [v.contactId] })),
        probe("A's contacts through B's book", 'ghostEqual', (v, me) => del(`/contactBooks/${me.bookId}/contacts/bulk`, { contactIds: [v.contactId] }), {
          check: (res, env) => env.t.deepEqual(res.body, { success: true, count: 0 }),
        }),
      ],
      restricted: () => [
        probe("contacts of the team's book", 'ok', (v, _me, m) => del(`/contactBooks/${v.bookId}/contacts/bulk`, { contactIds: [m.contactId] }), {
          markers: false,
          before: (env) => setup(env, post(`/contactBooks/${a.d1.bookId}/contacts`, { email: 'probe-doomed@example.net' })),
          check: (res, env) => env.t.is(res.body.count, 1),
        }),
      ],
    },
    'GET /contactBooks/:contactBookId/contacts/:contactId': {
      cross: () => [probe("A's contact", 'hidden', (v) => get(`/contactBooks/${v.bookId}/contacts/${v.contactId}`)), probe("A's contact through B's book", 'hidden', (v, me) => get(`/contactBooks/${me.bookId}/contacts/${v.contactId}`))],
      restricted: () => [probe("the team's contact", 'ok', (v) => get(`/contactBooks/${v.bookId}/contacts/${v.contactId}`), { markers: false })],
    },
    'PATCH /contactBooks/:contactBookId/contacts/:contactId': {
      cross: () => [
        probe("A's contact", 'hidden', (v) => patch(`/contactBooks/${v.bookId}/contacts/${v.contactId}`, { subscribed: false })),
        probe("A's contact through B's book", 'hidden', (v, me) => patch(`/contactBooks/${me.bookId}/contacts/${v.contactId}`, { subscribed: false })),
      ],
      restricted: () => [probe("the team's contact", 'ok', (v) => patch(`/contactBooks/${v.bookId}/contacts/${v.contactId}`, { firstName: 'acmeFirst' }), { markers: false })],
    },
    'PUT /contactBooks/:contactBookId/contacts/:contactId': {
      cross: () => [
        probe("A's contact", 'hidden', (v) => put(`/contactBooks/${v.bookId}/contacts/${v.contactId}`, { email: v.contactEmail, subscribed: false })),
        probe("A's contact id in B's book makes B's own contact", 'ok', (v, me) => put(`/contactBooks/${me.bookId}/contacts/${v.contactId}`, { email: 'bolt-put@example.net' }), {
          late: true,
          check: (res, env) => env.t.not(res.body.contactId, a.d1.contactId, "never A's contact"),
          after: async (env, o) => cleanUp((id) => `/contactBooks/${env.role.me.bookId}/contacts/${id}`, (b) => b.contactId)(env, o),
        }),
      ],
      restricted: () => [
        probe('a new contact in a book confirming from another domain', 'forbidden', (v) => put(`/contactBooks/${v.doiBookId}/contacts/ct_probe`, { email: 'probe-put@example.net' })),
        probe("the team's contact", 'ok', (v) => put(`/contactBooks/${v.bookId}/contacts/${v.contactId}`, { email: v.contactEmail }), { markers: false }),
      ],
    },
    'DELETE /contactBooks/:contactBookId/contacts/:contactId': {
      cross: () => [probe("A's contact", 'hidden', (v) => del(`/contactBooks/${v.bookId}/contacts/${v.contactId}`)), probe("A's contact through B's book", 'hidden', (v, me) => del(`/contactBooks/${me.bookId}/contacts/${v.contactId}`))],
      restricted: () => [
        probe("a contact of the team's book", 'ok', (v, _me, m) => del(`/contactBooks/${v.bookId}/contacts/${m.contactId}`), {
          markers: false,
          before: (env) => setup(env, post(`/contactBooks/${a.d1.bookId}/contacts`, { email: 'probe-doomed@example.net' })),
        }),
      ],
    },

    // ---------------------------------------------------------------- segments
    'GET /segments': {
      cross: () => [probe('list', 'clean', () => get('/segments?limit=100')), probe("filtered by A's book", 'ghostEqual', (v) => get(`/segments?contactBookId=${v.bookId}`))],
      restricted: () => [probe('list (team-wide)', 'ok', () => get('/segments?limit=100'), { markers: false })],
    },
    'POST /segments': {
      cross: () => [probe("over A's book", 'refused', (v) => post('/segments', { name: 'probe segment', contactBookId: v.bookId, filters }), { control: true, after: cleanUp((id) => `/segments/${id}`) })],
      restricted: () => [probe("over the team's book", 'ok', (v) => post('/segments', { name: 'probe segment', contactBookId: v.bookId, filters }), { markers: false, after: cleanUp((id) => `/segments/${id}`) })],
    },
    'GET /segments/:segmentId': {
      cross: () => [probe("A's segment", 'hidden', (v) => get(`/segments/${v.segmentId}`))],
      restricted: () => [probe("the team's segment", 'ok', (v) => get(`/segments/${v.segmentId}`), { markers: false })],
    },
    'PATCH /segments/:segmentId': {
      cross: () => [probe("A's segment", 'hidden', (v) => patch(`/segments/${v.segmentId}`, { filters: { match: 'all', conditions: [] } }))],
      restricted: () => [probe("the team's segment", 'ok', (v) => patch(`/segments/${v.segmentId}`, { name: 'acme segment' }), { markers: false })],
    },
    'DELETE /segments/:segmentId': {
      cross: () => [probe("A's segment", 'hidden', (v) => del(`/segments/${v.segmentId}`))],
      restricted: () => [
        probe('a segment of the team', 'ok', (_v, _me, m) => del(`/segments/${m.id}`), { markers: false, before: (env) => setup(env, post('/segments', { name: 'probe doomed', contactBookId: a.d1.bookId, filters })) }),
      ],
    },
    'GET /segments/:segmentId/contacts': {
      cross: () => [probe("A's segment", 'hidden', (v) => get(`/segments/${v.segmentId}/contacts`))],
      restricted: () => [probe("the team's segment", 'ok', (v) => get(`/segments/${v.segmentId}/contacts`), { markers: false })],
    },

    // ---------------------------------------------------------------- suppressions
    'GET /suppressions': {
      cross: () => [probe('list', 'clean', () => get('/suppressions?limit=100')), probe("search for A's address", 'ghostEqual', (v) => get(`/suppressions?search=${v.suppressedEmail}`))],
      restricted: () => [probe('list (team-wide)', 'ok', () => get('/suppressions?limit=100'), { markers: false })],
    },
    'POST /suppressions': {
      cross: () => [
        probe("A's suppressed address becomes B's own entry", 'ok', (v) => post('/suppressions', { email: v.suppressedEmail, reason: 'MANUAL' }), {
          late: true,
          after: async (env) => void (await env.as(env.role.key, del(`/suppressions/${a.d1.suppressedEmail}`))),
        }),
      ],
      restricted: () => [probe('add', 'ok', () => post('/suppressions', { email: 'probe-supp@example.net' }), { markers: false, after: async (env) => void (await env.as(fullA, del('/suppressions/probe-supp@example.net'))) })],
    },
    'POST /suppressions/bulk': {
      cross: () => [
        probe("A's address is not already suppressed for B", 'ghostEqual', (v) => post('/suppressions/bulk', { emails: [v.suppressedEmail] }), {
          late: true,
          check: (res, env) => env.t.deepEqual(res.body, { success: true, count: 1, alreadySuppressed: 0 }),
          after: async (env) => void (await env.as(env.role.key, post('/suppressions/bulk/remove', { emails: [a.d1.suppressedEmail, world.ghost.suppressedEmail] }))),
        }),
      ],
      restricted: () => [
        probe('bulk add', 'ok', () => post('/suppressions/bulk', { emails: ['probe-bulk-supp@example.net'] }), {
          markers: false,
          after: async (env) => void (await env.as(fullA, del('/suppressions/probe-bulk-supp@example.net'))),
        }),
      ],
    },
    'POST /suppressions/bulk/remove': {
      cross: () => [probe("A's address", 'ghostEqual', (v) => post('/suppressions/bulk/remove', { emails: [v.suppressedEmail] }), { check: (res, env) => env.t.deepEqual(res.body, { success: true, count: 0 }) })],
      restricted: () => [
        probe('bulk remove', 'ok', () => post('/suppressions/bulk/remove', { emails: ['probe-rm@example.net'] }), {
          markers: false,
          before: (env) => setup(env, post('/suppressions', { email: 'probe-rm@example.net' })),
          check: (res, env) => env.t.is(res.body.count, 1),
        }),
      ],
    },
    'GET /suppressions/:email': {
      cross: () => [probe("A's address", 'hidden', (v) => get(`/suppressions/${v.suppressedEmail}`))],
      restricted: () => [probe("the team's address", 'ok', (v) => get(`/suppressions/${v.suppressedEmail}`), { markers: false })],
    },
    'DELETE /suppressions/:email': {
      cross: () => [probe("A's address", 'hidden', (v) => del(`/suppressions/${v.suppressedEmail}`))],
      restricted: () => [probe('an address of the team', 'ok', () => del('/suppressions/probe-del@example.net'), { markers: false, before: (env) => setup(env, post('/suppressions', { email: 'probe-del@example.net' })) })],
    },

    // ---------------------------------------------------------------- received mail
    'GET /receivedEmails': {
      cross: () => [
        probe('list', 'clean', () => get('/receivedEmails?limit=100'), { check: (res, env) => env.t.true(res.body.total > 0, 'B sees its own') }),
        probe("filtered by A's domain", 'clean', (v) => get(`/receivedEmails?domainId=${v.domainId}`), { check: (res, env) => env.t.deepEqual([res.body.receivedEmails, res.body.total], [[], 0]) }),
      ],
      restricted: () => [
        probe('list shows its domain only', 'ok', () => get('/receivedEmails?limit=100'), { check: (res, env) => env.t.deepEqual((res.body.receivedEmails as any[]).map((r) => r.id), [env.role.me.receivedId]) }),
        probe('filtered by another domain', 'ok', (v) => get(`/receivedEmails?domainId=${v.domainId}`), { check: (res, env) => env.t.deepEqual([res.body.receivedEmails, res.body.total], [[], 0]) }),
      ],
    },
    'GET /receivedEmails/:id': {
      cross: () => [probe("A's received mail", 'hidden', (v) => get(`/receivedEmails/${v.receivedId}`))],
      restricted: () => [probe("another domain's", 'hidden', (v) => get(`/receivedEmails/${v.receivedId}`)), probe('its own', 'ok', (_v, me) => get(`/receivedEmails/${me.receivedId}`))],
    },
    'GET /receivedEmails/:id/raw': {
      cross: () => [probe("A's received mail", 'hidden', (v) => get(`/receivedEmails/${v.receivedId}/raw`))],
      restricted: () => [probe("another domain's", 'hidden', (v) => get(`/receivedEmails/${v.receivedId}/raw`)), probe('its own', 'ok', (_v, me) => get(`/receivedEmails/${me.receivedId}/raw`))],
    },

    // ---------------------------------------------------------------- sandbox mailbox
    // This world is not in sandbox mode: the routes answer 404 to everyone, with a victim's id or
    // a made-up one alike. In sandbox mode the walls (another team, a key bound to another
    // domain, a SENDING key) are tried by test/sandbox/sandbox-mode.test.ts.
    'GET /sandbox/messages': {
      cross: () => [probe('list', 'hidden', () => get('/sandbox/messages'))],
      restricted: () => [probe('list', 'hidden', () => get('/sandbox/messages'))],
    },
    'GET /sandbox/messages/:id': {
      cross: () => [probe("a message of A's", 'hidden', (v) => get(`/sandbox/messages/sm_${v.emailId.slice(3)}`))],
      restricted: () => [probe("another domain's", 'hidden', (v) => get(`/sandbox/messages/sm_${v.emailId.slice(3)}`))],
    },
    // ---------------------------------------------------------------- TLS reports
    'GET /tlsReports': {
      cross: () => [
        probe('list', 'clean', () => get('/tlsReports?limit=100'), { check: (res, env) => env.t.true(res.body.total > 0, 'B sees its own') }),
        probe("filtered by A's domain", 'clean', (v) => get(`/tlsReports?domainId=${v.domainId}`), { check: (res, env) => env.t.deepEqual([res.body.tlsReports, res.body.total], [[], 0]) }),
      ],
      restricted: () => [
        probe('list shows its domain only', 'ok', () => get('/tlsReports?limit=100'), { check: (res, env) => env.t.deepEqual((res.body.tlsReports as any[]).map((r) => r.id), [env.role.me.tlsReportId]) }),
        probe('filtered by another domain', 'ok', (v) => get(`/tlsReports?domainId=${v.domainId}`), { check: (res, env) => env.t.deepEqual([res.body.tlsReports, res.body.total], [[], 0]) }),
      ],
    },
    'GET /tlsReports/:id': {
      cross: () => [probe("A's TLS report", 'hidden', (v) => get(`/tlsReports/${v.tlsReportId}`))],
      restricted: () => [probe("another domain's", 'hidden', (v) => get(`/tlsReports/${v.tlsReportId}`)), probe('its own', 'ok', (_v, me) => get(`/tlsReports/${me.tlsReportId}`))],
    },

    // ---------------------------------------------------------------- webhooks
    'GET /webhooks': {
      cross: () => [probe('list', 'clean', () => get('/webhooks?limit=100'))],
      restricted: () => [
        probe('list shows webhooks of its domain only', 'ok', () => get('/webhooks?limit=100'), {
          check: (res, env) => env.t.deepEqual((res.body.webhooks as any[]).map((h) => [h.id, h.domainIds]), [[env.role.me.webhookId, [env.role.me.domainId]]]),
        }),
      ],
    },
    'POST /webhooks': {
      cross: () => [probe("restricted to A's domain", 'refused', (v, me) => post('/webhooks', { url: hook, eventTypes: ['email.sent'], domainIds: [me.domainId, v.domainId] }), { control: true, after: cleanUp((id) => `/webhooks/${id}`) })],
      restricted: () => [
        probe('restricted to another domain', 'forbidden', (v) => post('/webhooks', { url: hook, eventTypes: ['email.sent'], domainIds: [v.domainId] })),
        probe('for all domains: confined to its own', 'ok', () => post('/webhooks', { url: hook, eventTypes: ['email.sent'] }), {
          check: (res, env) => env.t.deepEqual(res.body.domainIds, [env.role.me.domainId]),
          after: cleanUp((id) => `/webhooks/${id}`),
        }),
      ],
    },
    'GET /webhooks/:webhookId': {
      cross: () => [probe("A's webhook for all domains", 'hidden', (v) => get(`/webhooks/${v.allWebhookId}`)), probe("A's domain webhook", 'hidden', (v) => get(`/webhooks/${v.webhookId}`))],
      restricted: () => [
        probe("another domain's webhook", 'hidden', (v) => get(`/webhooks/${v.webhookId}`)),
        probe("the team's webhook for all domains", 'hidden', (v) => get(`/webhooks/${v.allWebhookId}`)),
        probe('its own', 'ok', (_v, me) => get(`/webhooks/${me.webhookId}`)),
      ],
    },
    'PATCH /webhooks/:webhookId': {
      cross: () => [
        probe("A's webhook", 'hidden', (v) => patch(`/webhooks/${v.allWebhookId}`, { url: hook, rotateSecret: true })),
        probe("B's webhook restricted to A's domain", 'refused', (v, me) => patch(`/webhooks/${me.webhookId}`, { domainIds: [me.domainId, v.domainId] }), {
          control: true,
          after: async (env) => void (await env.as(env.role.key, patch(`/webhooks/${env.role.me.webhookId}`, { domainIds: [env.role.me.domainId] }))),
        }),
      ],
      restricted: () => [
        probe("another domain's webhook", 'hidden', (v) => patch(`/webhooks/${v.webhookId}`, { description: 'x' })),
        probe("the team's webhook for all domains", 'hidden', (v) => patch(`/webhooks/${v.allWebhookId}`, { description: 'x' })),
        probe('its own moved to another domain', 'forbidden', (v, me) => patch(`/webhooks/${me.webhookId}`, { domainIds: [v.domainId] })),
        probe('its own', 'ok', (_v, me) => patch(`/webhooks/${me.webhookId}`, { description: 'acme mail domain' })),
      ],
    },
    'DELETE /webhooks/:webhookId': {
      cross: () => [probe("A's webhook", 'hidden', (v) => del(`/webhooks/${v.allWebhookId}`)), probe("A's domain webhook", 'hidden', (v) => del(`/webhooks/${v.webhookId}`))],
      restricted: () => [
        probe("another domain's webhook", 'hidden', (v) => del(`/webhooks/${v.webhookId}`)),
        probe("the team's webhook for all domains", 'hidden', (v) => del(`/webhooks/${v.allWebhookId}`)),
        probe('its own', 'ok', (_v, _me, m) => del(`/webhooks/${m.id}`), { before: (env) => env.as(env.role.key, post('/webhooks', { url: hook, eventTypes: ['email.sent'] })) }),
      ],
    },
    'GET /webhooks/:webhookId/attempts': {
      cross: () => [probe("A's webhook", 'hidden', (v) => get(`/webhooks/${v.allWebhookId}/attempts`)), probe("A's domain webhook", 'hidden', (v) => get(`/webhooks/${v.webhookId}/attempts?limit=100`))],
      restricted: () => [
        probe("another domain's webhook", 'hidden', (v) => get(`/webhooks/${v.webhookId}/attempts`)),
        probe("the team's webhook for all domains", 'hidden', (v) => get(`/webhooks/${v.allWebhookId}/attempts`)),
        probe('its own', 'ok', (_v, me) => get(`/webhooks/${me.webhookId}/attempts?limit=100`), { check: (res, env) => env.t.true(res.body.attempts.length > 0) }),
      ],
    },
    'POST /webhooks/:webhookId/test': {
      cross: () => [probe("A's webhook", 'hidden', (v) => post(`/webhooks/${v.allWebhookId}/test`))],
      restricted: () => [
        probe("another domain's webhook", 'hidden', (v) => post(`/webhooks/${v.webhookId}/test`)),
        probe("the team's webhook for all domains", 'hidden', (v) => post(`/webhooks/${v.allWebhookId}/test`)),
        probe('its own', 'ok', (_v, me) => post(`/webhooks/${me.webhookId}/test`)),
      ],
    },

    // ---------------------------------------------------------------- analytics
    'GET /analytics/email-time-series': {
      cross: () => [
        probe('team totals', 'clean', () => get('/analytics/email-time-series?days=7'), { before: settleFirst, check: analyticsCheck((b) => b.totalCounts.delivered) }),
        probe("A's domain", 'hidden', (v) => get(`/analytics/email-time-series?domainId=${v.domainId}`)),
      ],
      restricted: () => [
        probe('totals are its domain’s', 'ok', () => get('/analytics/email-time-series?days=7'), { before: settleFirst, check: analyticsCheck((b) => b.totalCounts.delivered) }),
        probe('another domain', 'hidden', (v) => get(`/analytics/email-time-series?domainId=${v.domainId}`)),
      ],
    },
    'GET /analytics/reputation-metrics': {
      cross: () => [
        probe('team metrics', 'clean', () => get('/analytics/reputation-metrics'), { before: settleFirst, check: analyticsCheck((b) => b.delivered) }),
        probe("A's domain", 'hidden', (v) => get(`/analytics/reputation-metrics?domainId=${v.domainId}`)),
      ],
      restricted: () => [
        probe('metrics are its domain’s', 'ok', () => get('/analytics/reputation-metrics'), { before: settleFirst, check: analyticsCheck((b) => b.delivered) }),
        probe('another domain', 'hidden', (v) => get(`/analytics/reputation-metrics?domainId=${v.domainId}`)),
      ],
    },
  };
  return cases;
}

/** The routes a domain-bound key sees only its own domain's share of (victim markers apply). */
export const DOMAIN_CONFINED = ['/apiKeys', '/domains', '/emails', '/receivedEmails', '/tlsReports', '/webhooks', '/analytics'];
