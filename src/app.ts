import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Config } from './config/defaults.js';
import { systemClock, type Clock } from './lib/clock.js';
import type { DkimKeyPair } from './core/domains/domain-service.js';
import { createLogger, type Logger } from './lib/logger.js';
import { createDnsClient, type DnsResolver } from './lib/dns/dns-client.js';
import type { AppStore } from './store/open-store.js';
import { databaseUrlTarget } from './store/pg/pg-url.js';
import { hasMigrated, migrateToLatest } from './store/migrate.js';
import { createSettingsRepository } from './store/repositories/settings-repository.js';
import type { RouteDef } from './api/route-types.js';
import { createAdminHealth } from './core/operators/admin-health.js';
import { JobMonitor } from './core/operators/job-monitor.js';
import { applicationNameOf, openStoreOf } from './composition/store-opening.js';
import { listenerStatesOf, type Listeners } from './composition/listener-states.js';
import { openableUrl } from './composition/start-notices.js';
import { wireCoreServices } from './composition/core-services-wiring.js';
import { closingOnFailure } from './composition/close-on-failure.js';
import { wireCluster } from './composition/cluster-wiring.js';
import { wireScheduler } from './composition/scheduler-wiring.js';
import type { Started } from './composition/start-sequence.js';
import type { ServerWiring } from './composition/server-wiring.js';
import { stopApp } from './composition/stop-sequence.js';

/** The publicUrl of the server that started last on this store (consoleUrl). */
const SERVER_PUBLIC_URL = 'server.public_url';

// The one composition root: the CLI, `posthorn serve` and the tests all build the process here.

export interface AppOptions {
  config: Config;
  clock?: Clock;
  logger?: Logger;
  /** DNS resolver; tests inject one pointed at their own zone. */
  resolver?: DnsResolver;
  /** New domains' DKIM keys (by default a fresh RSA key each); tests inject keys made once. */
  dkimKeyPair?: () => Promise<DkimKeyPair>;
  /**
   * log2 of scrypt's N for new console passwords (10-20; by default 15, OWASP's figure). The
   * tests' in-process apps ask for 10: a sign-in there costs ~1 ms of CPU, not ~100.
   */
  passwordHashCost?: number;
  /**
   * A PostgreSQL store that cannot be reached is waited for (retried with a growing pause, each
   * failure logged) instead of failing: `posthorn serve`. Admin commands fail at once.
   */
  waitForStore?: boolean;
  /** `posthorn serve`: no other server may run on the same SQLite data directory. */
  serveLock?: boolean;
  /**
   * A condition the node cannot run on (another process took its cluster name over while it was
   * silent): the app has stopped by then, as a graceful stop does; `posthorn serve` exits 1.
   */
  onFatal?: (err: Error) => void;
  /**
   * SQLite: checkpoint the write-ahead log from a worker thread (the default). Admin commands
   * write a few rows and close the store, and its close checkpoints: starting and stopping the
   * worker was ~40 ms of such a command.
   */
  backgroundCheckpoints?: boolean;
  /**
   * Admin commands that work on existing data: a store nothing was ever migrated on (a new,
   * empty PostgreSQL database) is refused with this error, and left as it was, instead of being
   * migrated into an empty Posthorn store that could only answer that nothing is there.
   */
  refuseNewStore?: () => Error;
}

export type { Listeners } from './composition/listener-states.js';

export type App = Awaited<ReturnType<typeof createApp>>;

export { backupStoreTo, copyStoreTo, migrateStore, restoreStoreFrom } from './composition/store-opening.js';
export type { CopyProgress, CopyReport } from './store/store-copy.js';

/**
 * The modules only a started app uses: the listeners, the console and the API, the SMTP client
 * and DKIM signing, the metrics (composition/start-sequence.ts, server-wiring.ts). App.start()
 * loads them, so an admin command, which never starts the app, does not (docs/benchmarks.md,
 * "CLI start"); `posthorn serve` loads them before anything else, so that a module missing from
 * an installation fails it before it opens the store.
 */
export function loadServerModules() {
  return Promise.all([import('./composition/start-sequence.js'), import('./composition/server-wiring.js')]);
}

export function createApp(opts: AppOptions) {
  return closingOnFailure((onFailure) => buildApp(opts, onFailure));
}

