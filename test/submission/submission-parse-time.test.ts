import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { createTransport } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';
import type { ApiKeyService, AuthContext } from '../../src/core/api-keys/api-key-service.js';
import type { EmailService } from '../../src/core/emails/email-service.js';
import type { RateLimiter } from '../../src/core/rate-limit/rate-limiter.js';
import { BodyIntake } from '../../src/lib/body-intake.js';
import { systemClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/lib/logger.js';
import { startSubmissionServer } from '../../src/smtp/submission/submission-server.js';
import { testCert } from '../helpers/test-keys.js';

// A message that takes the parser longer than its time is not a bad message: the process was
// busy. Submission answers 451 so the client sends it again, never a 5xx that loses it for good.
// The listener is started on its own, with a parse time of 1 ms that any real message outlasts.

const AUTH: AuthContext = { teamId: 1, keyId: 1, permission: 'FULL', domainId: null, teamRateLimit: null } as AuthContext;

test('a message that takes longer than the parse time is answered 451 (try again), not refused with 550', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'posthorn-parse-time-'));
  let submitted = 0;
  const listener = await startSubmissionServer({
    intake: BodyIntake.open(dataDir, 64 * 1024 * 1024),
    host: '127.0.0.1',
    port: 0,
    hostname: 'mx.posthorn.test',
    tls: await testCert({ hostnames: ['mx.posthorn.test'] }),
    maxMessageBytes: 30 * 1024 * 1024,
    maxConnections: 10,
    maxConnectionsPerIp: 0,
    exemptNetworks: [],
    maxRecipients: 100,
    logger: createLogger('silent'),
    clock: systemClock,
    authFailureLimit: 0,
    authFailureWindow: '15m',
    apiKeys: { authenticate: async () => AUTH } as unknown as ApiKeyService,
    rateLimiter: { consume: async () => ({ allowed: true }) } as unknown as RateLimiter,
    emails: {
      submit: async () => {
        submitted++;
        return { emailId: 'em_x' };
      },
    } as unknown as EmailService,
    defaultRateLimit: 100,
    parseTimeoutMs: 1,
  });
  const tx = createTransport({
    host: '127.0.0.1',
    port: listener.port,
    requireTLS: true,
    tls: { rejectUnauthorized: false },
    auth: { user: 'apikey', pass: 'ph_000000000000_anyKeyTheStubTakes000' },
  } as SMTPTransport.Options);
  try {
    const err = await tx
      .sendMail({
        from: 'hello@sender.dev',
        to: 'a@example.net',
        subject: 's',
        text: 'a line of text\n'.repeat(200_000),
        attachments: Array.from({ length: 5 }, (_, i) => ({ filename: `f${i}.bin`, content: Buffer.alloc(200_000, i) })),
      })
      .then(
        () => undefined,
        (e: { responseCode?: number; response?: string }) => e,
      );
    t.is(err?.responseCode, 451, err?.response);
    t.regex(err?.response ?? '', /^451 4\.3\.0 /);
    t.is(submitted, 0);
  } finally {
    tx.close();
    await listener.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
