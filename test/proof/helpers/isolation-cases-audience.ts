import type { RouteCase } from './probe-runner.js';
import { campaignBody, cleanUp, del, filters, get, patch, post, probe, put, type IsolationContext } from './isolation-probes.js';

// The isolation table's audience routes: templates, contact books and contacts, segments,
// suppressions, which a domain-bound key shares with its team, except that nothing it configures
// may send from another domain; and campaigns, which send from a domain and so are confined to
// the key's own like its emails (isolation-cases.ts says the rules).

export function audienceCases({ world, a, fullA, inDays, setup }: IsolationContext): Record<string, RouteCase> {
  return {
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
      restricted: () => [
        probe('list shows its domain only', 'clean', () => get('/campaigns?limit=100'), {
          check: (res, env) => {
            const listed = res.body.campaigns as { id: string; from: string }[];
            env.t.true(listed.some((c) => c.id === env.role.me.campaignId), 'its own campaign is listed');
            env.t.deepEqual(listed.filter((c) => !c.from.endsWith(`@${env.role.me.domainName}`)), [], 'only campaigns from its domain');
            env.t.is(res.body.total, listed.length, 'the count is its domain\'s');
          },
        }),
        probe("search for the other domain's name", 'clean', () => get('/campaigns?search=other')),
      ],
    },
    'GET /campaigns/:campaignId': {
      cross: () => [probe("A's draft", 'hidden', (v) => get(`/campaigns/${v.campaignId}`)), probe("A's running campaign", 'hidden', () => get(`/campaigns/${a.d2.campaignId}`))],
      restricted: () => [probe("another domain's campaign", 'hidden', (v) => get(`/campaigns/${v.campaignId}`)), probe('its own', 'ok', (_v, me) => get(`/campaigns/${me.campaignId}`))],
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
        probe("another domain's campaign", 'hidden', (v) => patch(`/campaigns/${v.campaignId}`, { name: 'taken over' })),
        probe("another domain's draft", 'hidden', (_v, _me, m) => patch(`/campaigns/${m.id}`, { name: 'taken over' }), {
          before: (env) => setup(env, post('/campaigns', campaignBody(env.role.victim.domainName, env.role.me.bookId))),
          after: async (env, o) => {
            env.t.not((await env.as(fullA, get(`/campaigns/${o.made.id}`))).name, 'taken over', 'unchanged');
            await env.as(fullA, del(`/campaigns/${o.made.id}`));
          },
        }),
        probe('its draft sent from another domain', 'forbidden', (v, me) => patch(`/campaigns/${me.campaignId}`, { from: `news@${v.domainName}` })),
        probe('its draft renamed', 'ok', (_v, me) => patch(`/campaigns/${me.campaignId}`, { name: 'acme campaign' }), { markers: false }),
      ],
    },
    'DELETE /campaigns/:campaignId': {
      cross: () => [probe("A's draft", 'hidden', (v) => del(`/campaigns/${v.campaignId}`)), probe("A's running campaign", 'hidden', () => del(`/campaigns/${a.d2.campaignId}`))],
      restricted: () => [
        probe("another domain's running campaign", 'hidden', (v) => del(`/campaigns/${v.campaignId}`), {
          after: async (env) => void env.t.is((await env.as(fullA, get(`/campaigns/${env.role.victim.campaignId}`))).status, 'RUNNING', 'still there'),
        }),
        probe('a draft of its domain', 'ok', (_v, _me, m) => del(`/campaigns/${m.id}`), { markers: false, before: (env) => setup(env, post('/campaigns', campaignBody(env.role.me.domainName, env.role.me.bookId))) }),
      ],
    },
    'POST /campaigns/:campaignId/schedule': {
      cross: () => [probe("A's draft", 'hidden', (v) => post(`/campaigns/${v.campaignId}/schedule`, { scheduledAt: inDays(30) }))],
      restricted: () => [
        probe("another domain's draft", 'hidden', (_v, _me, m) => post(`/campaigns/${m.id}/schedule`, { scheduledAt: inDays(30) }), {
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
        probe("another domain's running campaign", 'hidden', (v) => post(`/campaigns/${v.campaignId}/pause`), {
          after: async (env) => void env.t.is((await env.as(fullA, get(`/campaigns/${env.role.victim.campaignId}`))).status, 'RUNNING', 'still running'),
        }),
      ],
    },
    'POST /campaigns/:campaignId/resume': {
      cross: () => [probe("A's campaign", 'hidden', () => post(`/campaigns/${a.d2.campaignId}/resume`))],
      restricted: () => [
        probe("another domain's paused campaign", 'hidden', (v) => post(`/campaigns/${v.campaignId}/resume`), {
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
        probe("another domain's confirmation text", 'forbidden', (v) => patch(`/contactBooks/${v.doiBookId}`, { doubleOptInSubject: 'words under its name' })),
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
  };
}
