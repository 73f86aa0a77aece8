import type { TestResponse } from '../../helpers/test-app.js';
import type { IsolationWorld } from './isolation-world.js';
import type { ProbeEnv, Req, RouteCase } from './probe-runner.js';
import { audienceCases } from './isolation-cases-audience.js';
import { cleanUp, del, get, isolationContext, mail, patch, post, probe, put } from './isolation-probes.js';

// The isolation table: one entry per API route, keyed `${method} ${path}`. A route without an
// entry fails the suite, so a new endpoint cannot ship without saying who may touch what.
//
// cross(): team B's key against team A's ids (victim = A's first domain, me = B's first domain).
// restricted(): A's key bound to its first domain (me) against A's second domain (victim).
// sending(): A's SENDING key on the email routes (every other route must answer 403).
//
// What a domain-bound key may do (architecture.md, Decisions: API keys): it sends only from its domain
// and sees only its domain's emails, received mail, domain, webhooks, analytics, campaigns and
// API keys; templates, contact books, contacts, segments and suppressions are the team's,
// except that nothing it configures may send from another domain (campaign from, double
// opt-in sender).
export function isolationCases(world: IsolationWorld): Record<string, RouteCase> {
  const ctx = isolationContext(world);
  const { a, fullA, hook, inDays, setup } = ctx;

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
  // A send made by team A's unbound key with an Idempotency-Key, for a bound key to replay.
  const idempotent = (req: Req, key: string): Req => ({ ...req, headers: { 'idempotency-key': key } });
  let replays = 0;
  const replayable = async (env: ProbeEnv, req: Req) => {
    const key = `probe-replay-${++replays}-${env.role.victim.domainId}`;
    const sent = await setup(env, idempotent(req, key));
    return { key, body: req.body, emailId: sent.emailId ?? sent.data[0].emailId };
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
            // Its key has a host of its own (A's holds A's key), where nothing is published yet.
            const dkimHostOf = (d: any) => (d.dnsRecords as { name: string }[]).find((r) => r.name.includes('._domainkey.'))?.name;
            env.t.not(dkimHostOf(res.body), `posthorn._domainkey.${res.body.name}`, "B's DKIM host is not A's");
            env.t.is(again.body.dkimStatus, 'PENDING', "nothing is published at B's own DKIM host");
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
        // Idempotency keys are the team's: the same body and key as a send from another domain
        // must not replay that send's answer (its email id) to a key that may not make it.
        probe("the team's send from another domain, replayed by its Idempotency-Key", 'forbidden', (_v, _me, m) => idempotent(post('/emails', m.body), m.key), {
          before: async (env) => replayable(env, post('/emails', mail(env.role.victim.domainName))),
          check: async (res, env, m) => {
            env.t.false(JSON.stringify(res.body).includes(m.emailId), "no email id of the other domain's");
            // Its own sends it replays as any key does.
            const own = idempotent(post('/emails', mail(env.role.me.domainName)), `probe-replay-own-${env.role.me.domainId}`);
            const [first, again] = [await env.call(own, 'its own send'), await env.call(own, 'its own send again')];
            env.t.deepEqual([first.status, again.status, again.body], [200, 200, first.body], 'its own send replays');
          },
        }),
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
        probe("the team's batch from another domain, replayed by its Idempotency-Key", 'forbidden', (_v, _me, m) => idempotent(post('/emails/batch', m.body), m.key), {
          before: async (env) => replayable(env, post('/emails/batch', [mail(env.role.victim.domainName)])),
          check: (res, env, m) => env.t.false(JSON.stringify(res.body).includes(m.emailId), "no email id of the other domain's"),
        }),
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

    ...audienceCases(ctx),

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
export const DOMAIN_CONFINED = ['/apiKeys', '/domains', '/emails', '/receivedEmails', '/tlsReports', '/webhooks', '/analytics', '/campaigns'];
