// Every configuration key with its default. Override in a TOML file (`--config path`,
// same nesting and key names as here) and then with POSTHORN_* environment variables.
export interface Config {
  /** Where the SQLite database, generated keys and certificates live (created if missing). */
  dataDir: string;
  /** Public host name of this server: used in DNS records we ask users to publish, EHLO and Message-IDs. */
  hostname: string;
  /** Base URL for tracking, unsubscribe and confirmation links (no trailing slash). */
  publicUrl: string;
  /** Secret for HMAC-signed links; empty means "generate one and keep it in the data dir". */
  secret: string;
  log: {
    /** pino level: trace, debug, info, warn, error, fatal, silent. */
    level: string;
  };
  http: {
    host: string;
    /** 0 picks a free port; the chosen port is logged. */
    port: number;
    /** Largest accepted request body, in bytes (413 beyond it). 40 MB fits 10 attachments of ~3 MB each base64-encoded. */
    bodyLimitBytes: number;
  };
  rateLimit: {
    /** Default API requests per second per team (a team can have its own override). */
    perSecond: number;
  };
  dns: {
    /** Resolvers as "ip" or "ip:port"; empty means the system resolver. */
    servers: string[];
    /** Timeout per DNS try, in milliseconds. */
    timeoutMs: number;
  };
  domains: {
    /** DKIM selector published at <selector>._domainkey.<domain>. */
    dkimSelector: string;
    /** Label of the return-path host <bounceLabel>.<domain> (VERP bounces come back there). */
    bounceLabel: string;
    /** Re-check unverified domains this often (cron expression). */
    recheckUnverifiedCron: string;
    /** Re-check verified domains this often (cron expression). */
    recheckVerifiedCron: string;
  };
  inbound: {
    /** Port of the inbound SMTP listener (bounces, complaints, receiving domains); 0 = pick a free one. */
    port: number;
    host: string;
    /** PEM certificate chain and key for STARTTLS; both empty = a self-signed pair generated in <dataDir>/tls/. */
    certFile: string;
    keyFile: string;
    /** Where feedback loops send ARF complaint reports; empty = complaints@<hostname>. */
    complaintAddress: string;
    /** Largest accepted message in bytes (RFC 1870 SIZE); larger is refused with 552 5.3.4. */
    maxMessageBytes: number;
    /** Concurrent SMTP connections; more are told 421 and closed. */
    maxConnections: number;
    /** RCPT TO commands accepted per message (RFC 5321 4.5.3.1.8 requires at least 100); more get 452. */
    maxRecipients: number;
  };
  submission: {
    /** Port of authenticated SMTP submission; 0 = pick a free one. */
    port: number;
    host: string;
    /** PEM certificate chain and key for STARTTLS; both empty = the same self-signed pair as inbound. */
    certFile: string;
    keyFile: string;
    /** Largest accepted message in bytes (RFC 1870 SIZE). */
    maxMessageBytes: number;
    /** Concurrent SMTP connections. */
    maxConnections: number;
    /** Recipients per message; a send takes at most 100 in to, cc and bcc together. */
    maxRecipients: number;
  };
  outbound: {
    /** Destination SMTP port on recipients' MX hosts (25 in production; tests point it at a sink). */
    port: number;
    /** Give up on a message still undelivered this many hours after acceptance (FAILED). */
    maxAgeHours: number;
    /** Extra CA certificates (PEM file) trusted for ENFORCED TLS, besides the system store. */
    caFile: string;
    /** Concurrent SMTP connections to one destination host, and in total. */
    maxConnectionsPerHost: number;
    maxConnections: number;
    /** Worker threads that compose (nodemailer) and DKIM-sign messages: about 2 ms of CPU per
     *  message that would otherwise sit on the event loop. 2 uses both cores when busy. */
    signingWorkers: number;
    /** TCP connect to a remote MX (or the relay), in milliseconds; then the next MX host is tried. */
    connectTimeoutMs: number;
    /** Wait for the 220 greeting (and for a STARTTLS handshake), in milliseconds. A host that
     *  accepts the connection but never greets is given up on after this. */
    greetingTimeoutMs: number;
    /** Inactivity during an SMTP session, in milliseconds: a server that stops answering mid-
     *  transaction (after DATA, say) is given up on after this and the message is deferred.
     *  RFC 5321 4.5.3.2 asks a client to wait 5 minutes for most replies and 10 for the one
     *  after the final dot; the default is 10 minutes, so a slow server that does take the
     *  message is not given up on (and sent it again). */
    socketTimeoutMs: number;
    /** Longest one message's transaction (MAIL FROM to the final reply) may take, in milliseconds.
     *  Ends a server that keeps the session busy without ever finishing its reply (a tarpit
     *  dribbling continuation lines defeats the inactivity timeout); the message is deferred. */
    transactionTimeoutMs: number;
    /** Upstream relay (smarthost): when host is set, all mail goes through it, still DKIM-signed by us. */
    relay: {
      host: string;
      port: number;
      /** implicit = TLS from the first byte (465); starttls = upgrade (587/25); none = plaintext (not recommended). */
      secure: 'implicit' | 'starttls' | 'none';
      user: string;
      password: string;
    };
  };
  campaigns: {
    /** A campaign sends batchSize messages per window of this many seconds. */
    batchWindowSeconds: number;
  };
  webhooks: {
    /** Allow webhook URLs that resolve to private, loopback or link-local addresses. */
    allowPrivate: boolean;
    /** Per-attempt HTTP timeout in milliseconds (connect, headers and body); a timeout is a failed attempt. */
    timeoutMs: number;
  };
}

export const DEFAULT_CONFIG: Config = {
  dataDir: './data',
  hostname: 'localhost',
  publicUrl: 'http://localhost:3000',
  secret: '',
  log: { level: 'info' },
  http: { host: '0.0.0.0', port: 3000, bodyLimitBytes: 40 * 1024 * 1024 },
  rateLimit: { perSecond: 10 },
  dns: { servers: [], timeoutMs: 2000 },
  domains: {
    dkimSelector: 'posthorn',
    bounceLabel: 'bounces',
    recheckUnverifiedCron: '*/10 * * * *',
    recheckVerifiedCron: '17 3 * * *',
  },
  inbound: {
    port: 25,
    host: '0.0.0.0',
    certFile: '',
    keyFile: '',
    complaintAddress: '',
    maxMessageBytes: 30 * 1024 * 1024,
    maxConnections: 200,
    maxRecipients: 100,
  },
  submission: {
    port: 587,
    host: '0.0.0.0',
    certFile: '',
    keyFile: '',
    maxMessageBytes: 30 * 1024 * 1024,
    maxConnections: 100,
    maxRecipients: 100,
  },
  outbound: {
    port: 25,
    maxAgeHours: 72,
    caFile: '',
    maxConnectionsPerHost: 10,
    maxConnections: 100,
    signingWorkers: 2,
    connectTimeoutMs: 30_000,
    greetingTimeoutMs: 30_000,
    socketTimeoutMs: 10 * 60_000,
    transactionTimeoutMs: 15 * 60_000,
    relay: { host: '', port: 587, secure: 'starttls', user: '', password: '' },
  },
  campaigns: { batchWindowSeconds: 60 },
  webhooks: { allowPrivate: false, timeoutMs: 10_000 },
};
