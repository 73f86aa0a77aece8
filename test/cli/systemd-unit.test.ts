import test from 'ava';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { gracefulStopSeconds, hiddenFromUnit, systemdUnit } from '../../src/cli/systemd-unit.js';
import { loadConfig } from '../../src/config/load.js';
import { tempDir } from '../helpers/temp-dir.js';

// The unit lives in src/cli/systemd-unit.ts; docs/operations.md shows its default rendering, so
// the two can not drift, and it is checked for what a fresh Debian needs.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

test("docs/operations.md's unit is systemdUnit() as it renders by default", (t) => {
  const readme = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
  const block = /```ini\n([\s\S]*?)```/.exec(readme)?.[1];
  t.is(block, systemdUnit(), 'paste systemdUnit() into docs/operations.md (node -e "import(\'./dist/src/cli/systemd-unit.js\').then(m => process.stdout.write(m.systemdUnit()))")');
  // The steps around it: a system user, and the first key made before the first start.
  t.regex(readme, /useradd --system/);
  t.regex(readme, /keys create --name admin/);
});

test('the unit runs as a system user with a state directory, reads every setting from a file, and outlasts a graceful stop', (t) => {
  const unit = systemdUnit();
  const values = (name: string) => [...unit.matchAll(new RegExp(`^${name}=(.*)$`, 'gm'))].map((m) => m[1]);
  t.deepEqual(values('User'), ['posthorn']);
  t.deepEqual(values('StateDirectory'), ['posthorn']);
  t.deepEqual(values('Environment'), ['POSTHORN_DATA_DIR=/var/lib/posthorn']);
  t.deepEqual(values('EnvironmentFile'), ['-/etc/posthorn/posthorn.env']);
  t.deepEqual(values('ExecStart'), ['/usr/bin/node --max-old-space-size=512 /opt/posthorn/bin/posthorn --config /etc/posthorn/posthorn.toml serve']);
  t.deepEqual(values('RestartPreventExitStatus'), ['78']);
  // A graceful stop waits for transactions on the wire: the unit must wait longer than the
  // longest one can take, or systemd kills it and those messages go out twice.
  const stop = /^TimeoutStopSec=(\d+)min$/m.exec(unit);
  t.truthy(stop);
  const o = loadConfig({ env: {} }).outbound;
  t.true(Number(stop![1]) * 60 >= (o.connectTimeoutMs + o.greetingTimeoutMs + o.socketTimeoutMs + o.transactionTimeoutMs) / 1000);
  // Lower timeouts, a shorter wait: 30 s + 30 s + 60 s + 120 s + 10 s, plus a minute.
  const quick = loadConfig({ env: { POSTHORN_OUTBOUND_SOCKET_TIMEOUT_MS: '60000', POSTHORN_OUTBOUND_TRANSACTION_TIMEOUT_MS: '120000' } });
  t.true(gracefulStopSeconds(quick) < gracefulStopSeconds());
  t.regex(systemdUnit({}, quick), /^TimeoutStopSec=6min$/m);
});

test('systemd-analyze accepts the unit (where systemd is installed)', async (t) => {
  const analyze = '/usr/bin/systemd-analyze';
  if (!existsSync(analyze)) {
    t.log('systemd-analyze is not installed here; skipped');
    t.pass();
    return;
  }
  const dir = tempDir(t, 'posthorn-unit-');
  const file = join(dir, 'posthorn.service');
  // Paths that exist on this machine, so the check covers the command line too.
  writeFileSync(file, systemdUnit({ nodePath: process.execPath, installDir: ROOT.replace(/\/$/, '') }));
  const { stderr } = await promisify(execFile)(analyze, ['verify', file]);
  t.is(stderr.trim(), '');
});

test('a checkout or a Node under a home directory is named: the unit\'s ProtectHome hides it from the service', (t) => {
  const problem = hiddenFromUnit({ installDir: '/home/me/posthorn', nodePath: '/home/me/.nvm/versions/node/v20.19.0/bin/node' });
  t.regex(problem!, /\/home\/me\/posthorn and \/home\/me\/\.nvm\/versions\/node\/v20\.19\.0\/bin\/node are under a home directory/);
  t.regex(problem!, /ProtectHome=true/);
  t.regex(hiddenFromUnit({ installDir: '/root/posthorn', nodePath: '/usr/bin/node' })!, /^\/root\/posthorn is under a home directory/);
  t.is(hiddenFromUnit({ installDir: '/opt/posthorn', nodePath: '/usr/bin/node' }), undefined);
  t.is(hiddenFromUnit({ installDir: '/homestead/posthorn', nodePath: '/usr/local/bin/node' }), undefined);
});
