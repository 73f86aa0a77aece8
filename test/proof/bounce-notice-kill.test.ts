import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { createTransport } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';
import { startDnsZone } from '../helpers/dns-zone.js';
import { startSmtpSink } from '../helpers/smtp-sink.js';
import { tempDir } from '../helpers/temp-dir.js';
import { dropDataDirDatabase, storeEnvOf } from '../helpers/test-app.js';
import { publishDomainRecords } from './helpers/crash-observer.js';
import { apiClient, loopbackEnv, startPosthorn, type PosthornProcess } from './helpers/posthorn-process.js';

// A submission's bounce notice, proven with a real kill: the child SIGKILLs itself on the
// email.bounced event, right after the bounce committed and before anything after the commit
// ran (kill-in-window-child.ts). The notice was queued in that same transaction, so the next
// start on the same data sends it.

const CHILD = fileURLToPath(new URL('./helpers/kill-in-window-child.js', import.meta.url));
const HOSTNAME = 'mx.posthorn-proof.test';

test('a SIGKILL right after a bounce commits loses no bounce notice: the next start sends it', async (t) => {
  t.timeout(120_000);
  const zone = await startDnsZone();
  const sink = await startSmtpSink({ hostname: 'mx.rcpt.test', starttls: false, onRcpt: (address) => ({ code: 550, message: `5.1.1 <${address}>: User unknown` }) });
  // The sender's MX: another loopback address on the same port (the outbound port is global).
  const senderMx = await startSmtpSink({ hostname: 'mx.sender.test', starttls: false, host: '127.0.0.2', port: sink.port });
  zone.set('mx.rcpt.test', 'A', ['127.0.0.1']);
  zone.set('mx.sender.test', 'A', ['127.0.0.2']);
  zone.set('kill-rcpt.example', 'MX', [{ exchange: 'mx.rcpt.test', priority: 10 }]);
  const dataDir = tempDir(t, 'posthorn-notice-kill-');
  const env = loopbackEnv({ dataDir, dnsServer: zone.server, sinkPort: sink.port, hostname: HOSTNAME }, { ...(await storeEnvOf(dataDir)), POSTHORN_SUBMISSION_BOUNCE_NOTICES: 'true' });
  let server: PosthornProcess = await startPosthorn({ script: CHILD, env: { ...env, POSTHORN_TEST_KILL_ON: 'email.bounced' }, expectKey: true });
  t.teardown(async () => {
    await server.kill();
    await Promise.all([sink.close(), senderMx.close(), zone.close()]);
    await dropDataDirDatabase(dataDir);
  });
  const key = server.key!;
  const api = apiClient(() => server, key);
  const domain = (await api('POST', '/v1/domains', { name: 'notice-kill.dev', region: 'local' })).body;
  publishDomainRecords(zone, domain);
  zone.set('notice-kill.dev', 'MX', [{ exchange: 'mx.sender.test', priority: 10 }]);
  await api('PUT', `/v1/domains/${domain.id}/verify`);
  t.is((await api('GET', `/v1/domains/${domain.id}`)).body.status, 'SUCCESS');

  const tx = createTransport({
    host: '127.0.0.1',
    port: server.smtp.submission,
    secure: false,
    requireTLS: true,
    tls: { ca: readFileSync(join(dataDir, 'tls', 'self-signed-cert.pem'), 'utf8'), servername: HOSTNAME },
    auth: { user: 'apikey', pass: key },
  } as SMTPTransport.Options);
  const info = await tx.sendMail({ from: 'hello@notice-kill.dev', to: 'nobody@kill-rcpt.example', subject: 'Killed', text: 'x', envelope: { from: 'app@notice-kill.dev', to: ['nobody@kill-rcpt.example'] } });
  tx.close();
  const emailId = /queued as (em_\S+)$/.exec(info.response)![1]!;
  t.is(await server.exited, null, 'killed by a signal');
  t.regex(server.output(), new RegExp(`killing myself on email\\.bounced of ${emailId}`));
  t.is(senderMx.messages.length, 0, 'no notice before the kill');

  server = await startPosthorn({ script: CHILD, env });
  const [notice] = await senderMx.waitForMessages(1, 30_000);
  t.deepEqual(notice!.rcptTo, ['app@notice-kill.dev']);
  t.is(notice!.mailFrom, '');
  t.regex(notice!.raw.toString('latin1'), /^Final-Recipient: rfc822; nobody@kill-rcpt\.example\r$/m);
  await server.waitForOutput(new RegExp(`bounce notice for email ${emailId} sent to app@notice-kill\\.dev`));
});
