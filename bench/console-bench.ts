// npm run bench, phase 4: the web console on the app the other phases filled (10,000 emails).
// Server: the time to render the overview, the email list and an email's page (p50 of 30
// requests each) and their size. Browser (Debian's Chromium via playwright-core, skipped when
// it is absent), in a fresh profile each time: the sign-in page with nothing cached (HTML, CSS,
// JS, icon), then the overview after signing in, each until interactive (DOMContentLoaded: the
// module script has run) and loaded.
import { existsSync } from 'node:fs';
import type { App } from '../src/app.js';

const CHROMIUM = process.env.BENCH_CHROMIUM ?? '/usr/bin/chromium';
const PASSWORD = 'benchmark passphrase';

export interface ConsoleBench {
  renderMsP50: { overview: number; emails: number; email: number };
  pageKb: { overview: number; emails: number; email: number };
  browser: { signInInteractiveMs: number; signInTransferredKb: number; overviewInteractiveMs: number; overviewLoadedMs: number } | null;
}

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const round = (n: number) => Math.round(n * 10) / 10;

export async function runConsoleBench(app: App, baseUrl: string, teamId: number): Promise<ConsoleBench> {
  await app.services.users.create({ email: 'bench@console.bench', teamId, operator: true, password: PASSWORD });
  const cookie = await signIn(baseUrl);
  const emailId = (await app.services.emails.list({ teamId, domainId: null, apiKeyId: null }, { offset: 0, limit: 1 })).data![0]!.id;
  const pages = { overview: '/console', emails: '/console/emails', email: `/console/emails/${emailId}` };
  const renderMsP50 = { overview: 0, emails: 0, email: 0 };
  const pageKb = { overview: 0, emails: 0, email: 0 };
  for (const [name, path] of Object.entries(pages) as [keyof typeof pages, string][]) {
    const times: number[] = [];
    for (let i = 0; i < 30; i++) {
      const started = performance.now();
      const res = await fetch(baseUrl + path, { headers: { cookie } });
      const body = await res.text();
      times.push(performance.now() - started);
      pageKb[name] = round(Buffer.byteLength(body) / 1024);
    }
    renderMsP50[name] = round(p50(times));
  }
  return { renderMsP50, pageKb, browser: existsSync(CHROMIUM) ? await browserTiming(baseUrl) : null };
}

async function signIn(baseUrl: string): Promise<string> {
  const login = await fetch(`${baseUrl}/console/login`);
  const loginCookie = login.headers.getSetCookie()[0]!.split(';')[0]!;
  const token = /name="_csrf" value="([^"]+)"/.exec(await login.text())![1]!;
  const res = await fetch(`${baseUrl}/console/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: loginCookie, origin: baseUrl, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: token, email: 'bench@console.bench', password: PASSWORD }).toString(),
  });
  return res.headers.getSetCookie().find((c) => c.startsWith('posthorn_session='))!.split(';')[0]!;
}

async function browserTiming(baseUrl: string): Promise<ConsoleBench['browser']> {
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
  try {
    const measure = (page: import('playwright-core').Page) =>
      page.evaluate(() => {
        const g = globalThis as any;
        const nav = g.performance.getEntriesByType('navigation')[0];
        const bytes = [nav, ...g.performance.getEntriesByType('resource')].reduce((a: number, e: any) => a + (e.transferSize || 0), 0);
        return { interactive: nav.domContentLoadedEventEnd - nav.startTime, loaded: nav.loadEventEnd - nav.startTime, bytes };
      });
    const signInPage: number[] = [];
    const overview: number[] = [];
    const overviewLoaded: number[] = [];
    let signInBytes = 0;
    for (let i = 0; i < 5; i++) {
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(`${baseUrl}/console/login`, { waitUntil: 'load' });
      const cold = await measure(page);
      signInPage.push(cold.interactive);
      signInBytes = cold.bytes;
      await page.fill('#email', 'bench@console.bench');
      await page.fill('#password', PASSWORD);
      await Promise.all([page.waitForURL(`${baseUrl}/console`, { waitUntil: 'load' }), page.click('button[type=submit]')]);
      const t = await measure(page);
      overview.push(t.interactive);
      overviewLoaded.push(t.loaded);
      await context.close();
    }
    return {
      signInInteractiveMs: round(p50(signInPage)),
      signInTransferredKb: round(signInBytes / 1024),
      overviewInteractiveMs: round(p50(overview)),
      overviewLoadedMs: round(p50(overviewLoaded)),
    };
  } finally {
    await browser.close();
  }
}
