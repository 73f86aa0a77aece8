import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { smtpSend } from '../inbound/helpers/smtp-client.js';
import Router from '@koa/router';
import { ConsoleClient, consoleUser } from './helpers/console-client.js';
import { operatorTeamsPage } from '../../src/console/pages/operator-teams-page.js';
import { operatorQueuePage } from '../../src/console/pages/operator-queue-page.js';

// The console's walls over plain HTTP: sessions, CSRF, tenant isolation by URL, operator
// pages, escaping of hostile input, the sandboxed email frame, the sign-in rate limit.

let t0: TestApp;
let teamB: number;
const A = 'alice@team-a.example';
const B = 'bob@team-b.example';
const OP = 'olga@operator.example';
/** Ids of team A's things, opened by team B by URL. */
const a: Record<string, string> = {};

const HOSTILE_SUBJECT = '<script>alert("subject")</script><img src=x onerror=alert(1)>';
const HOSTILE_HTML = '<p>hi</p><script>parent.document.title="owned"</script><img src="https://tracker.example/p.gif"><a href="javascript:alert(2)">x</a>';

test.before(async () => {
  t0 = await startTestApp({ overrides: { webhooks: { allowPrivate: true } } });
  const app = t0.app;
  teamB = await app.services.teams.create('Team B');
  await consoleUser(app, A, t0.teamId);
  await consoleUser(app, B, teamB);
  await consoleUser(app, OP, teamB, true);

  const domain = await addVerifiedDomain(t0, 'team-a.dev');
  const inbox = await addVerifiedDomain(t0, 'inbox-a.dev');
  await t0.request('PATCH', `/v1/domains/${inbox.id}`, { body: { receiving: true } });
  a.domain = String(domain.id);
  a.email = (await t0.request('POST', '/v1/emails', { body: { from: 'x@team-a.dev', to: 'someone@example.net', subject: HOSTILE_SUBJECT, html: HOSTILE_HTML, text: 'plain' } })).body.emailId;
  const book = await t0.request('POST', '/v1/contactBooks', { body: { name: 'A book' } });
  a.book = book.body.id;
  a.contact = (await t0.request('POST', `/v1/contactBooks/${a.book}/contacts`, { body: { email: 'c1@example.org', firstName: '<b>Eve</b>' } })).body.contactId;
  a.segment = (await t0.request('POST', '/v1/segments', { body: { name: 'seg', contactBookId: a.book, filters: { match: 'all', conditions: [] } } })).body.id;
  a.template = (await t0.request('POST', '/v1/templates', { body: { name: 'tpl', subject: 'Hi' } })).body.id;
  a.campaign = (await t0.request('POST', '/v1/campaigns', { body: { name: 'camp', from: 'x@team-a.dev', subject: 'S', contactBookId: a.book, html: '<p>hi</p>' } })).body.id;
  a.webhook = (await t0.request('POST', '/v1/webhooks', { body: { url: 'http://127.0.0.1:9/hook', eventTypes: ['email.sent'] } })).body.id;
  a.import = (await app.services.contactImports.start({ teamId: t0.teamId, domainId: null }, a.book, 'a.csv', 'email\nz@example.org\n')).id;
  const sent = await smtpSend({ port: app.listeners.inbound!.port, from: 'r@remote.example', to: ['in@inbox-a.dev'], raw: 'From: r@remote.example\r\nTo: in@inbox-a.dev\r\nSubject: inbound\r\n\r\nhello\r\n' });
  if (!sent.ok) throw new Error(sent.response);
  a.received = (await t0.request('GET', '/v1/receivedEmails')).body.receivedEmails[0].id;
});
test.after.always(async () => {
  await t0?.close();
});

test('GET / is a small page pointing at the console, /health and the API description', async (t) => {
  const res = await new ConsoleClient(t0.baseUrl).get('/');
  t.is(res.status, 200);
  t.regex(res.headers.get('content-type')!, /text\/html/);
  for (const href of ['/console', '/health', '/v1/openapi.json']) t.true(res.text.includes(`href="${href}"`), href);
  t.regex(res.headers.get('content-security-policy')!, /script-src 'self'/);
});

