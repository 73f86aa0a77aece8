import { z } from 'zod';
import { parseDnsServers } from '../lib/dns/dns-client.js';

const port = z.number().int().min(0).max(65535);
const cron = z.string().min(1);
// SMTP listeners: a certificate needs its key (and the other way round).
const smtpTls = { certFile: z.string(), keyFile: z.string() };
const bothOrNeither = (v: { certFile: string; keyFile: string }) => !v.certFile === !v.keyFile;
const bothOrNeitherMessage = { message: 'certFile and keyFile must be set together (or both left empty for a self-signed pair)' };
const smtpLimits = {
  maxMessageBytes: z.number().int().min(1024),
  maxConnections: z.number().int().positive(),
  maxRecipients: z.number().int().min(1).max(1000),
};

// Strict: an unknown key in the file is a typo the user wants to hear about.
export const configSchema = z
  .object({
    dataDir: z.string().min(1),
    hostname: z.string().min(1),
    publicUrl: z.string().url().transform((u) => u.replace(/\/+$/, '')),
    secret: z.string(),
    log: z.object({ level: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']) }).strict(),
    http: z.object({ host: z.string().min(1), port, bodyLimitBytes: z.number().int().positive() }).strict(),
    rateLimit: z.object({ perSecond: z.number().int().positive() }).strict(),
    dns: z
      .object({
        servers: z.array(z.string()).transform((list, ctx) => {
          try {
            return parseDnsServers(list.join(','));
          } catch (err) {
            ctx.addIssue({ code: 'custom', message: (err as Error).message });
            return z.NEVER;
          }
        }),
        timeoutMs: z.number().int().positive(),
      })
      .strict(),
    domains: z
      .object({
        dkimSelector: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/i),
        bounceLabel: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/i),
        recheckUnverifiedCron: cron,
        recheckVerifiedCron: cron,
      })
      .strict(),
    inbound: z
      .object({
        port,
        host: z.string().min(1),
        ...smtpTls,
        complaintAddress: z.union([z.literal(''), z.string().regex(/^[^\s@<>]+@[^\s@<>]+\.[^\s@<>]+$/, 'must be an email address')]),
        ...smtpLimits,
      })
      .strict()
      .refine(bothOrNeither, bothOrNeitherMessage),
    submission: z
      .object({ port, host: z.string().min(1), ...smtpTls, ...smtpLimits })
      .strict()
      .refine(bothOrNeither, bothOrNeitherMessage),
    outbound: z
      .object({
        port: port.min(1),
        maxAgeHours: z.number().positive(),
        caFile: z.string(),
        maxConnectionsPerHost: z.number().int().positive(),
        maxConnections: z.number().int().positive(),
        signingWorkers: z.number().int().min(0).max(16),
        connectTimeoutMs: z.number().int().min(100).max(3_600_000),
        greetingTimeoutMs: z.number().int().min(100).max(3_600_000),
        socketTimeoutMs: z.number().int().min(100).max(3_600_000),
        transactionTimeoutMs: z.number().int().min(100).max(24 * 3_600_000),
        relay: z
          .object({
            host: z.string(),
            port: port.min(1),
            secure: z.enum(['implicit', 'starttls', 'none']),
            user: z.string(),
            password: z.string(),
          })
          .strict(),
      })
      .strict(),
    campaigns: z.object({ batchWindowSeconds: z.number().min(0).max(86_400) }).strict(),
    webhooks: z.object({ allowPrivate: z.boolean(), timeoutMs: z.number().int().min(100).max(60_000) }).strict(),
  })
  .strict();
