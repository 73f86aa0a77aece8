import { DEFAULT_CONFIG, type Config } from '../config/defaults.js';
import { SERVER_NODE_FLAGS } from './server-node-flags.js';

// The systemd unit Posthorn runs under, in one place: the README shows the default rendering
// (a test keeps them equal), and a command that installs Posthorn writes it from here.

/** sysexits.h EX_CONFIG: the CLI exits with it on an invalid configuration, and the unit does not restart on it. */
export const EXIT_CONFIG_ERROR = 78;

export interface SystemdUnitOptions {
  /** Where Posthorn is installed (bin/posthorn, dist/). */
  installDir: string;
  /** The TOML configuration file (mode 0640, root:<user>). */
  configFile: string;
  /** Optional POSTHORN_* variables; they override the file. */
  environmentFile: string;
  /** The system user and group it runs as (useradd --system). */
  user: string;
  /** Under /var/lib: systemd creates /var/lib/<stateDirectory> owned by the user before every start. */
  stateDirectory: string;
  nodePath: string;
}

export const DEFAULT_UNIT_OPTIONS: SystemdUnitOptions = {
  installDir: '/opt/posthorn',
  configFile: '/etc/posthorn/posthorn.toml',
  environmentFile: '/etc/posthorn/posthorn.env',
  user: 'posthorn',
  stateDirectory: 'posthorn',
  nodePath: '/usr/bin/node',
};

/**
 * How long a graceful stop may take, in seconds. `serve` lets every SMTP transaction on the
 * wire finish (so a message is not sent twice): a session still opening may wait for the
 * connect and greeting timeouts and a stalled command for the socket timeout, then the
 * transaction runs to its deadline; webhook calls in flight get their timeout. A minute on top
 * for the rest (closing listeners, the last writes). A stop normally takes a second or two.
 */
export function gracefulStopSeconds(config: Pick<Config, 'outbound' | 'webhooks'> = DEFAULT_CONFIG): number {
  const o = config.outbound;
  const ms = o.connectTimeoutMs + o.greetingTimeoutMs + o.socketTimeoutMs + o.transactionTimeoutMs + config.webhooks.timeoutMs;
  return Math.ceil(ms / 1000) + 60;
}

/** systemd's time span, in whole minutes (rounded up) when it is at least one. */
function timeSpan(seconds: number): string {
  return seconds >= 60 ? `${Math.ceil(seconds / 60)}min` : `${seconds}s`;
}

export function systemdUnit(options: Partial<SystemdUnitOptions> = {}, config: Pick<Config, 'outbound' | 'webhooks'> = DEFAULT_CONFIG): string {
  const o = { ...DEFAULT_UNIT_OPTIONS, ...options };
  const dataDir = `/var/lib/${o.stateDirectory}`;
  return `# /etc/systemd/system/posthorn.service
[Unit]
Description=Posthorn email delivery
After=network-online.target
Wants=network-online.target

[Service]
Type=exec
User=${o.user}
Group=${o.user}
# systemd creates ${dataDir} owned by ${o.user} before every start: the data directory.
StateDirectory=${o.stateDirectory}
StateDirectoryMode=0750
Environment=POSTHORN_DATA_DIR=${dataDir}
# Every other setting (hostname, publicUrl, the relay and its password...) in the config file,
# or as POSTHORN_* variables in the optional environment file, which overrides it.
EnvironmentFile=-${o.environmentFile}
WorkingDirectory=${o.installDir}
ExecStart=${o.nodePath} ${SERVER_NODE_FLAGS.join(' ')} ${o.installDir}/bin/posthorn --config ${o.configFile} serve
# Ports 25 and 587 need the capability (or use higher ports behind a redirect).
AmbientCapabilities=CAP_NET_BIND_SERVICE
CapabilityBoundingSet=CAP_NET_BIND_SERVICE
NoNewPrivileges=true
ProtectSystem=strict
ProtectHome=true
PrivateTmp=true
Restart=on-failure
RestartSec=5s
# An invalid configuration exits ${EXIT_CONFIG_ERROR}: fix it, then start again (no restart loop).
RestartPreventExitStatus=${EXIT_CONFIG_ERROR}
# SIGTERM: stop accepting, let the SMTP transactions on the wire finish (up to the outbound
# connect, greeting, socket and transaction timeouts with a stalling MX), close the database.
# Killed sooner, such a message is sent again at the next start.
KillSignal=SIGTERM
TimeoutStopSec=${timeSpan(gracefulStopSeconds(config))}

[Install]
WantedBy=multi-user.target
`;
}

/** What the unit's ProtectHome=true makes empty for the service. */
const HOME_DIRS = ['/home', '/root', '/run/user'];

/**
 * The installation or Node binary the unit would run from a home directory (a checkout in
 * ~/posthorn, a Node from nvm): ProtectHome hides them, and the service fails at its first start.
 */
export function hiddenFromUnit(o: Pick<SystemdUnitOptions, 'installDir' | 'nodePath'>): string | undefined {
  const hidden = [o.installDir, o.nodePath].filter((p) => HOME_DIRS.some((home) => p === home || p.startsWith(`${home}/`)));
  if (hidden.length === 0) return undefined;
  return (
    `${hidden.join(' and ')} ${hidden.length > 1 ? 'are' : 'is'} under a home directory, which the unit's ProtectHome=true hides from the service: ` +
    'it would fail at its first start; build Posthorn in /opt/posthorn (and use a system Node, such as /usr/bin/node) and run its init from there'
  );
}