test('signed out: pages send you to sign in (and back afterwards); changes are refused', async (t) => {
  const c = new ConsoleClient(t0.baseUrl);
  const page = await c.get(`/console/domains/${a.domain}`);
  t.is(page.status, 303);
  t.is(page.location, `/console/login?next=${encodeURIComponent(`/console/domains/${a.domain}`)}`);
  const change = await c.request('POST', `/console/domains/${a.domain}/delete`, { form: { _csrf: 'x' }, headers: { origin: t0.baseUrl } });
  t.is(change.status, 303);
  t.is(change.location, '/console/login');
  t.is((await t0.request('GET', `/v1/domains/${a.domain}`)).status, 200);
  const json = await c.request('GET', '/console/emails', { headers: { accept: 'application/json' } });
  t.is(json.status, 401);
});

test('sign-in: a wrong password says so; the right one sets an HttpOnly SameSite cookie and returns to the page asked for', async (t) => {
  const c = new ConsoleClient(t0.baseUrl);
  const wrong = await c.signIn(A, 'not the password');
  t.is(wrong.status, 401);
  t.regex(wrong.text, /do not match an account/);
  const login = await c.get('/console/login?next=%2Fconsole%2Femails');
  const token = /name="_csrf" value="([^"]+)"/.exec(login.text)![1]!;
  const ok = await c.request('POST', '/console/login', { form: { _csrf: token, email: A.toUpperCase(), password: 'correct horse battery staple', next: '/console/emails' }, headers: { origin: t0.baseUrl } });
  t.is(ok.status, 303);
  t.is(ok.location, '/console/emails');
  const cookie = ok.headers.getSetCookie().find((x) => x.startsWith('posthorn_session='))!;
  t.regex(cookie, /HttpOnly/);
  t.regex(cookie, /SameSite=Lax/);
  t.regex(cookie, /Path=\/console/);
  t.notRegex(cookie, /Secure/); // http:// public URL here; the https case is in console-sessions.test.ts
  const page = await c.get('/console/emails');
  t.is(page.status, 200);
  const csp = page.headers.get('content-security-policy')!;
  t.regex(csp, /default-src 'none'/);
  t.regex(csp, /script-src 'self'(;|$)/);
  t.regex(csp, /style-src 'self'(;|$)/);
  t.regex(csp, /frame-ancestors 'none'/);
  t.is(page.headers.get('x-content-type-options'), 'nosniff');
  t.is(page.headers.get('cache-control'), 'no-store');
  // No inline script or style anywhere in the page.
  t.notRegex(page.text, /<script(?![^>]*\bsrc=)[^>]*>/);
  t.notRegex(page.text, /<[^>]*\sstyle=/);
  t.notRegex(page.text, /<[^>]*\son[a-z]+=/);
  // An open redirect through ?next is not possible.
  const evil = new ConsoleClient(t0.baseUrl);
  const l2 = await evil.get('/console/login');
  const tk = /name="_csrf" value="([^"]+)"/.exec(l2.text)![1]!;
  const res = await evil.request('POST', '/console/login', { form: { _csrf: tk, email: A, password: 'correct horse battery staple', next: '//evil.example/x' }, headers: { origin: t0.baseUrl } });
  t.is(res.location, '/console');
});

