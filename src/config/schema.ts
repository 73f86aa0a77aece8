import { z } from 'zod';
import { isIP } from 'node:net';
import { parseDnsServers } from '../lib/dns/dns-client.js';
import { networkProblem } from '../lib/network-list.js';
import { parseDuration, parseRate } from '../lib/rate-spec.js';
import { cronProblem, databaseUrlProblem, hostProblem, publicUrlProblem } from './setting-checks.js';
import { WEBHOOK_MAX_IN_FLIGHT, WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT } from '../core/webhooks/webhook-retry.js';

/** An IP address, or a subnet in CIDR notation. */
function isAddressOrSubnet(entry: string): boolean {
  const [address, bits, ...rest] = entry.trim().split('/');
  const family = isIP(address ?? '');
  if (!family || rest.length) return false;
  if (bits === undefined) return true;
  return /^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128);
}

/*
 * Every configuration key, once: its type, its default and what it is for. The Config type,
 * the defaults, the environment variable names and config.example.toml all derive from this
 * schema (config-example.ts writes the example file from it; a test checks the two agree).
 * Strict objects: an unknown key in the file is a typo the user wants to hear about.
 */

/** A leaf's documentation: what it does, and the POSTHORN_* variable that sets it, if any. */
interface KeyDoc {
  doc: string;
  env?: string;
}
const key = <T extends z.ZodType>(schema: T, info: KeyDoc): T => schema.meta({ description: info.doc, ...(info.env ? { env: info.env } : {}) }) as T;
const section = <T extends z.ZodRawShape>(shape: T, doc?: string) => {
  const obj = z.object(shape).strict();
  // Every leaf has a default, so an absent section is parsed as an empty one.
  return (doc ? obj.meta({ description: doc }) : obj).prefault({} as never);
};

/**
 * The webhooks section: a claimed call's lease must outlast its attempt (the POST, bounded by
 * timeoutMs, and recording it), or another node claims the call and posts it again while the
 * first attempt still runs, and the first one's result is then not recorded.
 */
const webhooksSection = <T extends { timeoutMs: z.ZodType<number>; leaseMs: z.ZodType<number>; maxInFlight: z.ZodType<number>; maxInFlightPerHost: z.ZodType<number> } & z.ZodRawShape>(shape: T) =>
  z
    .object(shape)
    .strict()
    .superRefine((v, ctx) => {
      const { timeoutMs, leaseMs, maxInFlight, maxInFlightPerHost } = v as { timeoutMs: number; leaseMs: number; maxInFlight: number; maxInFlightPerHost: number };
      if (leaseMs < 2 * timeoutMs) ctx.addIssue({ code: 'custom', path: ['leaseMs'], message: `must be at least twice webhooks.timeoutMs (${timeoutMs}), so a claimed call is not posted again while its attempt still runs` });
      // A per-host cap above the total would never bind: surely a typo in one of the two.
      if (maxInFlightPerHost > maxInFlight) {
        ctx.addIssue({ code: 'custom', path: ['maxInFlightPerHost'], message: `is ${maxInFlightPerHost}, more than webhooks.maxInFlight (${maxInFlight}), the calls in flight in all: lower it, or raise webhooks.maxInFlight` });
      }
    })
    .prefault({} as never);

/** A string `problem` finds nothing wrong with (what it finds is the issue's message); '' too when `emptyOk`. */
const checked = (problem: (v: string) => string | undefined, emptyOk = false) =>
  z.string().superRefine((v, ctx) => {
    const found = emptyOk && v === '' ? undefined : problem(v);
    if (found) ctx.addIssue({ code: 'custom', message: found });
  });

const port = z.number().int().min(0).max(65535);
const cron = checked(cronProblem);
const timeoutMs = (max: number) => z.number().int().min(100).max(max);
const hostAddress = checked(hostProblem);
/** The MX/SPF target and EHLO name: a host name, never an IP address (an MX record names a host). */
const dnsName = checked((v) => hostProblem(v) ?? (isIP(v) ? `"${v}" is an IP address: give a DNS name such as mail.example.com (an MX record cannot point at an IP address)` : undefined));

// SMTP listeners: a certificate needs its key (and the other way round).
const bothOrNeither = (v: { certFile: string; keyFile: string }) => !v.certFile === !v.keyFile;
const bothOrNeitherMessage = { message: 'certFile and keyFile must be set together (or both left empty for a self-signed pair)' };

/** A list of IP addresses and networks (CIDR), each entry checked: a typo is named, not silently never matched. */
const networkList = z.array(z.string()).superRefine((list, ctx) => {
  list.forEach((entry, i) => {
    const found = networkProblem(entry);
    if (found) ctx.addIssue({ code: 'custom', message: found });
  });
});

