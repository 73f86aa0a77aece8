import { z } from 'zod';
import { parseDnsServers } from '../lib/dns/dns-client.js';

const port = z.number().int().min(0).max(65535);
const cron = z.string().min(1);

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
    inbound: z.object({ port, host: z.string().min(1) }).strict(),
    submission: z.object({ port, host: z.string().min(1) }).strict(),
    outbound: z
      .object({
        port: port.min(1),
        maxAgeHours: z.number().positive(),
        caFile: z.string(),
        maxConnectionsPerHost: z.number().int().positive(),
        maxConnections: z.number().int().positive(),
        signingWorkers: z.number().int().min(0).max(16),
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
    webhooks: z.object({ allowPrivate: z.boolean(), timeoutMs: z.number().int().min(100).max(60_000) }).strict(),
  })
  .strict();