// Koa reads a repeated query parameter as an array: the first is taken when it is a console
// path, else the overview; never a 500 and never another site.
test('sign-in: next given twice is the first when it is a console path, else the overview, signed in or out', async (t) => {
  const q = (...next: string[]) => '/console/login?' + next.map((n) => `next=${encodeURIComponent(n)}`).join('&');
  const hiddenNext = (text: string) => /name="next" value="([^"]*)"/.exec(text)?.[1];
  const out = new ConsoleClient(t0.baseUrl);
  const firstSafe = await out.get(q('/console/emails', '//evil.example/x'));
  t.is(firstSafe.status, 200);
  t.is(hiddenNext(firstSafe.text), '/console/emails');
  const firstUnsafe = await out.get(q('//evil.example/x', '/console/emails'));
  t.is(firstUnsafe.status, 200);
  t.is(hiddenNext(firstUnsafe.text), '');
  // Signed in, the login page sends the browser on at once. An account of its own: sign-ins in
  // flight count against their account until they succeed.
  const who = 'next@team-a.example';
  await consoleUser(t0.app, who, t0.teamId);
  const c = new ConsoleClient(t0.baseUrl);
  await c.signIn(who);
  for (const [next, location] of [
    [['/console/emails', '/console/domains'], '/console/emails'],
    [['/console/emails', '//evil.example/x'], '/console/emails'],
    [['//evil.example/x', '/console/emails'], '/console'],
    [['https://evil.example/', '/console/emails'], '/console'],
    [['', '/console/emails'], '/console'],
  ] as const) {
    const res = await c.get(q(...next));
    t.is(res.status, 302, JSON.stringify(next));
    t.is(res.location, location, JSON.stringify(next));
  }
  // A form posting next twice: the first one.
  for (const [next, location] of [
    [['/console/emails', '//evil.example/x'], '/console/emails'],
    [['//evil.example/x', '/console/emails'], '/console'],
  ] as const) {
    const s = new ConsoleClient(t0.baseUrl);
    const page = await s.get('/console/login');
    const tk = /name="_csrf" value="([^"]+)"/.exec(page.text)![1]!;
    const res = await s.request('POST', '/console/login', { form: { _csrf: tk, email: who, password: 'correct horse battery staple', next: [...next] }, headers: { origin: t0.baseUrl } });
    t.is(res.status, 303, JSON.stringify(next));
    t.is(res.location, location, JSON.stringify(next));
  }
});

// The CSV upload may send a form of up to 20 MB; every other request, one to a path that merely
// ends in /import or the upload's path with another method, keeps the 2 MB of a form.
test('the large form limit is the CSV upload\'s only: another path ending in /import, or another method, gets 413', async (t) => {
  const who = 'uploads@team-a.example'; // its own account, as above
  await consoleUser(t0.app, who, t0.teamId);
  const c = new ConsoleClient(t0.baseUrl);
  await c.signIn(who);
  const big = (path: string, method = 'POST', client = c) =>
    client.request(method, path, { body: `_csrf=not-the-token&pad=${'x'.repeat(3 * 1024 * 1024)}`, headers: { origin: t0.baseUrl, 'content-type': 'application/x-www-form-urlencoded' } });
  // The upload's own route reads the whole form, then refuses the token in it.
  const upload = await big(`/console/contacts/${a.book}/import`);
  t.is(upload.status, 403, upload.text.slice(0, 200));
  t.regex(upload.text, /CSRF token/);
  for (const [method, path] of [
    ['POST', `/console/domains/${a.domain}/import`],
    ['POST', `/console/contacts/${a.book}/contacts/import`],
    ['POST', '/console/import'],
    ['PUT', `/console/contacts/${a.book}/import`],
    ['DELETE', `/console/contacts/${a.book}/import`],
  ] as const) {
    const res = await big(path, method);
    t.is(res.status, 413, `${method} ${path}`);
  }
  // Signed out, nothing is read at all.
  const out = await big(`/console/contacts/${a.book}/import`, 'POST', new ConsoleClient(t0.baseUrl));
  t.is(out.status, 303);
  t.is(out.location, '/console/login');
});

test('CSRF: a cross-site POST is refused, a POST without the token or with another session\'s is refused, the console\'s own form works', async (t) => {
  const c = new ConsoleClient(t0.baseUrl);
  await c.signIn(A);
  const token = await c.csrf();
  const other = new ConsoleClient(t0.baseUrl);
  await other.signIn(OP);
  const otherToken = await other.csrf();

  const crossSite = await c.post('/console/suppressions', { email: 'x1@example.org' }, { token, origin: 'https://evil.example' });
  t.is(crossSite.status, 403);
  t.regex(crossSite.text, /another site/);
  const fetchSite = await c.request('POST', '/console/suppressions', { form: { _csrf: token, email: 'x2@example.org' }, headers: { 'sec-fetch-site': 'cross-site' } });
  t.is(fetchSite.status, 403);
  const noToken = await c.request('POST', '/console/suppressions', { form: { email: 'x3@example.org' }, headers: { origin: t0.baseUrl } });
  t.is(noToken.status, 403);
  t.regex(noToken.text, /CSRF token/);
  const wrongToken = await c.post('/console/suppressions', { email: 'x4@example.org' }, { token: otherToken });
  t.is(wrongToken.status, 403);
  const none = (await t0.request('GET', '/v1/suppressions')).body.suppressions.map((s: any) => s.email);
  for (const e of ['x1@example.org', 'x2@example.org', 'x3@example.org', 'x4@example.org']) t.false(none.includes(e), e);

  const ok = await c.post('/console/suppressions', { email: 'x5@example.org' }, { token });
  t.is(ok.status, 303);
  t.true((await t0.request('GET', '/v1/suppressions')).body.suppressions.some((s: any) => s.email === 'x5@example.org'));
});

