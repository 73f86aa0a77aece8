import test from 'ava';
import { simpleParser } from 'mailparser';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { twoTeams } from '../helpers/two-teams.js';

let w: MailWorld;
test.before(async () => {
  w = await startMailWorld();
});
test.after.always(async () => {
  await w?.close();
});

const doc = (...content: unknown[]) => JSON.stringify({ type: 'doc', content });
const para = (...content: unknown[]) => ({ type: 'paragraph', content });
const text = (t: string) => ({ type: 'text', text: t });
const variable = (id: string, fallback?: string) => ({ type: 'variable', attrs: fallback ? { id, fallback } : { id } });

// Serial: ava runs serial tests before the concurrent ones, which create templates in the same team.
test.serial('a new team starts with five published starter templates', async (t) => {
  const res = await w.t0.request('GET', '/v1/templates?limit=100');
  t.is(res.status, 200);
  t.is(res.body.total, 5);
  t.deepEqual(Object.keys(res.body).sort(), ['hasMore', 'limit', 'page', 'templates', 'total', 'totalPage']);
  const names = res.body.templates.map((x: any) => x.name).sort();
  t.is(names.length, 5);
  for (const tpl of res.body.templates) {
    t.is(tpl.publishedVersion, 1);
    t.regex(tpl.html, /<table/);
    t.notRegex(tpl.html, /<script/i);
  }
});

test('create, edit the draft, publish, edit again, publish, rollback', async (t) => {
  const created = await w.t0.request('POST', '/v1/templates', { body: { name: 'Receipt', subject: 'Your receipt', content: doc(para(text('Version one'))) } });
  t.is(created.status, 200);
  const id = created.body.id;
  t.regex(id, /^tp_/);
  t.is(created.body.publishedVersion, null);
  t.regex(created.body.html, /Version one/);
  for (const k of ['id', 'name', 'subject', 'content', 'html', 'publishedVersion', 'createdAt', 'updatedAt']) t.true(k in created.body, k);

  const p1 = await w.t0.request('POST', `/v1/templates/${id}/publish`);
  t.is(p1.body.publishedVersion, 1);
  const edited = await w.t0.request('PATCH', `/v1/templates/${id}`, { body: { content: doc(para(text('Version two'))), subject: 'Receipt v2' } });
  t.regex(edited.body.html, /Version two/);
  t.is(edited.body.publishedVersion, 1, 'editing does not change what sends');
  let versions = (await w.t0.request('GET', `/v1/templates/${id}/versions`)).body;
  t.is(versions.versions.length, 1);
  t.regex(versions.versions[0].html, /Version one/);
  t.true(versions.versions[0].isPublished);

  const p2 = await w.t0.request('POST', `/v1/templates/${id}/publish`);
  t.is(p2.body.publishedVersion, 2);
  const rolled = await w.t0.request('POST', `/v1/templates/${id}/rollback`, { body: { versionNumber: 1 } });
  t.is(rolled.body.publishedVersion, 1);
  versions = (await w.t0.request('GET', `/v1/templates/${id}/versions`)).body;
  t.deepEqual(versions.versions.map((v: any) => [v.versionNumber, v.isPublished]), [[1, true], [2, false]]);
  t.is(versions.versions[1].subject, 'Receipt v2');
  t.is((await w.t0.request('POST', `/v1/templates/${id}/rollback`, { body: { versionNumber: 9 } })).status, 400);
  t.is((await w.t0.request('POST', `/v1/templates/${id}/rollback`, { body: {} })).status, 400);
  t.is((await w.t0.request('PATCH', `/v1/templates/${id}`, { body: { html: '<p>direct</p>' } })).status, 400, 'HTML can never be set directly');
});

test('bad content is 400 naming the problem', async (t) => {
  const invalid = await w.t0.request('POST', '/v1/templates', { body: { name: 'x', subject: 's', content: '{not json' } });
  t.is(invalid.status, 400);
  t.regex(invalid.body.error.message, /content.*JSON/);
  const unknown = await w.t0.request('POST', '/v1/templates', { body: { name: 'x', subject: 's', content: doc(para(text('a')), { type: 'marquee' }) } });
  t.is(unknown.status, 400);
  t.regex(unknown.body.error.message, /marquee/);
  t.is((await w.t0.request('POST', '/v1/templates', { body: { subject: 's' } })).status, 400);
  const empty = await w.t0.request('POST', '/v1/templates', { body: { name: 'Empty', subject: 's' } });
  t.is(empty.status, 200);
});

test('a subject whose text outside its placeholders is a word too long for a header line is 400, not a failure at every send', async (t) => {
  const long = 'x'.repeat(950);
  for (const subject of [long, `Hi {{name}} ${long}`]) {
    const res = await w.t0.request('POST', '/v1/templates', { body: { name: 'Long', subject } });
    t.is(res.status, 400, JSON.stringify(res.body));
    t.regex(res.body.error.message, /^subject: contains a word longer than 900/);
  }
  // A value with a space would part the words around the placeholder: taken.
  t.is((await w.t0.request('POST', '/v1/templates', { body: { name: 'Parted', subject: `${'x'.repeat(480)}{{name}}${'y'.repeat(480)}` } })).status, 200);
  const ok = await w.t0.request('POST', '/v1/templates', { body: { name: 'Ok', subject: 's' } });
  const patched = await w.t0.request('PATCH', `/v1/templates/${ok.body.id}`, { body: { subject: long } });
  t.is(patched.status, 400, JSON.stringify(patched.body));
});

