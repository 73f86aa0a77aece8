import test from 'ava';
import type { Browser, Page } from 'playwright-core';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { smtpSend } from '../inbound/helpers/smtp-client.js';
import { startWebhookReceiver, type WebhookReceiver } from '../webhooks/webhook-receiver.js';
import { consoleUser } from './helpers/console-client.js';
import { axeSerious, launchBrowser, newContext, screenshot, signIn, watchPage } from './helpers/browser.js';

// Every console page, with data on it, in a real Chromium: under the enforced CSP with no
// refusal or script error, usable at 360 px without sideways scrolling, keyboard-reachable
// with a visible focus, and with no serious or critical axe-core violation. A screenshot of
// each is kept in test-artifacts/console/.

let w: MailWorld;
let browser: Browser;
let receiver: WebhookReceiver;
const OPERATOR = 'ops@sender.dev';
let pages: [string, string][] = [];

test.before(async () => {
  w = await startMailWorld({
    overrides: { webhooks: { allowPrivate: true } },
    sink: {
      onRcpt: (a) => (a.startsWith('slow') ? { code: 451, message: '4.7.1 Greylisted, try again later' } : a.startsWith('gone') ? { code: 550, message: '5.1.1 User unknown' } : undefined),
    },
  });
  const { t0 } = w;
  const app = t0.app;
  await consoleUser(app, OPERATOR, t0.teamId, true);
  receiver = await startWebhookReceiver();
  receiver.reply(() => ({ status: 503, body: 'maintenance' }));

  const post = async (path: string, body: unknown) => {
    const res = await t0.request('POST', path, { body });
    if (res.status !== 200) throw new Error(`${path}: ${JSON.stringify(res.body)}`);
    return res.body;
  };
  const webhook = await post('/v1/webhooks', { url: receiver.url, eventTypes: ['email.bounced', 'webhook.test'], description: 'Bounce handler' });
  const delivered = await post('/v1/emails', { from: 'Sender <hello@sender.dev>', to: 'alice@example.net', subject: 'Your invoice', html: '<h1>Invoice</h1><p>Thanks <b>Alice</b>.</p>', text: 'Invoice', tags: ['billing'] });
  await post('/v1/emails', { from: 'hello@sender.dev', to: 'slow@example.org', subject: 'Greylisted', text: 'later' });
  await post('/v1/emails', { from: 'hello@sender.dev', to: 'gone@example.org', subject: 'Bounces', text: 'no one' });
  await w.settle();
  await post(`/v1/webhooks/${webhook.id}/test`, {});
  await app.webhookDispatcher.whenIdle();

  const book = await post('/v1/contactBooks', { name: 'Newsletter' });
  await post(`/v1/contactBooks/${book.id}/contacts/bulk`, Array.from({ length: 30 }, (_, i) => ({ email: `reader${i}@example.org`, firstName: `Reader ${i}`, properties: { plan: i % 3 ? 'free' : 'pro' } })));
  const contact = (await t0.request('GET', `/v1/contactBooks/${book.id}/contacts?limit=1`)).body[0];
  const segment = await post('/v1/segments', { name: 'Pro readers', contactBookId: book.id, filters: { match: 'all', conditions: [{ field: 'properties.plan', op: 'eq', value: 'pro' }] } });
  const imported = await app.services.contactImports.start({ teamId: t0.teamId, domainId: null }, book.id, 'more.csv', 'email,firstName\nnew1@example.org,New\nbroken,Row\n');
  await app.services.contactImports.whenFinished(imported.id);
  const templates = await app.services.templates.list(t0.teamId, { offset: 0, limit: 10 });
  const template = templates.items.find((x) => x.name === 'Welcome')!;
  await post(`/v1/templates/${template.id}/publish`, {});
  const sent = await post('/v1/campaigns', { name: 'October digest', from: 'News <news@sender.dev>', subject: 'October', contactBookId: book.id, segmentId: segment.id, html: '<p>Hello {{firstName}}</p>', sendNow: true });
  await app.runCampaigns();
  await w.settle();
  const draft = await post('/v1/campaigns', { name: 'November digest', from: 'News <news@sender.dev>', subject: 'November', contactBookId: book.id, content: template.content });
  await post('/v1/suppressions', { email: 'unsubscribed@example.org' });
  await t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { receiving: true, openTracking: true } });
  const inbound = await smtpSend({
    port: app.listeners.inbound!.port,
    from: 'customer@remote.example',
    to: ['support@sender.dev'],
    raw: 'From: Customer <customer@remote.example>\r\nTo: support@sender.dev\r\nSubject: Help with my order\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Where is my <b>order</b>?</p><img src="https://remote.example/pixel.gif">\r\n',
  });
  if (!inbound.ok) throw new Error(inbound.response);
  const received = (await t0.request('GET', '/v1/receivedEmails')).body.receivedEmails[0];

  pages = [
    ['overview', '/console'],
    ['emails', '/console/emails'],
    ['email-detail', `/console/emails/${delivered.emailId}`],
    ['domains', '/console/domains'],
    ['domain-detail', `/console/domains/${w.domain.id}`],
    ['api-keys', '/console/api-keys'],
    ['contact-books', '/console/contacts'],
    ['contact-book', `/console/contacts/${book.id}`],
    ['contact', `/console/contacts/${book.id}/contacts/${contact.id}`],
    ['contact-import', `/console/contacts/${book.id}/imports/${imported.id}`],
    ['segments', '/console/segments'],
    ['segment-new', `/console/segments/new?book=${book.id}`],
    ['segment', `/console/segments/${segment.id}`],
    ['templates', '/console/templates'],
    ['template', `/console/templates/${template.id}`],
    ['campaigns', '/console/campaigns'],
    ['campaign-draft', `/console/campaigns/${draft.id}`],
    ['campaign-sent', `/console/campaigns/${sent.id}`],
    ['suppressions', '/console/suppressions'],
    ['webhooks', '/console/webhooks'],
    ['webhook', `/console/webhooks/${webhook.id}`],
    ['received', '/console/received'],
    ['received-detail', `/console/received/${received.id}`],
    ['account', '/console/account'],
    ['operator-teams', '/console/operator/teams'],
    ['operator-queue', '/console/operator/queue'],
    ['operator-queue-destination', '/console/operator/queue/destinations/example.org'],
    ['not-found', '/console/no/such/page'],
  ];
  browser = await launchBrowser();
});
test.after.always(async () => {
  await browser?.close();
  await receiver?.close();
  await w?.close();
});