test('login CSRF: a sign-in form that did not come from this site\'s page is refused', async (t) => {
  const c = new ConsoleClient(t0.baseUrl);
  const res = await c.request('POST', '/console/login', { form: { _csrf: 'forged-token-forged-token-forged', email: A, password: 'correct horse battery staple' }, headers: { origin: t0.baseUrl } });
  t.is(res.status, 403);
  t.false(res.headers.getSetCookie().some((x) => x.startsWith('posthorn_session=')));
  const crossSite = await c.request('POST', '/console/login', { form: { email: A, password: 'x' }, headers: { origin: 'https://evil.example' } });
  t.is(crossSite.status, 403);
});

test('the sign-in form answers at every spelling of its path the router matches, signed in or not (never a 500)', async (t) => {
  // An account of its own: sign-ins in flight count against their account until they succeed.
  const who = 'paths@team-a.example';
  await consoleUser(t0.app, who, t0.teamId);
  const signedIn = new ConsoleClient(t0.baseUrl);
  await signedIn.signIn(who);
  for (const path of ['/console/login', '/console/LOGIN', '/console/login/']) {
    // Signed in, without the sign-in form's cookie: refused as an expired form, like the path itself.
    const res = await signedIn.request('POST', path, { form: { _csrf: 'x', email: who, password: 'wrong' }, headers: { origin: t0.baseUrl } });
    t.is(res.status, 403, path);
    t.regex(res.text, /The sign-in form had expired/, path);
    // Signed out: the form signs in.
    const c = new ConsoleClient(t0.baseUrl);
    const page = await c.get('/console/login');
    const token = /name="_csrf" value="([^"]+)"/.exec(page.text)![1]!;
    const ok = await c.request('POST', path, { form: { _csrf: token, email: who, password: 'correct horse battery staple', next: '' }, headers: { origin: t0.baseUrl } });
    t.is(ok.status, 303, path);
    t.true(c.cookies.has('posthorn_session'), path);
  }
});

test('sign-out ends the session on the server: the old cookie, replayed, is dead', async (t) => {
  const c = new ConsoleClient(t0.baseUrl);
  await c.signIn(A);
  const stolen = c.cookies.get('posthorn_session')!;
  t.is((await c.get('/console')).status, 200);
  const out = await c.post('/console/logout');
  t.is(out.status, 303);
  t.is(out.location, '/console/login');
  t.false(c.cookies.has('posthorn_session'));
  const replay = new ConsoleClient(t0.baseUrl);
  replay.cookies.set('posthorn_session', stolen);
  const res = await replay.get('/console');
  t.is(res.status, 303);
  t.regex(res.location!, /^\/console\/login/);
});

