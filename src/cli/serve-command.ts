import { resolve } from 'node:path';
import type { Command } from 'commander';
import { cliName, configFrom, loadApp, shellWord } from './cli-context.js';
import type { Config } from '../config/defaults.js';
import { unknownEnvNames } from '../config/load.js';
import { gracefulStopSeconds } from './systemd-unit.js';

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run Posthorn: the HTTP API, the SMTP listeners, the delivery engine and the scheduler')
    .action(async (_opts, cmd: Command) => {
      await serve(configFrom(cmd, { warnUnknownEnv: false }), (cmd.optsWithGlobals() as { config?: string }).config);
    });
}

/** A stop still running after this says what it waits for. */
const SLOW_STOP_NOTICE_MS = 2000;
/** Signals closer together than this are one Ctrl-C. */
const SAME_SIGNAL_MS = 1000;

/**
 * The start of an admin command that reaches this server's store from any directory: this CLI
 * (not on PATH in a checkout), its config file and, on SQLite, its data directory (a relative
 * ./data elsewhere would be another, empty store).
 */
function adminCommand(config: Config, configFile: string | undefined): string {
  return [
    ...(config.store.url ? [] : [`POSTHORN_DATA_DIR=${shellWord(resolve(config.dataDir))}`]),
    cliName(true),
    ...(configFile ? ['--config', shellWord(resolve(configFile))] : []),
  ].join(' ');
}

/** `posthorn serve`: runs the process until SIGTERM/SIGINT. */
async function serve(config: Config, configFile: string | undefined): Promise<void> {
  const { createApp, loadServerModules } = await loadApp();
  // All of it, before the store is opened: a module missing from the installation fails here.
  await loadServerModules();
  const app = await createApp({
    config,
    waitForStore: true,
    serveLock: true,
    // The app has stopped (gracefully) by then; exit as a start refused the same way would.
    onFatal: (err) => {
      process.stderr.write(`posthorn: ${err.message}\n`);
      process.exit(1);
    },
  });
  for (const { name, near } of unknownEnvNames(process.env)) {
    app.logger.warn({ event: 'config.env', name, near }, `${name} is set but is no setting of Posthorn, so it changes nothing${near ? ` (did you mean ${near}?)` : ''}`);
  }
  // Listening before start(): a signal that arrives while the listeners come up (a supervisor
  // stopping it at once) is a graceful stop once they are up, not the default abrupt exit.
  let started!: () => void;
  const ready = new Promise<void>((resolve) => (started = resolve));
  let shuttingDown = false;
  let startFailed = false;
  let firstSignalAt = 0;
  const shutdown = (signal: string) => {
    if (shuttingDown) {
      // The same Ctrl-C reaches the server twice under npm start (from the terminal, and
      // forwarded by npm); a later one is someone who will not wait for the graceful stop.
      if (Date.now() - firstSignalAt < SAME_SIGNAL_MS) return;
      app.logger.warn({ signal }, 'stopping at once: work in progress is abandoned; a message that was on the wire is sent again at the next start');
      process.exit(1);
    }
    shuttingDown = true;
    firstSignalAt = Date.now();
    void ready.then(() => {
      // A start that failed is already being put down, and ends with its error and exit code.
      if (startFailed) return;
      app.logger.info({ signal }, 'shutting down');
      // A graceful stop lets SMTP transactions on the wire finish: with an MX that never
      // answers that is minutes of silence, which looks like a hang from a terminal.
      const notice = setTimeout(() => {
        const minutes = Math.ceil(gracefulStopSeconds(config) / 60);
        app.logger.warn(
          { signal },
          `still stopping: waiting for the work in progress (an SMTP transaction on the wire waits for the remote server, up to ${minutes} min at the outbound timeouts); signal again (Ctrl-C) to stop at once, and a message on the wire is sent again at the next start`,
        );
      }, SLOW_STOP_NOTICE_MS);
      notice.unref();
      return app.stop().then(
        () => process.exit(0),
        (err) => {
          app.logger.error({ err }, 'shutdown failed');
          process.exit(1);
        },
      );
    });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  let firstKey: string | null;
  try {
    firstKey = await app.ensureFirstKey();
    await app.start();
  } catch (err) {
    // A start that failed half way (the HTTP port taken, a TLS file missing) must not leave a
    // process running with part of it up (an HTTP API and /health, no engine), deaf to SIGTERM:
    // put down what started, then fail with the error (runCli prints it and sets the exit code).
    startFailed = true;
    started();
    await app.stop().catch((stopErr: unknown) => app.logger.error({ err: stopErr }, 'stopping after a failed start failed'));
    throw err;
  }
  started();
  if (firstKey) {
    // Printed once, on the very first start, so a newcomer can call the API right away: on
    // stderr, outside the JSON log stream on stdout (whatever ships those lines never carries
    // it), and never logged. A service creates its key with `posthorn keys create` instead.
    process.stderr.write(
      `\nNo API key existed, so a team and a FULL key were created. Save it now; it is not shown again:\n\n  ${firstKey}\n\n`,
    );
  }
  if (config.console.enabled && (await app.services.users.count()) === 0) {
    // Until someone can sign in, every start says how (stderr, like the first key).
    const team = (await app.services.teams.list())[0]?.id ?? 1;
    process.stderr.write(
      `No console user exists yet. Create the first one (it prints a password) and sign in at ${await app.consoleUrl()}:\n\n` +
        `  ${adminCommand(config, configFile)} users create --email you@example.com --team ${team} --operator\n\n`,
    );
  }
}