/** The keys both SMTP listeners have. */
const listenerKeys = (
  kind: 'inbound' | 'submission',
  defaults: { port: number; maxConnections: number; maxConnectionsPerIp: number },
  docs: { port: string; tls: string; maxRecipients: string; exemptNetworks: string },
) => ({
  host: key(hostAddress.default('0.0.0.0'), { doc: 'Address the listener binds to.' }),
  port: key(port.default(defaults.port), { doc: docs.port, env: `POSTHORN_${kind.toUpperCase()}_PORT` }),
  certFile: key(z.string().default(''), { doc: docs.tls }),
  keyFile: key(z.string().default(''), { doc: 'PEM key of that certificate.' }),
  maxMessageBytes: key(z.number().int().min(1024).default(30 * 1024 * 1024), { doc: 'Largest accepted message in bytes (RFC 1870 SIZE); larger is refused with 552 5.3.4.' }),
  maxConnections: key(z.number().int().positive().default(defaults.maxConnections), { doc: 'Concurrent SMTP connections; more are told 421 and closed.' }),
  maxConnectionsPerIp: key(z.number().int().min(0).default(defaults.maxConnectionsPerIp), {
    doc: 'Concurrent SMTP connections from one client address (IPv6: one /64), loopback included unless in exemptNetworks; more are told 421 4.7.0 and closed. 0: no cap. Counted by each node on its own.',
  }),
  exemptNetworks: key(networkList.default([]), { doc: docs.exemptNetworks }),
  maxRecipients: key(z.number().int().min(1).max(1000).default(100), { doc: docs.maxRecipients }),
});

// ------------------------------------------------------------ egress sources and traffic shaping
// Arrays of tables ([[outbound.sources]] ...): each field documented, an example for the file.

/** An array of TOML tables: its env variable holds JSON; `example` is what the example file shows. */
const tables = <T extends z.ZodType>(item: T, info: KeyDoc & { example: string[] }) =>
  z.array(item).default([]).meta({ description: info.doc, example: info.example, ...(info.env ? { env: info.env } : {}) });
const field = <T extends z.ZodType>(schema: T, doc: string): T => schema.meta({ description: doc }) as T;

const sourceName = z.string().regex(/^[a-z0-9][a-z0-9_.-]{0,62}$/i, 'must be 1-63 letters, digits, dots, dashes or underscores');
const rateText = z.string().refine((v) => parseRate(v) !== undefined, { message: 'must be a rate such as "5/s", "100/min" or "2000/h"' });
const durationText = z.string().refine((v) => parseDuration(v) !== undefined, { message: 'must be a duration such as "30s", "30m", "4h" or "1d"' });
/** A duration that also bounds a timer: at most `max` ("1h"), well below Node's 2^31-1 ms, past which a timer fires at once. */
const durationAtMost = (max: string) =>
  durationText.refine((v) => parseDuration(v)! <= parseDuration(max)!, { message: `must be at most ${max}` });
const isoDate = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date, YYYY-MM-DD').refine((v) => !Number.isNaN(Date.parse(`${v}T00:00:00Z`)) && new Date(`${v}T00:00:00Z`).toISOString().startsWith(v), { message: 'must be a real date' });
const isRegex = (v: string) => {
  try {
    new RegExp(v, 'i');
    return true;
  } catch {
    return false;
  }
};

const sourceSchema = z
  .object({
    name: field(sourceName, 'Name of the source, as pools, shaping rules, events, traces and metrics call it.'),
    localAddress: field(z.string().refine((v) => v === '' || isIP(v) !== 0, { message: 'must be an IP address of this host' }).default(''), 'Local address outbound connections bind to; empty: the host\'s default.'),
    ehloName: field(checked(hostProblem, true).default(''), 'EHLO name of its sessions (the PTR name of localAddress); empty: hostname.'),
    warmup: field(
      z
        .object({
          start: field(isoDate, 'Day 1 of the schedule (UTC date).'),
          schedule: field(z.union([z.literal('standard'), z.array(z.number().int().positive()).min(1)]).default('standard'), '"standard" (docs/outbound.md) or the messages per day per provider rollup, day 1 first; no cap after the last day.'),
        })
        .strict()
        .optional(),
      'Warm-up of a new address, { start = "YYYY-MM-DD" (day 1, UTC), schedule = "standard" or [messages per day, day 1 first] }: at most the day\'s number of messages to each provider rollup, the rest waits for the next day; no cap after the last day.',
    ),
  })
  .strict();

const poolSchema = z
  .object({
    name: field(sourceName, 'Name of the pool (posthorn teams set-pool, posthorn domains set-pool). A pool named "default" replaces the default pool (every source).'),
    sources: field(
      z.array(z.union([sourceName, z.object({ name: sourceName, weight: z.number().int().min(1).max(1000).default(1) }).strict()])).min(1),
      'Its sources: names, or { name, weight } tables; mail is spread over them by weight.',
    ),
  })
  .strict();