test('team B cannot open team A\'s pages by URL, nor change them', async (t) => {
  const b = new ConsoleClient(t0.baseUrl);
  await b.signIn(B);
  const urls = [
    `/console/domains/${a.domain}`,
    `/console/emails/${a.email}`,
    `/console/emails/${a.email}/body.html`,
    `/console/contacts/${a.book}`,
    `/console/contacts/${a.book}/contacts/${a.contact}`,
    `/console/contacts/${a.book}/export.csv`,
    `/console/contacts/${a.book}/imports/${a.import}`,
    `/console/segments/${a.segment}`,
    `/console/templates/${a.template}`,
    `/console/templates/${a.template}/preview.html`,
    `/console/campaigns/${a.campaign}`,
    `/console/campaigns/${a.campaign}/preview.html`,
    `/console/webhooks/${a.webhook}`,
    `/console/received/${a.received}`,
    `/console/received/${a.received}/raw.eml`,
  ];
  for (const url of urls) {
    const res = await b.get(url);
    t.is(res.status, 404, url);
    t.false(res.text.includes('A book') || res.text.includes('c1@example.org') || res.text.includes('team-a.dev'), url);
  }
  // Their lists do not show A's things either.
  for (const [url, marker] of [['/console/domains', 'team-a.dev'], ['/console/contacts', 'A book'], ['/console/webhooks', '127.0.0.1:9'], ['/console/emails', 'alert']] as const) {
    t.false((await b.get(url)).text.includes(marker), url);
  }
  const token = await b.csrf();
  const changes = [
    [`/console/domains/${a.domain}/delete`, {}],
    [`/console/contacts/${a.book}/delete`, {}],
    [`/console/contacts/${a.book}/contacts/${a.contact}/delete`, {}],
    [`/console/segments/${a.segment}/delete`, {}],
    [`/console/templates/${a.template}/delete`, {}],
    [`/console/campaigns/${a.campaign}/delete`, {}],
    [`/console/webhooks/${a.webhook}/delete`, {}],
    [`/console/webhooks/${a.webhook}/rotate`, {}],
  ] as const;
  for (const [url, form] of changes) {
    const res = await b.post(url, form, { token });
    t.is(res.status, 303, url); // refused: back with the reason
    t.true(b.cookies.has('posthorn_flash'), url);
  }
  // Everything of A's is still there, unchanged.
  t.is((await t0.request('GET', `/v1/domains/${a.domain}`)).status, 200);
  t.is((await t0.request('GET', `/v1/contactBooks/${a.book}`)).status, 200);
  t.is((await t0.request('GET', `/v1/contactBooks/${a.book}/contacts/${a.contact}`)).status, 200);
  t.is((await t0.request('GET', `/v1/segments/${a.segment}`)).status, 200);
  t.is((await t0.request('GET', `/v1/templates/${a.template}`)).status, 200);
  t.is((await t0.request('GET', `/v1/campaigns/${a.campaign}`)).status, 200);
  t.is((await t0.request('GET', `/v1/webhooks/${a.webhook}`)).status, 200);
});

/** Every operator page and form, with real-looking ids: each must refuse a team member. */
const OPERATOR_ROUTES: Record<string, string> = {
  'GET /operator/teams': '/console/operator/teams',
  'POST /operator/teams': '/console/operator/teams',
  'POST /operator/teams/:id': '/console/operator/teams/1',
  'GET /operator/queue': '/console/operator/queue',
  'GET /operator/queue/destinations/:destination': '/console/operator/queue/destinations/example.net',
  'POST /operator/queue/suspensions': '/console/operator/queue/suspensions',
  'POST /operator/queue/suspensions/:id/resume': '/console/operator/queue/suspensions/su_x/resume',
  'POST /operator/queue/destinations/:destination/retry': '/console/operator/queue/destinations/example.net/retry',
  'POST /operator/queue/destinations/:destination/bounce': '/console/operator/queue/destinations/example.net/bounce',
  'POST /operator/queue/deliveries/:id/retry': '/console/operator/queue/deliveries/1/retry',
  'POST /operator/queue/deliveries/:id/give-up': '/console/operator/queue/deliveries/1/give-up',
};

