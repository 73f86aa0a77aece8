import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { publishRecords } from '../helpers/domain-fixtures.js';
import { startWebhookReceiver, type WebhookReceiver } from '../webhooks/webhook-receiver.js';
import { consoleUser } from './helpers/console-client.js';
import { launchBrowser, newContext, screenshot, signIn, watchPage } from './helpers/browser.js';

// What a person does in the console, in a real Chromium against a real app: a DNS zone of
// its own and an SMTP sink as every recipient's MX. One browser for the file; the journeys
// run in order on one signed-in page, as one person's afternoon would.

let w: MailWorld;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let problems: string[];
let receiver: WebhookReceiver;
const USER = 'ada@sender.dev';
const ROWS = 1000;

test.before(async () => {
  w = await startMailWorld({ overrides: { webhooks: { allowPrivate: true } } });
  await consoleUser(w.t0.app, USER, w.t0.teamId);
  receiver = await startWebhookReceiver();
  browser = await launchBrowser();
  context = await newContext(browser, { clipboard: true });
  page = await context.newPage();
  problems = watchPage(page);
  await signIn(page, w.t0.baseUrl, USER);
});
test.after.always(async () => {
  await browser?.close();
  await receiver?.close();
  await w?.close();
});

const url = (path: string) => w.t0.baseUrl + path;
const flash = () => page.locator('.flash');

test.serial('add a domain, publish its records, verify it, send a test email and watch it reach DELIVERED', async (t) => {
  await page.goto(url('/console/domains'));
  await page.locator('#f-name').fill('news.dev');
  await page.getByRole('button', { name: 'Add domain' }).click();
  await page.waitForURL(/\/console\/domains\/\d+$/);
  t.regex(await flash().innerText(), /news\.dev added/);
  // The records table shows what to publish, each with its status and a copy button.
  const rows = page.locator('table tbody tr');
  t.is(await rows.count(), 4);
  t.regex(await rows.first().innerText(), /TXT\s+s\d*\._domainkey\.news\.dev|_domainkey\.news\.dev/);
  // Copy buttons put the exact record on the clipboard.
  await page.getByRole('button', { name: 'Copy value' }).first().click();
  const copied = await page.evaluate(() => (globalThis as any).navigator.clipboard.readText());
  t.regex(copied, /^v=DKIM1; k=rsa; p=[A-Za-z0-9+/=]+$/);

  const domain = (await w.t0.app.services.domains.list({ teamId: w.t0.teamId, domainId: null })).find((d) => d.name === 'news.dev')!;
  // What the page asked for is what gets published.
  const shown = await page.locator('table tbody tr td:nth-child(3) code').allInnerTexts();
  t.deepEqual(shown, domain.dnsRecords.map((r) => r.value));
  t.is(copied, domain.dnsRecords[0]!.value);
  publishRecords(w.t0, domain);
  await page.getByRole('button', { name: 'Verify now' }).click();
  await page.waitForURL(/\/console\/domains\/\d+$/);
  t.regex(await flash().innerText(), /Domain verified/);
  t.is((await page.locator('.facts .badge').first().textContent())!.trim(), 'SUCCESS');

  await page.goto(url('/console/emails'));
  await page.getByText('Send a test email').click();
  await page.locator('#f-fromLocal').fill('hello');
  await page.locator('#f-fromDomain').selectOption('news.dev');
  await page.locator('#f-to').fill('alice@example.net');
  await page.locator('#f-subject').fill('Console test <b>bold?</b>');
  await page.getByRole('button', { name: 'Send' }).click();
  await page.waitForURL(/\/console\/emails\/em_/);
  t.is(await page.locator('h1').innerText(), 'Console test <b>bold?</b>');
  // The page refreshes itself until the recipient is delivered.
  await page.locator('.timeline .badge', { hasText: 'DELIVERED' }).waitFor({ timeout: 20_000 });
  const [message] = await w.sink.waitForMessages(1);
  t.regex(message!.raw.toString(), /Subject: Console test <b>bold\?<\/b>/);
  t.regex(await page.locator('table[role], .table-wrap').first().innerText(), /alice@example\.net/);
  t.regex(await page.locator('.table-wrap').first().innerText(), /mx\.sink\.test/);
  t.regex(await page.locator('.timeline').innerText(), /SMTP 250/);
  await screenshot(page, 'journey-email-delivered');
});