const shapingRuleSchema = z
  .object({
    domain: field(z.string().min(1).optional(), 'Recipient domain the rule is for (it becomes a rollup of its own).'),
    mx: field(z.string().min(1).optional(), 'Or: MX host suffix; every domain whose primary MX is under it shares one budget (an MX rollup).'),
    source: field(sourceName.optional(), 'Only for this source; absent: for every source (a source\'s rule overrides it).'),
    connectionLimit: field(z.number().int().positive().optional(), 'Open connections at once per (source, rollup).'),
    messageRate: field(rateText.optional(), 'Messages per (source, rollup), evenly spaced: "5/s", "100/min", "2000/h".'),
    maxDeliveriesPerConnection: field(z.number().int().positive().optional(), 'Messages per connection, then QUIT and reconnect.'),
    maxRecipientsPerTransaction: field(z.number().int().min(1).max(100).optional(), 'Recipients per message transaction (RCPT TO per MAIL FROM); 1 when unset. Above 1 they share a return path tagged with their domain, so one of them can report (bounce, complain) for another.'),
    idleTimeout: field(durationAtMost('1h').optional(), 'An idle connection is closed after this ("30s"); at most "1h".'),
  })
  .strict()
  .refine((r) => !r.domain !== !r.mx, { message: 'a shaping rule names exactly one of domain or mx' });

const replyRuleSchema = z
  .object({
    rollup: field(z.string().min(1).optional(), 'Only for this rollup (an MX suffix of a shaping rule, or a recipient domain); absent: any.'),
    code: field(z.number().int().min(200).max(599).optional(), 'The reply code, such as 421.'),
    enhancedCode: field(z.string().regex(/^[245](\.\d{1,3}){1,2}$/, 'must be an enhanced status code such as 4.7.28 (or a prefix such as 4.7)').optional(), 'The enhanced status code (RFC 3463), or a prefix of it.'),
    text: field(z.string().refine(isRegex, { message: 'must be a valid regular expression' }).optional(), 'A regular expression (case-insensitive) the reply must match.'),
    action: field(z.enum(['suspend', 'throttle']), '"suspend": nothing goes to that (source, rollup) for duration; "throttle": at most messageRate.'),
    duration: field(durationText, 'How long ("30m", "4h").'),
    messageRate: field(rateText.optional(), 'The rate of a throttle.'),
    reason: field(z.string().max(200).optional(), 'Shown with the hold (the reply follows it).'),
  })
  .strict()
  .refine((r) => r.code !== undefined || r.enhancedCode !== undefined || r.text !== undefined, { message: 'a reply rule needs code, enhancedCode or text' })
  .refine((r) => r.action !== 'throttle' || r.messageRate !== undefined, { message: 'a throttle needs messageRate' });

type EgressKeys = { sources: { name: string }[]; pools: { name: string; sources: (string | { name: string })[] }[]; shaping: { source?: string | undefined }[] };

/** Names are unique, and pools and rules name sources that exist. */
function checkEgress(v: EgressKeys, ctx: z.RefinementCtx): void {
  const names = new Set<string>();
  v.sources.forEach((s, i) => {
    if (names.has(s.name)) ctx.addIssue({ code: 'custom', path: ['sources', i, 'name'], message: `source ${s.name} is defined twice` });
    names.add(s.name);
  });
  // Without sources there is one, "default".
  if (!names.size) names.add('default');
  const pools = new Set<string>();
  v.pools.forEach((p, i) => {
    if (pools.has(p.name)) ctx.addIssue({ code: 'custom', path: ['pools', i, 'name'], message: `pool ${p.name} is defined twice` });
    pools.add(p.name);
    p.sources.forEach((m, j) => {
      const n = typeof m === 'string' ? m : m.name;
      if (!names.has(n)) ctx.addIssue({ code: 'custom', path: ['pools', i, 'sources', j], message: `no source named ${n} in outbound.sources` });
    });
  });
  v.shaping.forEach((r, i) => {
    if (r.source !== undefined && !names.has(r.source)) ctx.addIssue({ code: 'custom', path: ['shaping', i, 'source'], message: `no source named ${r.source} in outbound.sources` });
  });
}

const listenerSection = <T extends z.ZodRawShape>(shape: T, doc: string) =>
  z
    .object(shape)
    .strict()
    .refine((v) => bothOrNeither(v as unknown as { certFile: string; keyFile: string }), bothOrNeitherMessage)
    .meta({ description: doc })
    .prefault({} as never);

