import test from 'ava';
import { spawn, execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../helpers/temp-dir.js';

// The installable package: `npm pack` builds (prepack) and packs only what is needed, with the
// tested dependency versions pinned (npm-shrinkwrap.json); installed into a temp prefix, its
// production dependencies come from that shrinkwrap (offline: from the npm cache that `npm ci`
// filled, so this test never leaves the machine) and better-sqlite3's install script puts its
// native module in place; the installed binary then serves, answers /health, writes its init
// files and stops on SIGTERM. The native module is the one `npm ci` built for this checkout,
// handed to the install script as a local prebuild (prebuild-install's local-prebuilds, what a
// download or a mirror would give it): building it again from source took two minutes of one
// core, and proves better-sqlite3's build, which the checkout's own `npm ci` has just done.

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const NPM_ENV = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };

test('npm pack makes a package that installs on a clean prefix and runs', async (t) => {
  t.timeout(15 * 60_000);
  // Packed from a copy, so the build it runs never rewrites the dist/ these tests run from.
  const work = tempDir(t, 'posthorn-pack-');
  const source = join(work, 'source');
  mkdirSync(source);
  for (const entry of ['bin', 'src', 'docs', 'package.json', 'package-lock.json', 'tsconfig.json', 'config.example.toml', 'README.md']) {
    cpSync(join(ROOT, entry), join(source, entry), { recursive: true });
  }
  symlinkSync(join(ROOT, 'node_modules'), join(source, 'node_modules'));
  const packed = await run('npm', ['pack', '--pack-destination', work], { cwd: source, env: NPM_ENV, maxBuffer: 64 * 1024 * 1024 });
  const tarball = readdirSync(work).find((f) => /^posthorn-.*\.tgz$/.test(f));
  t.truthy(tarball, packed.stdout);
  t.false(existsSync(join(source, 'npm-shrinkwrap.json')), 'postpack removes the shrinkwrap again');

  const listing = (await run('tar', ['tzf', join(work, tarball!)])).stdout.split('\n').filter(Boolean);
  t.true(listing.includes('package/bin/posthorn'));
  t.true(listing.includes('package/dist/src/cli/index.js'), 'the build ships inside');
  t.true(listing.includes('package/npm-shrinkwrap.json'), 'dependency versions are pinned');
  t.true(listing.includes('package/config.example.toml'));
  t.true(listing.includes('package/src/console/assets/console.css'), "the console's static files");
  t.false(listing.some((f) => (f.startsWith('package/src/') && !f.startsWith('package/src/console/assets/')) || f.startsWith('package/test/') || f.startsWith('package/dist/test/') || f.startsWith('package/bench/')), 'only what is needed');

  // Into a prefix laid out as `npm install -g --prefix` does: lib/node_modules/posthorn.
  const prefix = join(work, 'prefix');
  const installed = join(prefix, 'lib', 'node_modules', 'posthorn');
  mkdirSync(installed, { recursive: true });
  await run('tar', ['xzf', join(work, tarball!), '-C', installed, '--strip-components', '1']);
  const prebuilds = join(work, 'prebuilds');
  mkdirSync(prebuilds);
  const sqliteModule = join(ROOT, 'node_modules', 'better-sqlite3');
  const sqliteVersion = (JSON.parse(readFileSync(join(sqliteModule, 'package.json'), 'utf8')) as { version: string }).version;
  await run('tar', ['czf', join(prebuilds, `better-sqlite3-v${sqliteVersion}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`), '-C', sqliteModule, 'build/Release/better_sqlite3.node']);
  const installEnv = { ...NPM_ENV, npm_config_better_sqlite3_local_prebuilds: prebuilds };
  await run('npm', ['ci', '--omit=dev', '--offline', '--no-audit', '--no-fund'], { cwd: installed, env: installEnv, maxBuffer: 64 * 1024 * 1024 });
  const shrinkwrapped = (JSON.parse(readFileSync(join(installed, 'npm-shrinkwrap.json'), 'utf8')) as { packages: Record<string, { version: string }> }).packages['node_modules/better-sqlite3']!.version;
  t.is(shrinkwrapped, sqliteVersion, 'the package pins the better-sqlite3 the checkout tests');
  t.true(existsSync(join(installed, 'node_modules', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node')), 'the native module is in place');
  t.false(existsSync(join(installed, 'node_modules', 'ava')), 'no development dependency');
  const bin = join(installed, 'bin', 'posthorn');

  t.regex((await run(process.execPath, [bin, '--version'])).stdout, /^\d+\.\d+\.\d+/);

  // posthorn init: the commented config and a unit for this very installation.
  const initDir = join(work, 'init');
  mkdirSync(initDir);
  const init = await run(process.execPath, [bin, 'init'], { cwd: initDir });
  t.regex(init.stdout, /wrote .*posthorn\.toml/);
  t.is(readFileSync(join(initDir, 'posthorn.toml'), 'utf8'), readFileSync(join(ROOT, 'config.example.toml'), 'utf8'));
  const unit = readFileSync(join(initDir, 'posthorn.service'), 'utf8');
  t.true(unit.includes(`ExecStart=${process.execPath} --max-old-space-size=512 ${installed}/bin/posthorn --config /etc/posthorn/posthorn.toml serve`), unit);
  await t.throwsAsync(run(process.execPath, [bin, 'init'], { cwd: initDir }), { message: /exists; pass --force/ });

  // Serve from the installed package.
  const dataDir = join(work, 'data');
  const child = spawn(process.execPath, [bin, 'serve'], {
    env: { PATH: process.env.PATH, POSTHORN_DATA_DIR: dataDir, POSTHORN_HTTP_HOST: '127.0.0.1', POSTHORN_HTTP_PORT: '0', POSTHORN_INBOUND_PORT: '0', POSTHORN_SUBMISSION_PORT: '0', POSTHORN_INBOUND_HOST: '127.0.0.1', POSTHORN_SUBMISSION_HOST: '127.0.0.1', POSTHORN_DNS_SERVERS: '127.0.0.1:9' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  try {
    const port = await new Promise<number>((res, rej) => {
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        const m = /HTTP API listening on 127\.0\.0\.1:(\d+)/.exec(out);
        if (m) res(Number(m[1]));
      });
      child.once('exit', (code) => rej(new Error(`serve exited with ${code} before listening: ${out}`)));
    });
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    t.is(health.status, 200);
    t.is(((await health.json()) as { status: string }).status, 'ok');
    // The console's pages and static files come from the installed package too.
    const login = await fetch(`http://127.0.0.1:${port}/console/login`);
    t.is(login.status, 200);
    const css = /href="(\/console\/assets\/console\.[^"]+\.css)"/.exec(await login.text())?.[1];
    t.truthy(css, 'the login page links its stylesheet');
    t.is((await fetch(`http://127.0.0.1:${port}${css}`)).status, 200);
  } finally {
    child.kill('SIGTERM');
  }
  t.is(await exited, 0, 'a graceful stop');
});