const url = (path: string) => w.t0.baseUrl + path;
/** Every page is checked at 360 px; these are kept as pictures too. */
const NARROW_SHOTS = new Set(['overview', 'email-detail', 'domain-detail', 'contact-book', 'segment', 'campaign-sent', 'webhook']);

/** Widest element box on the page minus the viewport: > 0 means sideways scrolling. */
const overflow = (page: Page) => page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth - (globalThis as any).innerWidth);

test.serial('every page works under the enforced CSP, at 1280 and at 360 px, and a screenshot of each is kept', async (t) => {
  const context = await newContext(browser);
  const page = await context.newPage();
  const problems = watchPage(page);
  await page.goto(url('/'));
  await screenshot(page, 'root');
  await page.goto(url('/console/login'));
  await screenshot(page, 'login');
  await signIn(page, w.t0.baseUrl, OPERATOR);
  for (const [name, path] of pages) {
    await page.setViewportSize({ width: 1280, height: 900 });
    const res = await page.goto(url(path));
    t.is(res!.status(), name === 'not-found' ? 404 : 200, name);
    t.truthy(await page.locator('h1').innerText(), name);
    await screenshot(page, name);
    await page.setViewportSize({ width: 360, height: 780 });
    t.true((await overflow(page)) <= 0, `${name} scrolls sideways at 360 px`);
    if (NARROW_SHOTS.has(name)) await screenshot(page, `${name}-360`);
  }
  // The only refusals are the ones meant: the received message's remote image, blocked by the
  // sandboxed frame's own policy, and the 404 page's status.
  const blockedImage = problems.filter((p) => p.includes("Loading the image 'https://remote.example/pixel.gif' violates") && p.includes('img-src data: cid:'));
  t.true(blockedImage.length >= 1, 'the remote image is blocked');
  const notFound = problems.filter((p) => p.includes('status of 404'));
  t.is(notFound.length, 1);
  t.deepEqual(problems.filter((p) => !blockedImage.includes(p) && !notFound.includes(p)), []);
  // What the pages show is the data: a few spot checks.
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.goto(url('/console/operator/queue'));
  t.regex(await page.getByRole('row', { name: /example\.org/ }).innerText(), /example\.org\s+1\s+0\s+1\s+0\s+\d{4}-\d\d-\d\d \d\d:\d\d UTC\s+\d{3} /);
  await page.getByRole('link', { name: 'example.org' }).click();
  t.regex(await page.getByRole('row', { name: /slow@example\.org/ }).innerText(), /slow@example\.org\s+\d+\s+deferred\s+1[\s\S]*451 4\.7\.1 Greylisted/);
  await page.goto(url('/console'));
  t.regex(await page.locator('.attention').innerText(), /Webhook .* is failing: its last attempt got HTTP 503/);
  await page.goto(url('/console/emails/' + pages[2]![1].split('/').pop()));
  const frame = page.frameLocator('iframe.email-frame');
  t.is(await frame.locator('b').innerText(), 'Alice');
  await context.close();
});