test.serial('operator pages: every page and form refuses a team member with 403, whatever the spelling of the path; nothing changes and nothing is audited', async (t) => {
  // The routes the operator modules register are exactly the ones listed above.
  const r = new Router();
  const deps = { publicUrl: 'http://x', services: {} } as never;
  operatorTeamsPage(r, deps);
  operatorQueuePage(r, deps);
  t.deepEqual(r.stack.flatMap((l) => l.methods.filter((m) => m !== 'HEAD').map((m) => `${m} ${l.path}`)).sort(), Object.keys(OPERATOR_ROUTES).sort());

  const member = new ConsoleClient(t0.baseUrl);
  await member.signIn(A);
  t.false((await member.get('/console')).text.includes('/console/operator/'));
  const suspensionsBefore = await t0.app.services.queue.listSuspensions();
  const auditBefore = (await t0.app.services.audit.list(1)).entries[0]?.id;
  const teamsBefore = await t0.app.services.teams.list();
  const form = { name: 'Sneaky', rateLimit: '1', destination: 'example.net', minutes: '60', reason: 'sneaky' };
  for (const [name, path] of Object.entries(OPERATOR_ROUTES)) {
    const variants = [path, path.replace('/operator/', '/OPERATOR/'), path.replace('/operator/', '/%6Fperator/'), path.replace('/console/operator', '/console//operator')];
    for (const p of variants) {
      const res = name.startsWith('GET') ? await member.get(p) : await member.post(p, form);
      // A spelling the router does not match is a 404; every other answer is the 403 page.
      t.true(res.status === 403 || res.status === 404, `${name} as ${p}: ${res.status}`);
      if (p === path) t.is(res.status, 403, `${name}: ${res.status}`);
      if (res.status === 403) t.regex(res.text, /This page is for operators of this server/, p);
    }
  }
  // The wall stands before the router: under /console/operator a member gets 403 even where no page is.
  t.is((await member.get('/console/operator/no-such-page')).status, 403);
  t.is((await member.post('/console/operator/no-such-form', form)).status, 403);
  t.deepEqual(await t0.app.services.teams.list(), teamsBefore);
  t.deepEqual(await t0.app.services.queue.listSuspensions(), suspensionsBefore);
  t.is((await t0.app.services.audit.list(1)).entries[0]?.id, auditBefore);
});

test.serial('operator pages: operators manage teams through the team service, and each change is in the audit log as the API writes it', async (t) => {
  const op = new ConsoleClient(t0.baseUrl);
  await op.signIn(OP);
  const opId = (await t0.app.services.users.list()).find((u) => u.email === OP)!.id;
  const teams = await op.get('/console/operator/teams');
  t.is(teams.status, 200);
  t.true(teams.text.includes('Team B'));
  t.is((await op.post('/console/operator/teams', { name: 'Team C', rateLimit: '25' })).status, 303);
  const c = (await t0.app.services.teams.list()).find((x) => x.name === 'Team C')!;
  t.is(c.rateLimit, 25);
  await op.post(`/console/operator/teams/${c.id}`, { name: 'Team Cee', rateLimit: '' });
  const renamed = await t0.app.services.teams.get(c.id);
  t.is(renamed?.name, 'Team Cee');
  t.is(renamed?.rateLimit, null);
  const { entries } = await t0.app.services.audit.list(2);
  t.deepEqual(
    entries.map((e) => [e.action, e.target, e.actor, e.consoleUserId, e.keyId]),
    [
      ['team.update', { teamId: c.id, name: 'Team Cee', rateLimit: null }, `console user ${opId} (${OP})`, opId, null],
      ['team.create', { teamId: c.id, name: 'Team C' }, `console user ${opId} (${OP})`, opId, null],
    ],
  );
  // A refused change is not audited.
  t.is((await op.post('/console/operator/teams/999999', { name: 'Nobody' })).status, 303);
  t.is((await t0.app.services.audit.list(1)).entries[0]!.id, entries[0]!.id);
  const queue = await op.get('/console/operator/queue');
  t.is(queue.status, 200);
  t.regex(queue.text, /Queued deliveries by state/);
});