test.serial('import a 1,000-row CSV with 3 bad rows and read the report', async (t) => {
  await page.goto(url('/console/contacts'));
  await page.locator('#f-name').fill('Customers');
  await page.getByRole('button', { name: 'Create book' }).click();
  await page.waitForURL(/\/console\/contacts\/cb_/);

  // Row 2 has a quoted field with a comma, a quote and a line break: it spans lines 3 and 4,
  // so data row i (i > 2) is on line i + 2.
  const lines = ['email,firstName,lastName,subscribed,plan'];
  for (let i = 1; i <= ROWS; i++) {
    if (i === 2) lines.push('"user2@example.org","Ann, ""Jr""","Two\nLines",true,free');
    else if (i === 101) lines.push('not-an-address,Bad,Email,true,free');
    else if (i === 502) lines.push('user502@example.org,Too,Few');
    else if (i === 903) lines.push('user903@example.org,Odd,Flag,maybe,free');
    else lines.push(`user${i}@example.org,First${i},Last${i},true,${i % 50 === 0 ? 'pro' : 'free'}`);
  }
  await page.setInputFiles('#f-file', { name: 'customers.csv', mimeType: 'text/csv', buffer: Buffer.from(lines.join('\r\n') + '\r\n') });
  await page.getByRole('button', { name: 'Import' }).click();
  await page.waitForURL(/\/imports\/ci_/);
  t.regex(await flash().innerText(), /Importing 1000 rows from customers\.csv/);
  // The progress bar fills as chunks are recorded; the report replaces it when done.
  await page.locator('#import-errors').waitFor({ timeout: 30_000 });
  t.is(await page.locator('#import-progress').getAttribute('value'), String(ROWS));
  const facts = (await page.locator('.facts').innerText()).toLowerCase();
  t.regex(facts, /added\s+997/);
  t.regex(facts, /refused\s+3/);
  const report = await page.locator('#import-errors tbody tr').allInnerTexts();
  t.is(report.length, 3);
  t.regex(report[0]!, /^103\s+not-an-address\s+email: "not-an-address" is not a valid email address/);
  t.regex(report[1]!, /^504\s+user502@example\.org\s+has 3 fields where the header has 5/);
  t.regex(report[2]!, /^905\s+user903@example\.org\s+subscribed: "maybe" is not/);
  await screenshot(page, 'journey-import-report');

  await page.getByRole('link', { name: /Customers/ }).click();
  await page.getByLabel('Search by email or name').fill('Ann, "Jr"');
  await page.getByRole('button', { name: 'Search' }).click();
  t.regex(await page.locator('tbody').innerText(), /user2@example\.org\s+Ann, "Jr" Two\nLines|user2@example\.org/);
});

test.serial('build a segment with a live count, send a campaign to it and watch the counters move', async (t) => {
  await page.goto(url('/console/segments'));
  await page.getByRole('button', { name: 'Build a segment' }).click();
  await page.waitForURL(/\/console\/segments\/new/);
  const count = page.locator('#segment-count');
  await t.notThrowsAsync(count.filter({ hasText: '997 contacts match' }).waitFor());
  await page.locator('#f-name').fill('Pro customers');
  await page.getByRole('button', { name: 'Add condition' }).click();
  const row = page.locator('.condition').nth(2);
  await row.getByRole('combobox', { name: /field/ }).selectOption('property');
  await row.getByRole('textbox', { name: /property name/ }).fill('plan');
  await row.getByRole('combobox', { name: /comparison/ }).selectOption('eq');
  await row.getByRole('textbox', { name: /value/ }).fill('pro');
  // Counted by the server as the filter is typed, before anything is saved.
  await count.filter({ hasText: '20 contacts match' }).waitFor();
  await row.getByRole('textbox', { name: /property name/ }).fill('bad name!');
  await count.filter({ hasText: /property names are/ }).waitFor();
  await row.getByRole('textbox', { name: /property name/ }).fill('plan');
  await count.filter({ hasText: '20 contacts match' }).waitFor();
  await page.getByRole('button', { name: 'Save segment' }).click();
  await page.waitForURL(/\/console\/segments\/sg_/);
  t.regex(await page.locator('h2', { hasText: 'Members now' }).innerText(), /Members now \(20\)/);

  await page.goto(url('/console/campaigns'));
  await page.locator('#f-name').fill('Spring news');
  await page.locator('#f-contactBookId').selectOption({ index: 0 });
  await page.locator('#f-segmentId').selectOption({ label: 'Pro customers' });
  await page.locator('#f-templateId').selectOption({ label: 'Template: Product update' });
  await page.getByRole('button', { name: 'Create draft' }).click();
  await page.waitForURL(/\/console\/campaigns\/cp_/);
  t.regex(await page.locator('.facts').first().innerText(), /draft/i);
  // The template's content arrives in the editor as text markup, and renders in the preview.
  t.regex(await page.locator('#f-content').inputValue(), /\S/);
  await t.notThrowsAsync(page.frameLocator('iframe[name="campaign-preview"]').locator('body').waitFor());

  await page.getByRole('button', { name: 'Send or schedule' }).click();
  await page.waitForURL(/\/console\/campaigns\/cp_/);
  t.regex(await flash().innerText(), /Sending now/);
  await w.t0.app.runCampaigns();
  await w.settle();
  // The counters section refreshes itself while the campaign runs.
  await page.locator('[data-counter="delivered"]', { hasText: /^20$/ }).waitFor({ timeout: 20_000 });
  t.is(await page.locator('[data-counter="sent"]').innerText(), '20');
  t.regex(await page.locator('.facts').first().innerText(), /sent|running/i);
  t.is(await page.locator('#campaign-progress').getAttribute('value'), '20');
  await screenshot(page, 'journey-campaign-sent');
  const recipients = w.sink.messages.filter((m) => m.raw.toString().includes('List-Unsubscribe')).flatMap((m) => m.rcptTo);
  t.is(recipients.length, 20);
  t.true(recipients.every((r) => /^user\d*(50|00)@example\.org$/.test(r)));
});

