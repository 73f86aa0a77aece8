import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { PASSWORD } from './console-client.js';

// A real headless Chromium (Debian's, never a downloaded one), one per test file. Playwright
// gives every launch a fresh temporary profile (its own --user-data-dir).

export const CHROMIUM = process.env.POSTHORN_TEST_CHROMIUM ?? '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export const ARTIFACTS = fileURLToPath(new URL('../../../../test-artifacts/console/', import.meta.url));
const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
}

/** Problems the page reported: CSP refusals, script errors, failed requests of ours. */
export function watchPage(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' || /Content Security Policy|Refused to/.test(m.text())) problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  return problems;
}

export async function signIn(page: Page, baseUrl: string, email: string, password = PASSWORD): Promise<void> {
  await page.goto(`${baseUrl}/console/login`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await Promise.all([page.waitForURL((u) => !u.pathname.startsWith('/console/login')), page.getByRole('button', { name: 'Sign in' }).click()]);
}

export async function newContext(browser: Browser, o: { width?: number; bypassCSP?: boolean; clipboard?: boolean } = {}): Promise<BrowserContext> {
  return browser.newContext({
    viewport: { width: o.width ?? 1280, height: 900 },
    bypassCSP: o.bypassCSP ?? false,
    reducedMotion: 'reduce',
    permissions: o.clipboard ? ['clipboard-read', 'clipboard-write'] : [],
  });
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[]; html: string }[];
}

/** axe-core's WCAG 2.x A/AA rules on the current page; only serious and critical violations are returned. */
export async function axeSerious(page: Page): Promise<AxeViolation[]> {
  // Functions given to evaluate run in the page (no closures): they reach it through globalThis.
  if (!(await page.evaluate(() => 'axe' in globalThis))) await page.addScriptTag({ path: AXE });
  const result: { violations: AxeViolation[] } = await page.evaluate(async () =>
    (globalThis as any).axe.run((globalThis as any).document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] }, resultTypes: ['violations'] }),
  );
  return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => ({ target: n.target, html: n.html.slice(0, 200) })) }));
}