test.serial('no serious or critical axe-core violation on any page (axe injected with the CSP bypassed, for the scan only)', async (t) => {
  const context = await newContext(browser, { bypassCSP: true });
  const page = await context.newPage();
  await page.goto(url('/console/login'));
  t.deepEqual(await axeSerious(page), [], 'login');
  await signIn(page, w.t0.baseUrl, OPERATOR);
  for (const [name, path] of pages) {
    await page.goto(url(path));
    t.deepEqual(await axeSerious(page), [], name);
  }
  await page.setViewportSize({ width: 360, height: 780 });
  for (const [name, path] of pages.slice(0, 4)) {
    await page.goto(url(path));
    t.deepEqual(await axeSerious(page), [], `${name} at 360 px`);
  }
  await context.close();
});

test.serial('keyboard: the first Tab reaches "Skip to content", focus is visible, and every control is reachable in order', async (t) => {
  const context = await newContext(browser);
  const page = await context.newPage();
  await signIn(page, w.t0.baseUrl, OPERATOR);
  await page.goto(url('/console/domains'));
  await page.keyboard.press('Tab');
  const focused = () =>
    page.evaluate(() => {
      const el = (globalThis as any).document.activeElement;
      const style = (globalThis as any).getComputedStyle(el);
      return { text: (el.textContent ?? '').trim(), tag: el.tagName, id: el.id, outline: style.outlineStyle, width: style.outlineWidth };
    });
  const skip = await focused();
  t.is(skip.text, 'Skip to content');
  t.not(skip.outline, 'none');
  t.not(skip.width, '0px');
  await page.keyboard.press('Enter');
  t.is((await focused()).id, 'main');
  // From the main content, Tab reaches the form's field and then its button, each with a ring.
  await page.keyboard.press('Tab');
  const field = await focused();
  t.is(field.id, 'f-name');
  t.not(field.outline, 'none');
  await page.keyboard.type('keyboard.dev');
  await page.keyboard.press('Tab');
  const button = await focused();
  t.is(button.text, 'Add domain');
  t.not(button.outline, 'none');
  await page.keyboard.press('Enter');
  await page.waitForURL(/\/console\/domains\/\d+$/);
  t.is(await page.locator('h1').innerText(), 'keyboard.dev');
  await context.close();
});