async function buildApp(opts: AppOptions, onFailure: (close: () => Promise<unknown>) => void) {
  const config = opts.config;
  const clock = opts.clock ?? systemClock;
  const logger = opts.logger ?? createLogger(config.log.level);
  const resolver = opts.resolver ?? createDnsClient({ servers: config.dns.servers, timeoutMs: config.dns.timeoutMs, trustAd: config.dns.trustAd });
  const dataDir = resolve(config.dataDir);
  // Background jobs' last outcomes, for /admin/v1/health.
  const jobs = new JobMonitor(clock);
  const store: AppStore = await openStoreOf(
    config,
    logger,
    {
      backgroundCheckpoints: opts.backgroundCheckpoints ?? true,
      serveLock: opts.serveLock,
      applicationName: applicationNameOf(config),
      onCheckpointError: (message) => {
        jobs.failed('wal-checkpoint', message);
        logger.warn({ err: message }, 'WAL checkpoint failed; retried at the next interval');
      },
      onPoolError: (err) => logger.warn({ event: 'store.connection_lost', err: err.message }, 'a connection to the PostgreSQL store was lost; the pool opens a new one when needed'),
    },
    opts.waitForStore ?? false,
  );
  onFailure(() => store.close());
  if (store.kind === 'postgres') logger.info({ event: 'store.open', store: databaseUrlTarget(config.store.url) }, `store: PostgreSQL at ${databaseUrlTarget(config.store.url)}`);
  if (opts.refuseNewStore && !(await hasMigrated(store.db))) throw opts.refuseNewStore();
  await migrateToLatest(store.db);

  const settings = createSettingsRepository(store.db);
  // Signs tracking, unsubscribe and confirmation links; kept in the store so links survive restarts.
  const secret = config.secret || (await settings.getOrInsert('link_secret', randomBytes(32).toString('hex')));

  // The repositories and the core services (composition/core-services-wiring.ts).
  const core = wireCoreServices({ config, clock, logger, resolver, store, settings, secret, dkimKeyPair: opts.dkimKeyPair, passwordHashCost: opts.passwordHashCost });
  const { services, nodeId, clusterRepo, queueRepo, intake, emails, queue, campaigns, domains, webhookDispatcher, inbound, contactImports, tlsCounter, tlsReports } = core;
  const { receivedTlsReports, serverDkimKey, permits, cronRuns, apiKeys, teams } = core;
  // Read here, not when start() wires the outbound side: a missing file fails every command, as it always did.
  const extraCa = config.outbound.caFile ? readFileSync(config.outbound.caFile) : undefined;

  /** What start() wires and only a started app has: the outbound side, the metrics, the route tables (composition/server-wiring.ts). */
  let server: ServerWiring | undefined;
  const serverSide = (what: string): ServerWiring => {
    if (!server) throw new Error(`app.${what} exists once start() has run`);
    return server;
  };
  const runTlsReports = (generate: boolean, signal?: AbortSignal) => serverSide('tlsReports').outbound.runTlsReports(generate, signal);
  const listeners: Listeners = {};
  /** Listeners that were configured but failed to start. */
  const failedListeners = new Set<string>();
  const started: Started = {};
  let stopping = false;
  const storeOk = () => store.ping();
  const listenerStates = () => listenerStatesOf(listeners, failedListeners);
  // Membership of the cluster on PostgreSQL (composition/cluster-wiring.ts).
  const { recount, cluster, clusterView } = wireCluster({ clusterRepo, nodeId, permits, campaigns, contactImports, bounceNotices: core.bounceNotices, webhookDispatcher: core.webhookDispatcher, clock, logger, listeners, jobs, stopping: () => stopping, onOrphanedRuns: () => scheduler.takeUp(), onNameLost: (err) => void stop().catch((stopErr: unknown) => logger.error({ err: stopErr }, 'stopping after the node name was lost failed')).finally(() => opts.onFatal?.(err)) });
  // The cron jobs and the campaign runner (composition/scheduler-wiring.ts).
  const scheduler = wireScheduler({ domains, emails, queue, campaigns, runTlsReports, cronRuns, contentRetention: core.contentRetention, config, logger, jobs });
  const adminHealth = createAdminHealth({
    queue: queueRepo,
    jobs,
    clock,
    node: nodeId,
    dataDir,
    storeOk,
    listeners: listenerStates,
    stopping: () => stopping,
    storeKind: store.kind,
    cluster: async () => (await clusterView()).members,
  });

  let stopRun: Promise<void> | undefined;
  /** Graceful: stop accepting, let in-flight work finish, close the database (composition/stop-sequence.ts); a second call waits for the first. */
  function stop(): Promise<void> {
    stopping = true;
    return (stopRun ??= stopApp({ core, server, logger, store, scheduler, started, recount, cluster }));
  }

  return {
    config,
    clock,
    logger,
    resolver,
    store,
    secret,
    services,
    listeners,
    /** The delivery engine (from start() on). */
    get engine() {
      return serverSide('engine').engine;
    },
    intake,
    /** The API route table (the OpenAPI document and route sweeps read it; from start() on). */
    get routes(): RouteDef[] {
      return serverSide('routes').routes;
    },
    /** The operator API's route table (/admin/v1; from start() on). */
    get adminRoutes(): RouteDef[] {
      return serverSide('adminRoutes').adminRoutes;
    },
    /** This node's id (cluster.nodeName or <hostname>:<pid>) and, on PostgreSQL, its cluster membership. */
    nodeId,
    cluster,
    /** The Prometheus metrics (from start() on). */
    get metrics() {
      return serverSide('metrics').metrics;
    },
    /** Runs due campaign batches now (tests move their clock, then call this). */
    runCampaigns: scheduler.runCampaigns,
    /** Resolves once the campaign recount a dead node's sweep started, if any, has ended (tests). */
    campaignRecount: () => recount.settled(),
    /** Runs a cron job now as its tick for `scheduled` (default now) would (tests); false before start() or for an unknown name. */
    runCronJob: scheduler.runCronJob,
    inbound,
    webhookDispatcher,
    /** Submission bounce notices (submission.bounceNotices; undefined when off or in sandbox mode): runNow() claims what is due (tests move their clock first). */
    bounceNotices: core.bounceNotices && { runNow: core.bounceNotices.runNow },
    /** TLS reporting (RFC 8460): run the daily reports now (tests move their clock first; from start() on), the counter, the history. */
    tlsReports: {
      runNow: async () => runTlsReports(true),
      sendDue: async () => runTlsReports(false),
      flushCounts: () => tlsCounter.flush(),
      history: () => tlsReports.history(),
      received: receivedTlsReports,
      serverDkimKey,
    },

    /**
     * The console's address as the server last started on this store gave it: an admin command
     * often runs without the server's environment (a systemd EnvironmentFile with
     * POSTHORN_PUBLIC_URL), so its own config would name another. Its own until a server starts.
     */
    async consoleUrl(): Promise<string> {
      return `${(await settings.get(SERVER_PUBLIC_URL)) ?? config.publicUrl}/console`;
    },

    /** On a store with no key at all, makes a team and a FULL key so a newcomer can call the API at once. */
    async ensureFirstKey(): Promise<string | null> {
      if ((await apiKeys.count()) > 0) return null;
      const existing = await teams.list();
      const teamId = existing[0]?.id ?? (await teams.create('Default team'));
      const key = await apiKeys.create(teamId, { name: 'first key', permission: 'FULL' });
      return key.token;
    },

    /** Listens and starts the background work (composition/start-sequence.ts). */
    async start(): Promise<Listeners> {
      const [{ startApp }, { wireServer }] = await loadServerModules();
      server = wireServer({ core, config, clock, logger, resolver, store, secret, dataDir, extraCa, adminHealth });
      core.attachServer(server);
      const up = await startApp({ core, server, config, clock, logger, resolver, storeOk, stopping: () => stopping, cluster, clusterView, listeners, failedListeners, scheduler, started });
      // Best effort: only hints read it (serve's and admin commands'), so it is where to sign in.
      await settings.put(SERVER_PUBLIC_URL, up.http ? openableUrl(config, up.http.port) : config.publicUrl).catch((err: Error) => logger.warn({ err: err.message }, 'could not record the public URL for admin commands'));
      return up;
    },

    stop,
  };
}