test.serial('create a webhook (secret shown once), send a test event and read the failed attempt', async (t) => {
  receiver.reply(() => ({ status: 500, body: 'receiver exploded' }));
  await page.goto(url('/console/webhooks'));
  await page.locator('#f-url').fill(receiver.url);
  await page.locator('#f-description').fill('CRM sync');
  await page.getByLabel('webhook.test').check();
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  const secret = await page.locator('#secret-value').innerText();
  t.regex(secret, /\S{20,}/);
  // Shown once: the list, loaded again, does not have it.
  await page.goto(url('/console/webhooks'));
  t.false((await page.content()).includes(secret));

  await page.getByRole('link', { name: receiver.url }).click();
  await page.getByRole('button', { name: 'Send a test event' }).click();
  await page.waitForURL(/watch=1/);
  const attempt = page.locator('.attempts li').first();
  await attempt.waitFor({ timeout: 20_000 });
  t.regex(await attempt.locator('summary').innerText(), /failed\s+webhook\.test · attempt 1 of 6 · HTTP 500/);
  await attempt.locator('summary').click();
  const request = await attempt.locator('pre').first().innerText();
  t.regex(request, new RegExp(`^POST ${receiver.url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
  t.regex(request, /X-Service-Signature: v1=[0-9a-f]{64}/i);
  t.regex(request, /"type": "webhook\.test"/);
  t.regex(await attempt.locator('pre').nth(1).innerText(), /HTTP 500\s+receiver exploded/);
  const [call] = await receiver.waitFor(1);
  t.is(call!.json.type, 'webhook.test');
  await screenshot(page, 'journey-webhook-attempt');

  // The overview now says what needs attention.
  await page.goto(url('/console'));
  t.regex(await page.locator('.attention').innerText(), /Webhook .* is failing: its last attempt got HTTP 500/);
});

test.serial('in the browser too: a cross-site form is refused, a signed-out cookie is dead, team B cannot open team A\'s pages', async (t) => {
  // An attacker's page on another origin that posts a form to the console on load.
  const target = url('/console/suppressions');
  const csrf = await page.locator('input[name="_csrf"]').first().inputValue(); // even with a valid token
  const evil: Server = createServer((_req, res) => {
    res.setHeader('content-type', 'text/html');
    res.end(`<form id=f method=post action="${target}"><input name=_csrf value="${csrf}"><input name=email value="evil@example.org"></form><script>document.getElementById('f').submit()</script>`);
  });
  await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
  try {
    const attacker = await context.newPage();
    await attacker.goto(`http://localhost:${(evil.address() as AddressInfo).port}/`);
    await attacker.waitForURL(target);
    t.regex(await attacker.locator('main').innerText(), /came from another site and was refused/);
    await attacker.close();
  } finally {
    evil.close();
  }
  t.false((await w.t0.app.services.suppressions.list(w.t0.teamId, { offset: 0, limit: 100 })).items.some((s) => s.email === 'evil@example.org'));

  // Sign out; the cookie the browser had is worth nothing afterwards.
  const before = (await context.cookies()).find((c) => c.name === 'posthorn_session')!;
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL(/\/console\/login/);
  t.regex(await page.locator('.flash').innerText(), /signed out/);
  const replay = await newContext(browser);
  await replay.addCookies([before]);
  const p2 = await replay.newPage();
  await p2.goto(url('/console/domains'));
  t.regex(p2.url(), /\/console\/login\?next=/);

  // Team B, signed in, types the address of team A's domain.
  const teamB = await w.t0.app.services.teams.create('Team B');
  await consoleUser(w.t0.app, 'bo@team-b.example', teamB);
  await signIn(p2, w.t0.baseUrl, 'bo@team-b.example');
  const domainA = (await w.t0.app.services.domains.list({ teamId: w.t0.teamId, domainId: null }))[0]!;
  const res = await p2.goto(url(`/console/domains/${domainA.id}`));
  t.is(res!.status(), 404);
  t.false((await p2.content()).includes(domainA.name));
  await replay.close();

  t.deepEqual(problems, [], 'no CSP refusal or script error on any page of the journeys');
});
