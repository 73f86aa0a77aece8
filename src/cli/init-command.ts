import { existsSync, statSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { configExample } from '../config/config-example.js';
import { hiddenFromUnit, systemdUnit } from './systemd-unit.js';

/** This installation's root: dist/src/cli/init-command.js -> the package. */
const INSTALL_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/**
 * Writes every file, or none: one that exists (without force), a directory in its place or a
 * directory missing for it is refused before any is written.
 */
function writeNew(files: [path: string, text: string][], force: boolean | undefined): void {
  if (new Set(files.map(([path]) => path)).size < files.length) throw new Error(`--config-file and --unit-file name one file (${files[0]![0]}): give each its own`);
  for (const [path] of files) {
    const dir = dirname(path);
    if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`the directory ${dir} does not exist: create it first, or name a file elsewhere`);
    if (existsSync(path) && statSync(path).isDirectory()) throw new Error(`${path} is a directory: name a file (in it, for example)`);
    if (existsSync(path) && !force) throw new Error(`${path} exists; pass --force to overwrite it`);
  }
  for (const [path, text] of files) writeFileSync(path, text, { mode: 0o640 });
}

/** A name useradd takes (and the unit's User= and the printed commands can hold as is). */
const SYSTEM_USER = /^[a-z_][a-z0-9_-]{0,31}$/;
/** An absolute path the unit's ExecStart can hold unquoted (no blank, quote or systemd specifier). */
const UNIT_PATH = /^\/[\w./@+-]*$/;

export function registerInit(program: Command): void {
  program
    .command('init')
    .description('write a commented config file and a systemd unit for this installation')
    .option('--config-file <path>', 'where to write the config file', 'posthorn.toml')
    .option('--unit-file <path>', 'where to write the systemd unit', 'posthorn.service')
    .option('--etc-config <path>', 'the config path the unit points at once installed', '/etc/posthorn/posthorn.toml')
    .option('--user <name>', 'the system user the service runs as', 'posthorn')
    .option('--force', 'overwrite files that exist')
    .action((opts: { configFile: string; unitFile: string; etcConfig: string; user: string; force?: boolean }) => {
      if (!SYSTEM_USER.test(opts.user)) throw new Error(`--user must be a system user name (lowercase letters, digits, _ and -, at most 32), got "${opts.user}"`);
      if (!UNIT_PATH.test(opts.etcConfig)) throw new Error(`--etc-config must be an absolute path of letters, digits and . / _ @ + -, got "${opts.etcConfig}"`);
      const configPath = resolve(opts.configFile);
      const unitPath = resolve(opts.unitFile);
      writeNew(
        [
          [configPath, configExample()],
          [unitPath, systemdUnit({ installDir: INSTALL_DIR, nodePath: process.execPath, configFile: opts.etcConfig, user: opts.user })],
        ],
        opts.force,
      );
      process.stdout.write(
        [
          `wrote ${configPath} (every key, commented out at its default: set at least hostname)`,
          `wrote ${unitPath} (runs ${INSTALL_DIR}/bin/posthorn with ${process.execPath})`,
          '',
          'To run it as a service:',
          `  sudo useradd --system --home-dir /var/lib/posthorn --shell /usr/sbin/nologin ${opts.user}`,
          `  sudo install -d -o ${opts.user} -g ${opts.user} -m 0750 /var/lib/posthorn`,
          `  sudo install -D -m 0640 -g ${opts.user} ${configPath} ${opts.etcConfig}   # then set hostname, publicUrl...`,
          `  sudo install -m 0644 ${unitPath} /etc/systemd/system/posthorn.service`,
          '  # the first key, printed here and never in the journal:',
          `  sudo -u ${opts.user} env POSTHORN_DATA_DIR=/var/lib/posthorn ${process.execPath} ${INSTALL_DIR}/bin/posthorn --config ${opts.etcConfig} keys create --name admin`,
          '  sudo systemctl daemon-reload && sudo systemctl enable --now posthorn',
          '',
        ].join('\n'),
      );
      const hidden = hiddenFromUnit({ installDir: INSTALL_DIR, nodePath: process.execPath });
      if (hidden) process.stderr.write(`posthorn: warning: ${hidden}\n`);
    });
}