test('hostile subjects and names are escaped; email HTML is served only to a sandboxed frame with its own CSP', async (t) => {
  const c = new ConsoleClient(t0.baseUrl);
  await c.signIn(A);
  for (const url of ['/console/emails', `/console/emails/${a.email}`]) {
    const page = await c.get(url);
    t.is(page.status, 200);
    t.false(page.text.includes('<script>alert'), url);
    t.false(page.text.includes('<img src=x'), url);
    t.true(page.text.includes('&lt;script&gt;alert(&quot;subject&quot;)&lt;/script&gt;'), url);
  }
  const detail = await c.get(`/console/emails/${a.email}`);
  t.regex(detail.text, /<iframe class="email-frame" sandbox title="Message body" src="\/console\/emails\/[^"]+\/body\.html">/);
  t.false(detail.text.includes('parent.document'));
  const contact = await c.get(`/console/contacts/${a.book}/contacts/${a.contact}`);
  t.true(contact.text.includes('&lt;b&gt;Eve&lt;/b&gt;'));

  const frame = await c.get(`/console/emails/${a.email}/body.html`);
  t.is(frame.status, 200);
  t.is(frame.text, HOSTILE_HTML); // as sent: the frame, not the markup, is what contains it
  const csp = frame.headers.get('content-security-policy')!;
  t.regex(csp, /default-src 'none'/);
  t.regex(csp, /(^|; )sandbox(;|$)/);
  t.notRegex(csp, /script-src/);
  t.regex(csp, /img-src data: cid:;/); // remote images blocked unless asked for
  t.regex(csp, /frame-ancestors 'self'/);
  const withImages = await c.get(`/console/emails/${a.email}/body.html?images=1`);
  t.regex(withImages.headers.get('content-security-policy')!, /img-src data: cid: https:/);
  t.regex(withImages.headers.get('content-security-policy')!, /sandbox/);
});

test('sign-in is rate limited per account with a clear message, and the right password does not get through meanwhile', async (t) => {
  const victim = 'victim@team-a.example';
  await consoleUser(t0.app, victim, t0.teamId);
  const c = new ConsoleClient(t0.baseUrl);
  for (let i = 0; i < 5; i++) t.is((await c.signIn(victim, `guess ${i}`)).status, 401);
  const limited = await c.signIn(victim, 'guess 6');
  t.is(limited.status, 429);
  t.regex(limited.text, /Too many failed sign-in attempts for this account\. Try again in 15 minutes/);
  t.truthy(limited.headers.get('retry-after'));
  const right = await c.signIn(victim);
  t.is(right.status, 429);
  t.false(c.cookies.has('posthorn_session'));
});

test('the stylesheet and script are files of the process with immutable, hashed names; nothing else is served there', async (t) => {
  const c = new ConsoleClient(t0.baseUrl);
  const login = await c.get('/console/login');
  const css = /href="(\/console\/assets\/console\.[0-9a-f]{12}\.css)"/.exec(login.text)![1]!;
  const js = /src="(\/console\/assets\/console\.[0-9a-f]{12}\.js)"/.exec(login.text)![1]!;
  const cssRes = await c.get(css);
  t.is(cssRes.status, 200);
  t.regex(cssRes.headers.get('content-type')!, /text\/css/);
  t.is(cssRes.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  const jsRes = await c.get(js);
  t.regex(jsRes.headers.get('content-type')!, /javascript/);
  t.is((await c.get('/console/assets/console.000000000000.css')).status, 404);
  t.is((await c.get('/console/assets/../../package.json')).status, 404);
  // No page references anything off this origin.
  t.notRegex(login.text, /(src|href)="(https?:)?\/\//);
});

test('/favicon.ico is the console\'s icon (SVG, with its type), cached for a day: its name has no hash', async (t) => {
  const c = new ConsoleClient(t0.baseUrl);
  const login = await c.get('/console/login');
  const iconPath = /<link rel="icon" href="(\/console\/assets\/icon\.[0-9a-f]{12}\.svg)" type="image\/svg\+xml">/.exec(login.text)![1]!;
  const icon = await c.get(iconPath);
  t.is(icon.status, 200);
  const favicon = await c.get('/favicon.ico');
  t.is(favicon.status, 200);
  t.is(favicon.headers.get('content-type'), 'image/svg+xml');
  t.is(favicon.headers.get('cache-control'), 'public, max-age=86400');
  t.is(favicon.headers.get('x-content-type-options'), 'nosniff');
  t.is(favicon.text, icon.text);
  t.regex(favicon.text, /^<svg /);
  const head = await c.request('HEAD', '/favicon.ico');
  t.is(head.status, 200);
  t.is(head.headers.get('content-type'), 'image/svg+xml');
});
