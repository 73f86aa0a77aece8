import test from 'ava';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../helpers/temp-dir.js';
import { SERVER_NODE_FLAGS } from '../../src/cli/server-node-flags.js';
import { LOOPBACK_LISTENERS_ENV, refused } from '../helpers/port-probe.js';

// `npm start` as a newcomer (or a process manager) runs it: SIGTERM to npm's own PID must stop
// Posthorn, not leave `node bin/posthorn serve` running with PPID 1 on its port. The start
// script execs the server (npm forwards the signal to its child, which is then the server).
// --ignore-scripts skips the prestart build (the suite runs on the compiled tree already).

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Every process below `pid`, from /proc (parent ids). */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // pid (comm) state ppid ...: comm may hold spaces and parentheses; the last ')' ends it.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
  }
  const out: number[] = [];
  const visit = (p: number) => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      visit(c);
    }
  };
  visit(pid);
  return out;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie has exited; only its parent has not read its status yet.
  try {
    return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

test('package.json builds before start and starts the server in the script\'s own process', (t) => {
  const scripts = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')).scripts as Record<string, string>;
  t.is(scripts.prestart, 'npm run build');
  t.is(scripts.start, `exec node ${SERVER_NODE_FLAGS.join(' ')} bin/posthorn serve`, 'the server runs with the Node options of server-node-flags.ts');
});

test('SIGTERM to the PID of `npm start` stops Posthorn: no process of it remains, its port is closed', async (t) => {
  const dataDir = tempDir(t, 'posthorn-npm-start-');
  const npm = spawn('npm', ['start', '--ignore-scripts'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH,
      HOME: dataDir,
      // npm itself stays off the network (no update check, no audit).
      npm_config_update_notifier: 'false',
      npm_config_offline: 'true',
      npm_config_audit: 'false',
      npm_config_fund: 'false',
      POSTHORN_DATA_DIR: dataDir,
      ...LOOPBACK_LISTENERS_ENV,
      POSTHORN_DNS_SERVERS: '127.0.0.1:9',
      POSTHORN_LOG_LEVEL: 'info',
      // A typo is named at start, not silently ignored.
      POSTHORN_LOG_LEVLE: 'debug',
    },
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => npm.once('exit', (code, signal) => resolve({ code, signal })));
  let stdout = '';
  let stderr = '';
  const ready = new Promise<number>((resolve, reject) => {
    // Ready once the listeners are up (stdout) and the first key was printed (stderr, after them).
    const check = () => {
      const port = /HTTP API listening on 127\.0\.0\.1:(\d+)/.exec(stdout)?.[1];
      if (port && /"event":"serve\.ready"/.test(stdout) && /ph_[0-9a-z]{12}_\S+\n/.test(stderr)) resolve(Number(port));
    };
    npm.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      check();
    });
    npm.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
      check();
    });
    void exited.then(({ code }) => reject(new Error(`npm start exited (${code}) before Posthorn was ready:\n${stdout}\n${stderr}`)));
  });
  let pids: number[] = [];
  try {
    const port = await ready;
    pids = descendants(npm.pid!);
    t.true(pids.length >= 1, 'Posthorn runs below npm');
    t.is((await fetch(`http://127.0.0.1:${port}/health`)).status, 200);

    // The first key is on stderr, outside the JSON lines on stdout.
    const jsonLines = stdout.split('\n').filter((l) => l.startsWith('{'));
    t.true(jsonLines.every((l) => !/ph_[0-9a-z]{12}_/.test(l)));
    t.regex(stderr, /Save it now; it is not shown again:\n\n {2}ph_[0-9a-z]{12}_\S+\n/);
    // One line says where everything is: the API, the console and the data.
    const readyLine = JSON.parse(stdout.split('\n').find((l) => l.includes('"event":"serve.ready"'))!);
    t.like(readyLine, { level: 30, url: `http://127.0.0.1:${port}`, console: `http://127.0.0.1:${port}/console`, dataDir, store: `SQLite ${dataDir}/posthorn.db`, sandbox: false });
    t.is(readyLine.msg, `Posthorn is running: API at http://127.0.0.1:${port}/v1, console at http://127.0.0.1:${port}/console, data in ${dataDir} (SQLite ${dataDir}/posthorn.db)`);
    t.regex(stdout, /"msg":"POSTHORN_LOG_LEVLE is set but is no setting of Posthorn, so it changes nothing \(did you mean POSTHORN_LOG_LEVEL\?\)"/);

    npm.kill('SIGTERM');
    const { code, signal } = await exited;
    t.log(`npm exited with ${code ?? signal}`);
    t.deepEqual(pids.filter(alive), [], 'processes of npm start still running after it exited');
    t.true(await refused(port), 'the HTTP port is closed');
    t.regex(stdout, /"signal":"SIGTERM","msg":"shutting down"/);
    t.regex(stdout, /"msg":"stopped"/);
  } finally {
    if (npm.exitCode === null && npm.signalCode === null) npm.kill('SIGKILL');
    for (const pid of pids.filter(alive)) process.kill(pid, 'SIGKILL');
  }
});
