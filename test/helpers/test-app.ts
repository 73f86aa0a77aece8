import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp, type App } from '../../src/app.js';
import { loadConfig, type DeepPartial } from '../../src/config/load.js';
import type { Config } from '../../src/config/defaults.js';
import type { Clock } from '../../src/lib/clock.js';
import type { Logger } from '../../src/lib/logger.js';
import { createDnsClient, type DnsResolver } from '../../src/lib/dns/dns-client.js';
import { startDnsZone, type DnsZone } from './dns-zone.js';
import { createTestDatabase, dropTestDatabase, testStoreKind } from './pg-databases.js';
import { seedListenerCert, testDkimKeyPair } from './test-keys.js';

/**
 * The zone answers from this process, so a lookup times out only when the process (or the
 * machine) is too busy to run the answer's turn: two tries of a second keep a loaded CI
 * machine from failing a test on a lookup. A test of timeouts blackholes the name.
 */
export const TEST_DNS_TIMEOUT_MS = 1000;

export interface TestResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export interface RequestOptions {
  body?: unknown;
  /** Raw body text, sent as is (for malformed JSON tests). */
  rawBody?: string;
  /** API key to use; null sends no Authorization header. Defaults to the team's FULL key. */
  key?: string | null;
  headers?: Record<string, string>;
}

export interface TestApp {
  app: App;
  baseUrl: string;
  /** A FULL key of team `teamId`. */
  key: string;
  teamId: number;
  zone: DnsZone;
  dataDir: string;
  config: Config;
  request<T = any>(method: string, path: string, opts?: RequestOptions): Promise<TestResponse<T>>;
  /** Stops the app but keeps the data dir (for restart tests). */
  stop(): Promise<void>;
  /** Stops the app and removes its data dir and DNS zone. */
  close(): Promise<void>;
}

export interface TestAppOptions {
  overrides?: DeepPartial<Config>;
  clock?: Clock;
  /** Reuse a data dir (restart tests). */
  dataDir?: string;
  zone?: DnsZone;
  /** Instead of a silent one (tests that read the log lines). */
  logger?: Logger;
  /** Wraps the resolver of the test zone (a test that holds a lookup until it lets it go). */
  resolver?: (zoneResolver: DnsResolver) => DnsResolver;
  /**
   * The app makes its STARTTLS certificate itself, as a first start does. Otherwise a data dir
   * without one gets the suite's kept certificate for the hostname (test-keys.ts).
   */
  makeListenerCert?: boolean;
  /** New domains get a fresh DKIM key each, as in production, instead of the suite's kept keys (test-keys.ts). */
  makeDkimKeys?: boolean;
  /** Told of a condition the app cannot run on, once it has stopped (AppOptions.onFatal). */
  onFatal?: (err: Error) => void;
  /** scrypt's log2 N for new console passwords: 10 unless given (a sign-in ~1 ms instead of ~100; the CLI and `serve` use the product's 15). */
  passwordHashCost?: number;
}

const TEST_PASSWORD_HASH_COST = 10;

/** Where a test data dir's PostgreSQL database is named (restart tests reopen the same one). */
const DATABASE_URL_FILE = '.test-database-url';

/**
 * The store.url of a test app: none on SQLite; on PostgreSQL (POSTHORN_TEST_STORE=postgres) the
 * database of this data dir, made from the migrated template the first time.
 */
export async function testDatabaseUrl(dataDir: string): Promise<{ url: string; created: boolean }> {
  if (testStoreKind() !== 'postgres') return { url: '', created: false };
  const file = join(dataDir, DATABASE_URL_FILE);
  if (existsSync(file)) return { url: readFileSync(file, 'utf8'), created: false };
  const url = await createTestDatabase();
  writeFileSync(file, url);
  return { url, created: true };
}

/**
 * The environment a CLI child needs to open the store of a test data dir: its directory and,
 * under POSTHORN_TEST_STORE=postgres, its database (the one a test app on that dir uses).
 */
export async function storeEnvOf(dataDir: string): Promise<Record<string, string>> {
  const { url } = await testDatabaseUrl(dataDir);
  return { POSTHORN_DATA_DIR: dataDir, ...(url ? { POSTHORN_DATABASE_URL: url } : {}) };
}