test('list search and paging; duplicate; delete twice is 404', async (t) => {
  const a = (await w.t0.request('POST', '/v1/templates', { body: { name: 'Zebra notice', subject: 'Stripes' } })).body;
  const search = await w.t0.request('GET', '/v1/templates?search=zebra');
  t.deepEqual(search.body.templates.map((x: any) => x.id), [a.id]);
  t.is((await w.t0.request('GET', '/v1/templates?search=STRIPES')).body.total, 1);
  const page = await w.t0.request('GET', '/v1/templates?limit=2&page=1');
  t.is(page.body.templates.length, 2);
  t.true(page.body.hasMore);
  t.is((await w.t0.request('GET', '/v1/templates?limit=101')).status, 400);
  const copy = await w.t0.request('POST', `/v1/templates/${a.id}/duplicate`);
  t.is(copy.body.name, 'Zebra notice (Copy)');
  t.not(copy.body.id, a.id);
  t.is(copy.body.publishedVersion, null);
  t.deepEqual((await w.t0.request('DELETE', `/v1/templates/${a.id}`)).body, { id: a.id, success: true, message: 'Template deleted' });
  t.is((await w.t0.request('DELETE', `/v1/templates/${a.id}`)).status, 404);
  t.is((await w.t0.request('GET', `/v1/templates/${a.id}`)).status, 404);
  t.is((await w.t0.request('POST', `/v1/templates/${a.id}/publish`)).status, 404);
});

test('sending with a template: published version, variables substituted and escaped, subject override', async (t) => {
  const tpl = (
    await w.t0.request('POST', '/v1/templates', {
      body: { name: 'Hello', subject: 'Hi {{firstName,fallback=friend}}', content: doc(para(text('Hello '), variable('firstName', 'there'), text('! Code: {{code}}'))) },
    })
  ).body;
  const never = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { subject: undefined, text: undefined, templateId: tpl.id }) });
  t.is(never.status, 400);
  t.regex(never.body.error.message, /never been published/);
  await w.t0.request('POST', `/v1/templates/${tpl.id}/publish`);
  // A later draft edit must not be what is sent.
  await w.t0.request('PATCH', `/v1/templates/${tpl.id}`, { body: { content: doc(para(text('DRAFT ONLY'))) } });

  const before = w.sink.messages.length;
  const res = await w.t0.request('POST', '/v1/emails', {
    body: sendBody(w, { to: 'tpl@example.net', subject: undefined, text: undefined, templateId: tpl.id, variables: { firstName: '<Ann>', code: 'A&B' } }),
  });
  t.is(res.status, 200, JSON.stringify(res.body));
  await w.sink.waitForMessages(before + 1);
  await w.settle();
  const parsed = await simpleParser(w.sink.messages.slice(before).find((m) => m.rcptTo.includes('tpl@example.net'))!.raw);
  t.is(parsed.subject, 'Hi <Ann>');
  t.regex(String(parsed.html), /Hello &lt;Ann&gt;! Code: A&amp;B/);
  t.notRegex(String(parsed.html), /DRAFT ONLY/);
  t.regex(parsed.text ?? '', /Hello <Ann>! Code: A&B/);
  const email = (await w.t0.request('GET', `/v1/emails/${res.body.emailId}`)).body;
  t.is(email.subject, 'Hi <Ann>');
  t.regex(email.html, /Hello &lt;Ann&gt;/);
  t.regex(email.text, /Hello <Ann>/);

  const missing = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'tpl2@example.net', subject: 'Custom subject', text: undefined, templateId: tpl.id }) });
  const e2 = (await w.t0.request('GET', `/v1/emails/${missing.body.emailId}`)).body;
  t.is(e2.subject, 'Custom subject');
  t.regex(e2.html, /Hello there! Code: </, 'missing variables fall back or become empty');

  const otherTeam = await w.t0.app.services.teams.create('Other');
  const otherTpl = (await w.t0.app.services.templates.list(otherTeam, { offset: 0, limit: 1 })).items[0]!;
  const foreign = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { subject: undefined, text: undefined, templateId: otherTpl.id }) });
  t.is(foreign.status, 400);
});

test('another team cannot read or change templates', async (t) => {
  const tpl = (await w.t0.request('POST', '/v1/templates', { body: { name: 'Private', subject: 's' } })).body;
  const key = (await twoTeams(w.t0, { b: { name: 'Intruder' } })).b.key;
  t.is((await w.t0.request('GET', `/v1/templates/${tpl.id}`, { key })).status, 404);
  t.is((await w.t0.request('PATCH', `/v1/templates/${tpl.id}`, { key, body: { name: 'x' } })).status, 404);
  t.is((await w.t0.request('DELETE', `/v1/templates/${tpl.id}`, { key })).status, 404);
  t.is((await w.t0.request('POST', `/v1/templates/${tpl.id}/publish`, { key })).status, 404);
});

// Two clients publishing the same template at once (a double click, a retry) each get a version:
// on PostgreSQL both transactions read the same latest version number and the second insert hit
// the (template, version) key, a 500 for a request that had done nothing wrong.
test('concurrent publishes of one template each make their own version', async (t) => {
  const created = await w.t0.request('POST', '/v1/templates', { body: { name: 'Racy', subject: 'racy', content: doc(para(text('racy'))) } });
  const id = created.body.id;
  const results = await Promise.all(Array.from({ length: 8 }, () => w.t0.request('POST', `/v1/templates/${id}/publish`)));
  t.deepEqual(
    results.map((r) => r.status),
    results.map(() => 200),
    JSON.stringify(results.map((r) => r.body.error ?? r.body.publishedVersion)),
  );
  const versions = await w.t0.request('GET', `/v1/templates/${id}/versions`);
  t.deepEqual(versions.body.versions.map((v: any) => v.versionNumber).sort((a: number, b: number) => a - b), [1, 2, 3, 4, 5, 6, 7, 8]);
  t.is(versions.body.publishedVersion, 8);
});
