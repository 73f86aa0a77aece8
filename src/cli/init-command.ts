import { existsSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { configExample } from '../config/config-example.js';
import { systemdUnit } from './systemd-unit.js';

/** This installation's root: dist/src/cli/init-command.js -> the package. */
const INSTALL_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/** Writes every file, or none: one that exists (without force) is refused before any is written. */
function writeNew(files: [path: string, text: string][], force: boolean | undefined): void {
  for (const [path] of files) if (existsSync(path) && !force) throw new Error(`${path} exists; pass --force to overwrite it`);
  for (const [path, text] of files) writeFileSync(path, text, { mode: 0o640 });
}

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
    });
}
