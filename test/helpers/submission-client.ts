import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createTransport } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';
import type { TestApp } from './test-app.js';

/**
 * A mail client on the app's submission port (RFC 6409), as an app that only speaks SMTP would
 * be set up: STARTTLS required, trusting the app's self-signed pair, an API key as the password.
 */
export function submissionTransport(t0: TestApp, pass: string = t0.key) {
  const ca = readFileSync(join(t0.dataDir, 'tls', 'self-signed-cert.pem'), 'utf8');
  return createTransport({
    host: '127.0.0.1',
    port: t0.app.listeners.submission!.port,
    secure: false,
    requireTLS: true,
    tls: { ca, servername: 'mx.posthorn.test' },
    auth: { user: 'apikey', pass },
  } as SMTPTransport.Options);
}
