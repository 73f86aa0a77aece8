import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

// `posthorn serve` as a real child process, for tests that kill it (SIGKILL leaves no chance to
// clean up, which is the point) and start it again on the same data directory.

const BIN = fileURLToPath(new URL('../../../../bin/posthorn', import.meta.url));
/** Output kept for error messages (the tail only: a busy server logs a lot). */
const KEEP_OUTPUT_CHARS = 20_000;

/**
 * The environment of a child `posthorn serve` that stays on loopback: every listener on
 * 127.0.0.1 port 0, DNS from the test zone, outbound SMTP to the test sink's port.
 */
export function loopbackEnv(o: { dataDir: string; dnsServer: string; sinkPort: number; hostname?: string }, extra: Record<string, string> = {}): Record<string, string> {
  return {
    POSTHORN_DATA_DIR: o.dataDir,
    POSTHORN_HTTP_HOST: '127.0.0.1',
    POSTHORN_HTTP_PORT: '0',
    POSTHORN_INBOUND_PORT: '0',
    POSTHORN_SUBMISSION_PORT: '0',
    POSTHORN_HOSTNAME: o.hostname ?? 'mx.posthorn-proof.test',
    POSTHORN_DNS_SERVERS: o.dnsServer,
    POSTHORN_OUTBOUND_PORT: String(o.sinkPort),
    POSTHORN_OUTBOUND_ALLOW_LOOPBACK_MX: 'true',
    POSTHORN_LOG_LEVEL: 'info',
    ...extra,
  };
}

export interface PosthornProcess {
  child: ChildProcess;
  /** The HTTP API port it chose (it listens on port 0). */
  port: number;
  /** The ports its inbound and submission SMTP listeners chose (read from the same start log). */
  smtp: { inbound: number; submission: number };
  /** The first FULL key, printed on the very first start of an empty data dir only. */
  key?: string;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  /** The last few KB of stdout and stderr. */
  output(): string;
  /** Resolves once stdout or stderr (either: the log goes to one, hints to the other) matches; rejects if the process exits first. */
  waitForOutput(pattern: RegExp): Promise<void>;
  /** SIGKILL, then waits for the process to be gone. */
  kill(): Promise<void>;
}

export interface StartOptions {
  /** POSTHORN_* variables (PATH is added). */
  env: Record<string, string>;
  /** A TOML config file for the settings that have no environment variable. */
  configFile?: string;
  /** Also wait for the first-start key (an empty data dir prints one right after starting). */
  expectKey?: boolean;
  /** Another compiled entry point to run instead of `bin/posthorn serve` (it must log the same lines). */
  script?: string;
  /** Called with the output so far on every chunk, before the process is ready too. */
  onOutput?: (out: string) => void;
}

/** Starts `posthorn serve`; resolves once the HTTP API and the SMTP listeners are up (read from its log). */
export function startPosthorn(opts: StartOptions): Promise<PosthornProcess> {
  const args = opts.script ? [opts.script, ...(opts.configFile ? [opts.configFile] : [])] : [BIN, ...(opts.configFile ? ['--config', opts.configFile] : []), 'serve'];
  const child = spawn(process.execPath, args, { env: { PATH: process.env.PATH!, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  /** Waiters of waitForOutput, checked on every chunk. */
  const waiters = new Set<() => void>();
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    let port: number | undefined;
    let ready = false;
    let key: string | undefined;
    // Keeps reading for the whole life of the process: an unread pipe would block its writes.
    const onData = (d: Buffer) => {
      out = (out + d.toString()).slice(-KEEP_OUTPUT_CHARS);
      opts.onOutput?.(out);
      for (const check of waiters) check();
      if (ready) return;
      port ??= Number(/HTTP API listening on [^:]+:(\d+)/.exec(out)?.[1]) || undefined;
      key ??= /(ph_[0-9a-z]{12}_[A-Za-z0-9_-]+)/.exec(out)?.[1];
      if (port && /SMTP listeners started/.test(out) && (!opts.expectKey || key)) {
        ready = true;
        const smtpPort = (name: string) => Number(new RegExp(`${name} SMTP listening on \\S+:(\\d+)`).exec(out)?.[1]);
        resolve({
          child,
          port,
          smtp: { inbound: smtpPort('inbound'), submission: smtpPort('submission') },
          key,
          exited,
          output: () => out,
          waitForOutput(pattern) {
            return new Promise<void>((res, rej) => {
              const check = () => {
                if (!pattern.test(out)) return;
                waiters.delete(check);
                res();
              };
              waiters.add(check);
              check();
              void exited.then((code) => {
                if (!waiters.delete(check)) return;
                rej(new Error(`posthorn exited (${code}) before its output matched ${pattern}: ${out}`));
              });
            });
          },
          async kill() {
            if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
            await exited;
          },
        });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then((code) => {
      if (!ready) reject(new Error(`posthorn exited before it was ready (${code}): ${out}`));
    });
  });
}

export interface ApiResponse {
  status: number;
  body: any;
}

/**
 * A JSON client for the API of whichever process currently runs (`current()` is read on each
 * call, so it follows restarts). A request cut by a kill rejects (fetch's network error).
 */
export function apiClient(current: () => { port: number }, key: string) {
  return async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiResponse> => {
    const res = await fetch(`http://127.0.0.1:${current().port}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = text;
    }
    return { status: res.status, body: json };
  };
}