/** Drops the test database of a data dir, if it has one. */
export async function dropDataDirDatabase(dataDir: string): Promise<void> {
  const file = join(dataDir, DATABASE_URL_FILE);
  if (existsSync(file)) await dropTestDatabase(readFileSync(file, 'utf8'));
}

/** Each test file builds its own world: temp data dir, its own DNS zone, HTTP on 127.0.0.1:0. */
export async function startTestApp(opts: TestAppOptions = {}): Promise<TestApp> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'posthorn-test-'));
  const database = opts.overrides?.store?.url === undefined ? await testDatabaseUrl(dataDir) : { url: opts.overrides.store.url, created: false };
  const zone = opts.zone ?? (await startDnsZone());
  const base: DeepPartial<Config> = {
    dataDir,
    hostname: 'mx.posthorn.test',
    publicUrl: 'http://posthorn.test',
    log: { level: 'silent' },
    http: { host: '127.0.0.1', port: 0 },
    inbound: { host: '127.0.0.1', port: 0 },
    submission: { host: '127.0.0.1', port: 0 },
    rateLimit: { perSecond: 10_000 },
    dns: { servers: [zone.server], timeoutMs: TEST_DNS_TIMEOUT_MS },
    store: { url: database.url },
  };
  const config = loadConfig({ env: {}, overrides: deepMerge(base, opts.overrides ?? {}) });
  if (!opts.makeListenerCert) await seedListenerCert(dataDir, config.hostname);
  const zoneResolver = createDnsClient({ servers: [zone.server], timeoutMs: TEST_DNS_TIMEOUT_MS, tries: 2 });
  const resolver = opts.resolver ? opts.resolver(zoneResolver) : zoneResolver;
  const app = await createApp({ config, clock: opts.clock, resolver, logger: opts.logger, dkimKeyPair: opts.makeDkimKeys ? undefined : testDkimKeyPair, passwordHashCost: opts.passwordHashCost ?? TEST_PASSWORD_HASH_COST, onFatal: opts.onFatal });
  const listeners = await app.start();
  const baseUrl = `http://127.0.0.1:${listeners.http!.port}`;
  const teams = await app.services.teams.list();
  const teamId = teams[0]?.id ?? (await app.services.teams.create('Test team'));
  const key = (await app.services.apiKeys.create(teamId, { name: 'test', permission: 'FULL' })).token;

  async function request<T>(method: string, path: string, ro: RequestOptions = {}): Promise<TestResponse<T>> {
    const headers: Record<string, string> = { ...(ro.headers ?? {}) };
    const useKey = ro.key === undefined ? key : ro.key;
    if (useKey !== null) headers.authorization = `Bearer ${useKey}`;
    let body: string | undefined;
    if (ro.rawBody !== undefined) body = ro.rawBody;
    else if (ro.body !== undefined) body = JSON.stringify(ro.body);
    if (body !== undefined && !headers['content-type']) headers['content-type'] = 'application/json';
    const res = await fetch(baseUrl + path, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // keep text (HTML pages, raw MIME)
    }
    return { status: res.status, headers: res.headers, body: parsed as T };
  }

  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await app.stop();
  };
  return {
    app,
    baseUrl,
    key,
    teamId,
    zone,
    dataDir,
    config,
    request,
    stop,
    async close() {
      await stop();
      if (!opts.zone) await zone.close();
      if (!opts.dataDir) {
        if (database.created) await dropTestDatabase(database.url);
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
  };
}

function deepMerge<T>(a: T, b: unknown): T {
  if (!b || typeof b !== 'object' || Array.isArray(b)) return (b ?? a) as T;
  const out: Record<string, unknown> = { ...(a as Record<string, unknown>) };
  for (const [k, v] of Object.entries(b as Record<string, unknown>)) {
    out[k] = v && typeof v === 'object' && !Array.isArray(v) && out[k] && typeof out[k] === 'object' ? deepMerge(out[k], v) : v;
  }
  return out as T;
}
