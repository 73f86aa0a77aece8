import test from 'ava';
import type { Browser, Page } from 'playwright-core';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { OpenApiCheck } from '../proof/helpers/openapi-check.js';
import { consoleUser } from './helpers/console-client.js';
import { launchBrowser, newContext, signIn, watchPage } from './helpers/browser.js';

// An operator's afternoon with the queue, in a real Chromium: a destination whose MX (the SMTP
// sink) answers 451 piles up deferred mail; the operator suspends it, sees it held, resumes it,
// then bounces what is left, each step confirmed where it destroys something. The audit log,
// read through the operator API, names the console user for every change.

let w: MailWorld;
let browser: Browser;
let operatorKey: string;
const OPERATOR = 'ops@sender.dev';
const MEMBER = 'dev@sender.dev';
const DEST = 'deferring.example';
const emails: string[] = [];

test.before(async () => {
  // A clock that stands still: the deferred mail never comes due on its own while the test runs.
  w = await startMailWorld({ clock: new ManualClock(Date.now()), sink: { onRcpt: (a) => (a.endsWith(`@${DEST}`) ? { code: 451, message: '4.3.2 Overloaded, try again later' } : undefined) } });
  w.addRecipientDomain(DEST);
  await consoleUser(w.t0.app, OPERATOR, w.t0.teamId, true);
  await consoleUser(w.t0.app, MEMBER, w.t0.teamId);
  operatorKey = (await w.t0.app.services.operatorKeys.create('auditor')).token;
  for (const n of [1, 2, 3]) {
    const res = await w.t0.request('POST', '/v1/emails', { body: { from: 'hello@sender.dev', to: `user${n}@${DEST}`, subject: `Order ${n}`, text: 'Thanks' } });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    emails.push(res.body.emailId);
  }
  await w.settle();
  browser = await launchBrowser();
});
test.after.always(async () => {
  await browser?.close();
  await w?.close();
});

const url = (path: string) => w.t0.baseUrl + path;
const flash = (page: Page) => page.locator('.flash').innerText();
const destinationRow = (page: Page) => page.getByRole('region', { name: 'Queued mail by destination' }).getByRole('row', { name: new RegExp(DEST) });

test.serial('suspend a deferring destination, see it held, resume it, bounce it (after a confirm); the audit log names the console user', async (t) => {
  const me = (await w.t0.app.services.users.list()).find((u) => u.email === OPERATOR)!;
  const actor = `console user ${me.id} (${OPERATOR})`;
  const context = await newContext(browser);
  const page = await context.newPage();
  const problems = watchPage(page);
  await signIn(page, w.t0.baseUrl, OPERATOR);

  // The queue: three deferred deliveries to the destination, with the MX's 451.
  await page.goto(url('/console/operator/queue'));
  t.regex(await page.locator('.counters').innerText(), /3\s+deferred/);
  t.regex(await destinationRow(page).innerText(), /deferring\.example\s+3\s+0\s+3\s+0[\s\S]*451 4\.3\.2 Overloaded[\s\S]*from mx\.sink\.test/);

  // Suspend it for 45 minutes from its page.
  await page.getByRole('link', { name: DEST }).click();
  await page.waitForURL(/\/destinations\/deferring\.example$/);
  await page.getByLabel('Minutes').fill('45');
  await page.locator('#f-suspend-reason').fill('their MX is overloaded');
  await Promise.all([page.waitForURL(/\/destinations\/deferring\.example$/), page.getByRole('button', { name: 'Suspend' }).click()]);
  t.regex(await flash(page), /^deferring\.example is suspended until .* UTC/);
  const suspension = page.getByRole('region', { name: 'Active suspensions' });
  t.regex(await suspension.innerText(), new RegExp(`their MX is overloaded[\\s\\S]*${actor.replace(/[().]/g, '\\$&')}`));
  t.is(await page.getByRole('region', { name: `Queued deliveries to ${DEST}` }).locator('.badge', { hasText: 'suspended' }).count(), 3);
  const held = await w.t0.app.services.queue.summary();
  t.is(held.totals.suspended, 3);
  t.is(held.suspensions[0]!.createdBy, actor);

  // Listed as suspended on the queue page, with the reason; then resumed (after a confirm).
  await page.goto(url('/console/operator/queue'));
  t.regex(await destinationRow(page).innerText(), /suspended until[\s\S]*their MX is overloaded/i);
  page.once('dialog', (d) => void d.accept());
  await Promise.all([page.waitForURL(/\/operator\/queue$/), page.getByRole('button', { name: 'Resume' }).click()]);
  t.regex(await flash(page), /The suspension of deferring\.example has ended/);
  t.regex(await page.getByRole('heading', { name: 'Active suspensions' }).locator('..').innerText(), /No suspension is active/);
  t.is((await w.t0.app.services.queue.summary()).totals.suspended, 0);

  // Bounce: a dismissed confirm changes nothing; an accepted one fails all three.
  await page.goto(url(`/console/operator/queue/destinations/${DEST}`));
  await page.getByLabel('Reason for the bounce').fill('the customer closed the account');
  let asked = '';
  page.once('dialog', (d) => {
    asked = d.message();
    void d.dismiss();
  });
  await page.getByRole('button', { name: 'Bounce all' }).click();
  t.regex(asked, /^Bounce all 3 queued deliveries to deferring\.example\?/);
  t.is((await w.t0.app.services.queue.summary()).totals.deferred, 3);
  page.once('dialog', (d) => void d.accept());
  await Promise.all([page.waitForURL(/\/destinations\/deferring\.example$/), page.getByRole('button', { name: 'Bounce all' }).click()]);
  t.regex(await flash(page), /^3 queued deliveries to deferring\.example were bounced/);
  t.regex(await page.locator('main').innerText(), /Nothing is queued for deferring\.example/);
  for (const id of emails) {
    const email = (await w.t0.request('GET', `/v1/emails/${id}`)).body;
    t.is(email.latestStatus, 'FAILED', id);
  }
  t.deepEqual(problems, []);
  await context.close();

  // The audit log through the operator API, conforming to its OpenAPI document.
  const doc = await w.t0.request('GET', '/admin/v1/openapi.json', { key: null });
  const check = new OpenApiCheck(doc.body, '/admin/v1');
  const audit = await w.t0.request('GET', '/admin/v1/audit?limit=3', { key: operatorKey });
  t.deepEqual(check.check('GET', '/audit', audit), []);
  t.deepEqual(
    audit.body.entries.map((e: any) => [e.action, e.actor, e.consoleUserId, e.keyId]),
    [
      ['queue.bounce', actor, me.id, null],
      ['queue.resume', actor, me.id, null],
      ['queue.suspend', actor, me.id, null],
    ],
  );
  t.like(audit.body.entries[0].target, { destination: DEST, reason: 'the customer closed the account', bounced: 3 });
  t.like(audit.body.entries[2].target, { destination: DEST, minutes: 45, reason: 'their MX is overloaded' });
});

test.serial('a team member sees no operator link and gets the 403 page on the queue', async (t) => {
  const context = await newContext(browser);
  const page = await context.newPage();
  await signIn(page, w.t0.baseUrl, MEMBER);
  t.is(await page.locator('a[href^="/console/operator"]').count(), 0);
  for (const path of ['/console/operator/queue', `/console/operator/queue/destinations/${DEST}`]) {
    const res = await page.goto(url(path));
    t.is(res!.status(), 403, path);
    t.is(await page.locator('h1').innerText(), 'Not allowed');
    t.regex(await page.locator('main').innerText(), /This page is for operators of this server/);
  }
  await context.close();
});