export const configSchema = z
  .object({
    dataDir: key(z.string().min(1).default('./data'), { doc: 'Where the SQLite database (posthorn.db), generated certificates and secrets live (created if missing).', env: 'POSTHORN_DATA_DIR' }),
    hostname: key(dnsName.default('localhost'), {
      doc: "This server's public host name: the MX/SPF target in the DNS records users publish, and the EHLO name. (A message's Message-ID is on its sending domain.)",
      env: 'POSTHORN_HOSTNAME',
    }),
    publicUrl: key(checked(publicUrlProblem, true).transform((u) => u.replace(/\/+$/, '')).default(''), {
      doc: 'Base URL for open/click tracking, unsubscribe and double opt-in links, as the world reaches the HTTP listener (no trailing slash). Empty: derived from http.host and http.port (http://localhost:3000 at the defaults), which only this machine can open.',
      env: 'POSTHORN_PUBLIC_URL',
    }),
    secret: key(z.string().default(''), { doc: 'Secret that signs those links. Empty: one is generated on first start and kept in the database.', env: 'POSTHORN_SECRET' }),
    sandbox: key(z.boolean().default(false), {
      doc: 'Sandbox mode, for trying Posthorn without DNS or port 25: a domain may send before it verifies, and every message goes through the whole pipeline (composed, DKIM-signed, tracked, events and webhooks) but is delivered to a capture mailbox on this server (GET /v1/sandbox/messages) instead of any MX. Nothing leaves the server by SMTP.',
      env: 'POSTHORN_SANDBOX',
    }),
    intakeMemoryMb: key(z.number().int().min(1).max(4096).default(64), {
      doc: 'Memory for received bodies (API requests, submitted and inbound mail), in megabytes, bounded twice: bodies being received or waiting for their turn are kept in memory up to this much in all, the next ones written to <dataDir>/spool; and bodies being parsed and stored (a few times their size in memory) take up to this much at once, more waits its turn, and a body larger than this goes alone. Bounds the memory a burst of large sends takes.',
    }),
    store: section(
      {
        url: key(z.union([z.literal(''), z.string().regex(/^postgres(ql)?:\/\/\S+$/i, 'must be a postgres:// URL such as postgres://user:password@host:5432/posthorn').superRefine((v, ctx) => {
          const found = databaseUrlProblem(v);
          if (found) ctx.addIssue({ code: 'custom', message: found });
        })]).default(''), {
          doc: 'PostgreSQL to keep everything in, as postgres://user:password@host:5432/database; several Posthorn nodes may share one (docs/scaling.md). Empty: SQLite in <dataDir>/posthorn.db.',
          env: 'POSTHORN_DATABASE_URL',
        }),
        durability: key(z.enum(['full', 'normal']).default('full'), {
          doc: 'full: every accepted send, stored message and delivery result is on disk before Posthorn says so (it survives a power cut: SQLite syncs its log, PostgreSQL commits with synchronous_commit=on). normal: faster on slow disks; a killed Posthorn still loses nothing, but a power cut (or a crash of the PostgreSQL server) can lose the last seconds (SQLite syncs at checkpoints only; PostgreSQL synchronous_commit=off).',
        }),
        statementTimeout: key(z.union([z.literal('0'), durationAtMost('1h')]).default('30s'), {
          doc: 'PostgreSQL: how long one list, search or analytics query served on behalf of an API or console request (segment members and previews, contact searches and exports, the email list and its filters, the lists of contact books and one book with its contact count, suppressions, campaigns, templates, segments, webhooks and their delivery attempts, received emails, TLS reports and sandbox captures, and the analytics time series and reputation) may run before the server cancels it; the request then answers 422 saying to narrow the filter. Writes, migrations, store copies, retention and the engine\'s own work are never cut short. "0": no limit.',
        }),
        pool: section({
          max: key(z.number().int().min(2).max(1000).default(10), { doc: 'PostgreSQL: connections this node keeps to the database at most.' }),
          connectTimeoutMs: key(timeoutMs(600_000).default(5000), { doc: 'PostgreSQL: how long an operation waits for a connection, in milliseconds, before it fails (a send then answers 500 "not stored").' }),
        }),
      },
      'Where Posthorn keeps its data: SQLite in dataDir (one server), or PostgreSQL shared by any number of nodes.',
    ),
    cluster: section(
      {
        nodeName: key(z.string().regex(/^[A-Za-z0-9._:-]{0,100}$/, 'letters, digits, ".", "_", ":" and "-" only').default(''), {
          doc: 'This node\'s name in the cluster (health, leases, logs). Empty: <hostname>:<pid>. With PostgreSQL, every node sharing the database needs a distinct one.',
          env: 'POSTHORN_NODE_NAME',
        }),
      },
      'Several nodes sharing one PostgreSQL store.',
    ),
    log: section({
      level: key(z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'), { doc: 'trace, debug, info, warn, error, fatal or silent.', env: 'POSTHORN_LOG_LEVEL' }),
    }),
    http: section(
      {
        host: key(hostAddress.default('0.0.0.0'), { doc: 'Address the HTTP API binds to.', env: 'POSTHORN_HTTP_HOST' }),
        port: key(port.default(3000), { doc: 'Port of the HTTP API; 0 picks a free port (it is logged).', env: 'POSTHORN_HTTP_PORT' }),
        bodyLimitBytes: key(z.number().int().positive().default(40 * 1024 * 1024), {
          doc: 'Largest request body in bytes (413 beyond it). 40 MB fits 10 attachments of ~3 MB each, base64-encoded.',
        }),
        trustProxy: key(z.boolean().default(false), {
          doc: 'Behind a reverse proxy (nginx, Caddy) that sets X-Forwarded-For, -Proto and -Host: true takes the client address from the last X-Forwarded-For entry (the one the proxy added) and the scheme and host from the others, for the console sign-in limit and tracking events. False uses the connection itself, whatever a client writes in those headers. Only set it true when the HTTP port is reachable through the proxy alone.',
        }),
      },
      'The HTTP API, tracking links and unsubscribe pages.',
    ),
    tracking: section(
      {
        machineWindowSeconds: key(z.number().int().min(0).max(3600).default(3), {
          doc: 'An open or click within this many seconds of the email\'s delivery is flagged as a machine\'s (a privacy proxy or link scanner fetching at arrival): still recorded, but it leaves latestStatus alone and analytics reports it apart. 0 turns this rule off; the user-agent and link-burst rules stay.',
          env: 'POSTHORN_TRACKING_MACHINE_WINDOW_SECONDS',
        }),
        machineNetworks: key(networkList.default([]), {
          doc: 'Addresses and networks ("192.0.2.7", "10.0.0.0/8", "2001:db8::/32"; an IPv4-mapped IPv6 client counts as its IPv4 address) whose opens and clicks are flagged as machines\' (machineReason "network"), whatever their user agent: the ranges your recipients\' security gateways (Mimecast, Proofpoint, Barracuda, Microsoft Safe Links) fetch links from. The client address is the connection\'s, or X-Forwarded-For\'s with http.trustProxy. Empty: none.',
        }),
      },
      'Open and click tracking: which hits count as made by machines (docs/api.md, Tracking).',
    ),
    rateLimit: section({
      perSecond: key(z.number().int().positive().default(10), {
        doc: 'API requests per second per team (a team may have its own: posthorn teams set-rate-limit).',
        env: 'POSTHORN_RATE_LIMIT',
      }),
    }),
    dns: section({
      servers: key(
        z
          .array(z.string())
          .transform((list, ctx) => {
            try {
              return parseDnsServers(list.join(','));
            } catch (err) {
              ctx.addIssue({ code: 'custom', message: (err as Error).message });
              return z.NEVER;
            }
          })
          .prefault([]),
        {
          doc: 'Resolvers as "ip" or "ip:port"; empty uses the system resolver. For DANE it must be a validating resolver on this host (a local unbound): its AD bit is trusted (dns.trustAd).',
          env: 'POSTHORN_DNS_SERVERS',
        },
      ),
      timeoutMs: key(z.number().int().positive().default(2000), { doc: 'Timeout of one DNS try, in milliseconds.' }),
      trustAd: key(z.enum(['loopback', 'always']).default('loopback'), {
        doc: 'Whose DNSSEC AD bit (DANE) is believed: "loopback", a resolver on this host only (an answer across a network can be forged); "always", every one in dns.servers (only over a trusted path).',
        env: 'POSTHORN_DNS_TRUST_AD',
      }),
    }),
    domains: section({
      dkimSelector: key(z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/i).default('posthorn'), { doc: 'DKIM selector: the key is published at <selector>._domainkey.<domain>. A domain whose name another domain (or the server itself) already holds gets <selector>-<8 hex> instead, so each key has its own host.' }),
      bounceLabel: key(z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/i).default('bounces'), {
        doc: 'Label of the return-path (bounce) host: <bounceLabel>.<domain> gets MX and SPF records, and VERP bounces come back there.',
      }),
      recheckUnverifiedCron: key(cron.default('*/10 * * * *'), { doc: 'How often unverified domains are re-checked (cron syntax, in UTC).' }),
      recheckVerifiedCron: key(cron.default('17 3 * * *'), { doc: 'How often verified domains are re-checked (cron syntax, in UTC).' }),
    }),
    inbound: listenerSection(
      {
        ...listenerKeys(
          'inbound',
          { port: 25, maxConnections: 200, maxConnectionsPerIp: 50 },
          {
            port: 'Port of the inbound SMTP listener; 0 picks a free one.',
            tls: 'PEM certificate (chain) for STARTTLS. Both this and keyFile empty: a self-signed pair is generated on first start and kept in <dataDir>/tls/.',
            maxRecipients: 'RCPT TO commands accepted per message (RFC 5321 4.5.3.1.8 requires at least 100); more get 452.',
            exemptNetworks:
              'Client addresses and networks ("192.0.2.7", "10.0.0.0/8", "2001:db8::/32"; an IPv4-mapped IPv6 client counts as its IPv4 address) that maxConnectionsPerIp does not cap: your own relays and monitoring. maxConnections still counts them. Empty: none.',
          },
        ),
        complaintAddress: key(z.union([z.literal(''), z.string().regex(/^[^\s@<>]+@[^\s@<>]+\.[^\s@<>]+$/, 'must be an email address')]).default(''), {
          doc: 'Address feedback loops (Yahoo, AOL, Microsoft JMRP...) send ARF complaints to. Empty means complaints@<hostname>.',
        }),
        lateReportDays: key(z.number().int().min(0).max(365).default(30), {
          doc: "Days after a domain is deleted that bounces and complaints to its tagged return paths are still taken, for the email (and team) they name (docs/inbound.md, Late reports for a deleted domain). Remote MTAs retry for about five days before their final DSN, feedback loops complain weeks later; past this the name's mail is refused like any name's we do not serve. 0: none after the deletion.",
        }),
      },
      'Inbound SMTP: bounces, complaints and receiving domains.',
    ),
    submission: listenerSection(
      {
        ...listenerKeys(
          'submission',
          { port: 587, maxConnections: 100, maxConnectionsPerIp: 20 },
          {
            port: 'Port of authenticated SMTP submission; 0 picks a free one.',
            tls: 'PEM certificate for STARTTLS; both empty uses the same self-signed pair as [inbound]. Clients must STARTTLS before AUTH, so give them one they trust in production.',
            maxRecipients: 'Recipients per message; more get 452. A send takes at most 100 in to, cc and bcc together, so a higher value acts as 100.',
            exemptNetworks:
              'Client addresses and networks ("192.0.2.7", "10.0.0.0/8", "2001:db8::/32"; an IPv4-mapped IPv6 client counts as its IPv4 address) that neither maxConnectionsPerIp caps nor the authFailureLimit lockout shuts out: a local app with many connections, or one whose old key would lock out its neighbours. They still need a valid key, and each connection still closes after 3 failed AUTHs; maxConnections still counts them. Empty: none.',
          },
        ),
        authFailureLimit: key(z.number().int().min(0).default(10), {
          doc: 'Failed AUTHs from one client address (IPv6: one /64) within authFailureWindow that lock it out: its connections and AUTHs are told 421 4.7.0 for authFailureWindow after the last failure. A successful AUTH does not clear the count. 0: no lockout (each connection still closes after 3 failures). Counted by each node on its own.',
        }),
        authFailureWindow: key(durationAtMost('1d').default('15m'), { doc: 'The window of authFailureLimit, and how long a lockout lasts: "15m", "1h".' }),
        bounceNotices: key(z.boolean().default(false), {
          doc: "Mail a bounce notice (an RFC 3464 DSN from MAILER-DAEMON@<hostname>) to the envelope sender of a submitted message when a recipient bounces or fails, as a classic relay does; only when that sender's domain is one of the team's verified domains. Queued with the outcome and retried like mail (a deferred notice until outbound.maxAgeHours).",
          env: 'POSTHORN_SUBMISSION_BOUNCE_NOTICES',
        }),
      },
      'Authenticated SMTP submission (AUTH with an API key as the password).',
    ),
    outbound: z
      .object({
        port: key(port.min(1).default(25), { doc: "Destination port on recipients' MX hosts (25; only tests and special setups change it).", env: 'POSTHORN_OUTBOUND_PORT' }),
        allowLoopbackMx: key(z.boolean().default(false), {
          doc: "Deliver to MX hosts that resolve to this host's loopback or \"this host\" addresses (127.0.0.0/8, ::1, 0.0.0.0/8). Refused by default, as mail that would loop back: the recipient's DNS chooses those addresses, and a local MTA usually relays anything from loopback. For tests and labs whose MX is on this machine; a relay (outbound.relay) on loopback needs no such setting.",
          env: 'POSTHORN_OUTBOUND_ALLOW_LOOPBACK_MX',
        }),
        maxAgeHours: key(z.number().positive().default(72), { doc: 'A message still undelivered this many hours after it was due is FAILED.' }),
        caFile: key(z.string().default(''), { doc: 'PEM file of extra CA certificates trusted for ENFORCED TLS, MTA-STS and TLS report posts (besides the system store).' }),
        maxConnectionsPerHost: key(z.number().int().positive().default(10), { doc: 'Concurrent SMTP connections to one destination host.' }),
        maxConnections: key(z.number().int().positive().default(100), { doc: 'Concurrent SMTP connections in total.' }),
        signingWorkers: key(z.number().int().min(0).max(16).optional(), {
          doc: 'Worker threads that compose and DKIM-sign messages; 0 signs on the main thread. Unset: one less than the CPU cores (at least 1, at most 8), since the main thread needs a core of its own.',
        }),
        messageMemoryMb: key(z.number().int().min(1).max(4096).default(64), {
          doc: 'Megabytes of message content the delivery engine holds at once (bodies being composed and signed, messages being sent); more waits its turn, and a message larger than this goes alone. Bounds the memory a burst of large attachments takes.',
        }),
        connectTimeoutMs: key(timeoutMs(3_600_000).default(30_000), {
          doc: 'TCP connect to a remote MX (or the relay), in milliseconds; then the next MX host is tried.',
          env: 'POSTHORN_OUTBOUND_CONNECT_TIMEOUT_MS',
        }),
        greetingTimeoutMs: key(timeoutMs(3_600_000).default(30_000), {
          doc: 'Wait for the 220 greeting (and for a STARTTLS handshake), in milliseconds.',
          env: 'POSTHORN_OUTBOUND_GREETING_TIMEOUT_MS',
        }),
        socketTimeoutMs: key(timeoutMs(3_600_000).default(10 * 60_000), {
          doc: 'Inactivity inside a session, in milliseconds. RFC 5321 4.5.3.2 gives the reply to the final dot 10 minutes, so a slow server that does take the message is not given up on (and sent it twice).',
          env: 'POSTHORN_OUTBOUND_SOCKET_TIMEOUT_MS',
        }),
        transactionTimeoutMs: key(timeoutMs(24 * 3_600_000).default(15 * 60_000), {
          doc: "Longest one message's transaction (MAIL FROM to the final reply) may take, in milliseconds: ends a tarpit that keeps the session busy without ever finishing its reply.",
          env: 'POSTHORN_OUTBOUND_TRANSACTION_TIMEOUT_MS',
        }),
        leaseMs: key(z.number().int().min(1000).default(10 * 60_000), {
          doc: 'How long a claimed delivery (of a message, or of a TLS report) stays leased, in milliseconds (renewed every third of it while its attempt is under way); a delivery still leased when its owner died, or could not record the result, is claimed again after it.',
        }),
        traces: section(
          {
            enabled: key(z.boolean().default(true), {
              doc: 'Keep a trace of every delivery attempt (MX, addresses, TLS, the SMTP commands and replies; never the message body or AUTH secrets), read with posthorn queue trace or GET /admin/v1/emails/{id}/trace.',
            }),
            retentionDays: key(z.number().int().min(1).max(90).default(7), { doc: 'How many days attempt traces are kept.' }),
          },
          'The SMTP trace of each delivery attempt, for operators.',
        ),
        mtaSts: section(
          {
            enabled: key(z.boolean().default(true), {
              doc: "Honour recipient domains' MTA-STS policies (RFC 8461): enforce delivers only to the MX hosts the policy lists, over TLS with a valid certificate.",
            }),
            httpsPort: key(port.min(1).default(443), { doc: 'Port of the HTTPS server policies are fetched from (https://mta-sts.<domain>/.well-known/mta-sts.txt); only tests change it.' }),
            fetchTimeoutMs: key(timeoutMs(120_000).default(20_000), { doc: 'Timeout of one policy fetch (DNS, connect, TLS and body), in milliseconds.' }),
            allowPrivate: key(z.boolean().default(false), {
              doc: 'Fetch policies from mta-sts.<domain> hosts that resolve to private, loopback or link-local addresses (refused by default: the recipient domain chooses that name).',
            }),
          },
          'MTA-STS: recipient domains that require TLS to listed MX hosts.',
        ),
        dane: section(
          {
            enabled: key(z.boolean().default(true), {
              doc: "Honour DANE TLSA records (RFC 7672) of MX hosts in DNSSEC-signed zones. Posthorn trusts the AD bit of dns.servers: point it at a validating resolver on this host (docs/outbound.md).",
            }),
          },
          'DANE: MX hosts that publish their certificates in DNSSEC-signed TLSA records.',
        ),
        tlsReports: section(
          {
            enabled: key(z.boolean().default(true), { doc: 'Send daily TLS reports (RFC 8460) to recipient domains that publish _smtp._tls with a rua.' }),
            cron: key(cron.default('17 1 * * *'), { doc: 'When the reports of the finished UTC days are made and sent (cron syntax, in UTC); failed deliveries are retried every few minutes.' }),
            organizationName: key(z.string().default(''), { doc: 'organization-name of the reports; empty means hostname.' }),
            contactInfo: key(z.string().default(''), { doc: 'contact-info of the reports (an address or URL); empty means postmaster@<hostname>.' }),
            allowPrivate: key(z.boolean().default(false), { doc: 'Allow https: report targets that resolve to private, loopback or link-local addresses.' }),
          },
          'TLS reporting (RFC 8460): what our sessions with each recipient domain came to, sent to the domain once a day.',
        ),
        relay: section(
          {
            host: key(checked(hostProblem, true).default(''), { doc: 'Upstream relay (smarthost) for hosts whose port 25 is blocked; empty delivers directly. Mail is still DKIM-signed by us.' }),
            port: key(port.min(1).default(587), { doc: 'Port of the relay.' }),
            secure: key(z.enum(['implicit', 'starttls', 'none']).default('starttls'), {
              doc: '"implicit" (TLS from the first byte, usually 465), "starttls" (587/25) or "none" (plaintext, not recommended).',
            }),
            user: key(z.string().default(''), { doc: 'AUTH user at the relay; empty sends without AUTH.' }),
            password: key(z.string().default(''), { doc: 'AUTH password at the relay.' }),
          },
          'Deliver everything through an upstream SMTP server instead of MX lookups.',
        ),
        sources: tables(sourceSchema, {
          doc: 'Egress sources (docs/outbound.md, "Egress sources and pools"): a local address to send from and its EHLO name, optionally warming up. None: one source, "default", on the host\'s default address with hostname.',
          example: ['[[outbound.sources]]', 'name = "ip1"', 'localAddress = "192.0.2.10"', 'ehloName = "mta1.example.com"', 'warmup = { start = "2026-12-01", schedule = "standard" }'],
        }),
        pools: tables(poolSchema, {
          doc: 'Egress pools: weighted sets of sources, assigned to a team (posthorn teams set-pool) or a domain (posthorn domains set-pool; a domain\'s beats its team\'s). Mail of everyone else goes through the pool named "default", or when there is none, through every source.',
          example: ['[[outbound.pools]]', 'name = "bulk"', 'sources = ["ip1", { name = "ip2", weight = 2 }]'],
        }),
        shaping: tables(shapingRuleSchema, {
          doc: 'Traffic-shaping rules per (source, rollup), over the built-in ones for the large providers (docs/outbound.md, "Traffic shaping"); a rule overrides the fields it sets.',
          example: ['[[outbound.shaping]]', 'mx = "google.com"', 'connectionLimit = 5', 'messageRate = "20/s"', 'maxDeliveriesPerConnection = 50', '', '[[outbound.shaping]]', 'domain = "example.net"', 'source = "ip1"', 'messageRate = "100/min"'],
        }),
        replyRules: tables(replyRuleSchema, {
          doc: 'Rules that turn a remote reply into a suspension or a throttle of that (source, rollup), tried before the built-in ones (docs/outbound.md, "Automatic throttling").',
          example: ['[[outbound.replyRules]]', 'enhancedCode = "4.7.28"', 'action = "suspend"', 'duration = "2h"', '', '[[outbound.replyRules]]', 'code = 421', 'text = "too many messages"', 'action = "throttle"', 'messageRate = "10/min"', 'duration = "30m"'],
        }),
        builtinShaping: key(z.boolean().default(true), { doc: 'Apply the built-in shaping rules for Gmail, Microsoft, Yahoo and iCloud (docs/outbound.md lists them) under outbound.shaping.' }),
        builtinReplyRules: key(z.boolean().default(true), { doc: "Apply the built-in reply rules (Gmail 4.7.28, Microsoft 4.7.650 and 4.7.500, Yahoo TSS04, iCloud, and any 421 that says too many connections or rate limit) after outbound.replyRules." }),
      })
      .strict()
      .superRefine((v, ctx) => checkEgress(v as unknown as EgressKeys, ctx))
      .meta({ description: "Delivery to recipients' MX hosts." })
      .prefault({} as never),
    metrics: section(
      {
        allowFrom: key(
          z
            .array(z.string())
            .refine((list) => list.every(isAddressOrSubnet), { message: 'each entry must be an IP address or a subnet such as 10.0.0.0/8' })
            .default(['127.0.0.1', '::1']),
          { doc: 'Addresses (or subnets) that may read GET /metrics without a key; anyone else needs an operator key as bearer. The connecting address counts, never X-Forwarded-For; a request a reverse proxy relayed (X-Forwarded-For, X-Real-IP or Forwarded) needs a key unless http.trustProxy is on and the client it names is allowed too.' },
        ),
      },
      'Prometheus metrics at GET /metrics.',
    ),
    campaigns: section({
      batchWindowSeconds: key(z.number().min(0).max(86_400).default(60), { doc: 'A campaign sends batchSize messages per window of this many seconds (pacing).' }),
    }),
    console: section(
      {
        enabled: key(z.boolean().default(true), { doc: 'Serve the web console under /console (docs/console.md); false leaves only the API.', env: 'POSTHORN_CONSOLE_ENABLED' }),
        sessionIdleMinutes: key(z.number().int().min(1).max(7 * 24 * 60).default(60), { doc: 'A console session ends after this many minutes without a request.' }),
        sessionMaxHours: key(z.number().int().min(1).max(30 * 24).default(12), { doc: 'A console session ends this many hours after sign-in, however active it is.' }),
      },
      'The web console: users are created with `posthorn users create`.',
    ),
    retention: section(
      {
        contentDays: key(z.number().int().min(0).max(3650).default(0), {
          doc: 'Days the content of mail is kept; 0 keeps it forever. Daily at 04:53 UTC, older sent emails whose delivery is over lose their text, HTML and attachments (GET /v1/emails/{id} then shows html and text as null), received emails their raw message, text, HTML and attachments, bounce and complaint reports the message they stored, and sandbox captures are deleted. Addresses, subjects, headers, events and counts stay.',
        }),
      },
      'How long mail content is kept (the disk a busy server fills with message bodies).',
    ),
    webhooks: webhooksSection({
      allowPrivate: key(z.boolean().default(false), { doc: 'Allow webhook URLs that resolve to private, loopback or link-local addresses.', env: 'POSTHORN_WEBHOOKS_ALLOW_PRIVATE' }),
      timeoutMs: key(timeoutMs(60_000).default(10_000), { doc: 'Per-attempt timeout of a webhook POST, in milliseconds (connect, headers and body); a timeout is a failed attempt.' }),
      leaseMs: key(z.number().int().min(1000).default(5 * 60_000), {
        doc: 'How long a claimed webhook call stays leased, in milliseconds: far beyond one attempt plus recording it (at least twice timeoutMs); a call whose attempt could not be recorded is due again after it.',
      }),
      maxInFlight: key(z.number().int().min(1).max(1024).default(WEBHOOK_MAX_IN_FLIGHT), {
        doc: `Webhook calls in flight at once in all, per node (at most ${WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT} per endpoint); half of them at most go to endpoints whose last attempt failed. More lets many slow endpoints be waited on together, each call holding a socket.`,
      }),
      maxInFlightPerHost: key(z.number().int().min(0).max(1024).default(16), {
        doc: `Webhook calls in flight to one host name at once, over all endpoints (and teams) that point at it, for the cluster (on several nodes each takes its share: the cap over the live nodes, rounded down, at least 1); 0 means no cap. At most maxInFlight: the cap keeps many endpoints on one slow host from taking every call in flight while other hosts' events wait.`,
      }),
      disableAfterFailures: key(z.number().int().min(0).max(1_000_000).default(30), {
        doc: 'An endpoint whose events failed every attempt this many times in a row is set AUTO_DISABLED: it gets no new events and its pending calls are discarded until it is set ACTIVE again. A delivered event resets the count. 0 never disables.',
      }),
    }),
  })
  .strict();

/** The parsed configuration the process runs with. */
export type Config = z.output<typeof configSchema>;
