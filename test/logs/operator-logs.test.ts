import test from 'ava';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { ManualClock } from '../../src/lib/clock.js';
import type { Logger } from '../../src/lib/logger.js';
import { createDomainsRepository } from '../../src/store/repositories/domains-repository.js';
import { repositoriesOf } from '../helpers/repositories.js';
import { startMailWorld, sendBody } from '../helpers/mail-world.js';
import { startTestApp } from '../helpers/test-app.js';
import { startOrReport } from '../../src/smtp/smtp-listener.js';
import { startWebhookReceiver } from '../webhooks/webhook-receiver.js';

// The log an operator reads (docs/operations.md, Logs): after a small workload, one JSON line
// per accepted email, per recipient's outcome, per domain check, per failed webhook call and
// per rate-limited key, with stable field names; and no key, password or secret in any line.

interface Capture {
  logger: Logger;
  lines: string[];
  entries(): any[];
  events(name: string): any[];
}

function capture(): Capture {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  const logger = pino({ level: 'info', base: { service: 'posthorn' }, timestamp: pino.stdTimeFunctions.isoTime }, stream);
  const entries = () => lines.map((l) => JSON.parse(l));
  return { logger, lines, entries, events: (name) => entries().filter((e) => e.event === name) };
}

test('a small workload logs every send, outcome, domain check, webhook failure and rate-limited key, and nothing secret', async (t) => {
  const log = capture();
  const clock = new ManualClock(Date.UTC(2026, 10, 26, 9, 0, 0));
  const receiver = await startWebhookReceiver();
  receiver.reply(() => ({ status: 500, body: 'down for maintenance' }));
  const w = await startMailWorld({
    clock,
    logger: log.logger,
    overrides: {
      secret: 'link-secret-value-0123456789',
      webhooks: { allowPrivate: true },
      outbound: { relay: { password: 'relay-password-0123456789' } },
    },
  });
  try {
    const app = w.t0.app;
    const hook = (await w.t0.request('POST', '/v1/webhooks', { body: { url: `${receiver.url}?token=url-token-0123456789`, eventTypes: ['email.delivered'] } })).body;
    w.sink.setBehaviour({
      onRcpt: (a) => (a === 'ghost@example.net' ? { code: 550, message: '5.1.1 <ghost@example.net>: user unknown' } : a === 'slow@example.net' ? { code: 451, message: '4.7.1 greylisted, try again later' } : undefined),
    });
    await w.t0.request('POST', '/v1/suppressions', { body: { email: 'blocked@example.net' } });
    const send = async (to: string | string[]) => (await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to }) })).body.emailId as string;
    const delivered = await send(['alice@example.net', 'bob@example.org']);
    const bounced = await send('ghost@example.net');
    const deferred = await send('slow@example.net');
    const nowhere = await send('x@no-such-domain.example');
    const suppressed = await send('blocked@example.net');
    await w.settle();
    // An operator gives up on the deferred one: FAILED.
    const [row] = await repositoriesOf(app).deliveries.listForEmail(deferred);
    await app.services.deliveries.purge(row!.id);
    await w.t0.request('PUT', `/v1/domains/${w.domain.id}/verify`);
    await app.webhookDispatcher.whenIdle();
    // A team limited to 2 requests a second (the clock stands still): 3 over the limit from one
    // key, 1 from another, one line each.
    const team = await app.services.teams.create('Limited');
    await app.services.teams.setRateLimit(team, 2);
    const k1 = (await app.services.apiKeys.create(team, { name: 'one', permission: 'FULL' })).token;
    const k2 = (await app.services.apiKeys.create(team, { name: 'two', permission: 'FULL' })).token;
    const statuses: number[] = [];
    for (const key of [k1, k1, k1, k1, k1, k2]) statuses.push((await w.t0.request('GET', '/v1/domains', { key })).status);
    t.deepEqual(statuses, [200, 200, 429, 429, 429, 429]);

    const entries = log.entries();
    for (const e of entries) {
      t.is(e.service, 'posthorn');
      t.is(typeof e.level, 'number');
      t.regex(e.time, /^\d{4}-\d\d-\d\dT/);
      t.is(typeof e.msg, 'string');
    }

    // One line per accepted email.
    const accepted = log.events('email.accepted');
    t.deepEqual(accepted.map((e) => e.emailId), [delivered, bounced, deferred, nowhere, suppressed]);
    t.like(accepted[0], { teamId: w.t0.teamId, domainId: w.domain.id, status: 'QUEUED', recipients: 2 });
    t.like(accepted[4], { status: 'SUPPRESSED', recipients: 0 });

    // One line per recipient's outcome.
    const outcome = (event: string, emailId: string) => log.events(event).filter((e) => e.emailId === emailId);
    t.deepEqual(outcome('delivery.delivered', delivered).map((e) => e.recipient).sort(), ['alice@example.net', 'bob@example.org']);
    t.like(outcome('delivery.delivered', delivered)[0], { teamId: w.t0.teamId, attempt: 1, mxHost: 'mx.sink.test', smtpCode: 250 });
    t.like(outcome('delivery.bounced', bounced)[0], { recipient: 'ghost@example.net', smtpCode: 550, hardBounce: true, mxHost: 'mx.sink.test' });
    t.regex(outcome('delivery.bounced', bounced)[0].response, /user unknown/);
    t.like(outcome('delivery.deferred', deferred)[0], { recipient: 'slow@example.net', smtpCode: 451, attempt: 1 });
    t.regex(outcome('delivery.deferred', deferred)[0].response, /greylisted/);
    t.truthy(outcome('delivery.deferred', deferred)[0].nextAttemptAt);
    t.like(outcome('delivery.failed', deferred)[0], { recipient: 'slow@example.net', reason: 'purged by an operator' });
    t.like(outcome('delivery.bounced', nowhere)[0], { recipient: 'x@no-such-domain.example', hardBounce: true, mxHost: null });

    // The domain check.
    t.like(log.events('domain.verification').at(-1), { domainId: w.domain.id, domain: w.domain.name, status: 'SUCCESS', previousStatus: 'SUCCESS', records: { dkim: 'SUCCESS', spf: 'SUCCESS', mx: 'SUCCESS' } });

    // The webhook calls that failed (host only, never the URL with its token).
    const failedCalls = log.events('webhook.failed');
    t.true(failedCalls.length >= 1);
    t.like(failedCalls[0], { webhookId: hook.id, eventType: 'email.delivered', attempt: 1, httpStatus: 500, host: `127.0.0.1:${receiver.port}` });
    t.truthy(failedCalls[0].nextAttemptAt);

    // One line per rate-limited key and window.
    const limited = log.events('rate_limited');
    t.is(limited.length, 2);
    t.deepEqual(new Set(limited.map((e) => e.teamId)), new Set([team]));
    t.is(new Set(limited.map((e) => e.apiKeyId)).size, 2);
    t.like(limited[0], { limit: 2 });

    // Nothing secret in any line.
    const domainRow = await createDomainsRepository(app.store.db).findByIdAnyTeam(w.domain.id);
    const pemBody = domainRow!.dkimPrivateKey.split('\n').filter((l) => !l.startsWith('-----')).join('');
    const secrets: [string, string][] = [
      ['the FULL key', w.t0.key],
      ["a limited team's key", k1],
      ["another limited team's key", k2],
      // ph_<id>_<secret>: the secret is everything after the second underscore (it may hold underscores itself).
      ['the secret part of a key', k1.split('_').slice(2).join('_')],
      ['the link secret', app.secret],
      ['the relay password', 'relay-password-0123456789'],
      ['the webhook signing secret', hook.secret],
      ['the token in the webhook URL', 'url-token-0123456789'],
      ['the DKIM private key', pemBody.slice(0, 64)],
    ];
    const all = log.lines.join('\n');
    for (const [what, value] of secrets) t.false(all.includes(value), `${what} appears in the log`);
    t.true(log.lines.length > 15, `${log.lines.length} lines`);
  } finally {
    await w.close();
    await receiver.close();
  }
});

test('start announces sandbox mode and records that point at localhost; adding a domain warns again', async (t) => {
  const log = capture();
  const t0 = await startTestApp({ logger: log.logger, overrides: { sandbox: true, hostname: 'localhost' } });
  try {
    const start = log.entries();
    t.like(start.find((e) => e.event === 'sandbox'), { level: 40, sandbox: true });
    t.regex(start.find((e) => e.event === 'sandbox').msg, /SANDBOX MODE/);
    t.like(start.find((e) => e.event === 'config.hostname'), { level: 40, hostname: 'localhost' });
    t.regex(start.find((e) => e.event === 'config.hostname').msg, /POSTHORN_HOSTNAME/);
    const created = await t0.request('POST', '/v1/domains', { body: { name: 'try-it.dev', region: 'local' } });
    t.is(created.status, 200);
    t.like(log.events('domain.localhost_records')[0], { level: 40, domainId: created.body.id, domain: 'try-it.dev', hostname: 'localhost' });
    // Listener lines name only the listeners that listen.
    t.deepEqual(
      start.filter((e) => e.listener).map((e) => e.listener),
      ['http', 'inbound', 'submission'],
    );
  } finally {
    await t0.close();
  }
});

test('with a real host name there is no localhost warning', async (t) => {
  const log = capture();
  const t0 = await startTestApp({ logger: log.logger });
  try {
    await t0.request('POST', '/v1/domains', { body: { name: 'real-name.dev', region: 'local' } });
    t.deepEqual(log.events('config.hostname'), []);
    t.deepEqual(log.events('domain.localhost_records'), []);
    t.deepEqual(log.events('sandbox'), []);
  } finally {
    await t0.close();
  }
});

test('an egress source on an address this host does not have is warned about at start; a loopback one is not', async (t) => {
  const log = capture();
  const sources = [
    { name: 'elsewhere', localAddress: '198.51.100.7', ehloName: 'mta.example.com' },
    { name: 'loop', localAddress: '127.0.0.2', ehloName: 'loop.example.com' },
  ];
  const t0 = await startTestApp({ logger: log.logger, overrides: { outbound: { sources } as never } });
  try {
    const warned = log.entries().filter((e) => e.event === 'config.outbound.sources');
    t.is(warned.length, 1);
    t.like(warned[0], { level: 40, source: 'elsewhere', localAddress: '198.51.100.7' });
    t.regex(warned[0].msg, /not an address of this host/);
  } finally {
    await t0.close();
  }
});

test('a listener that cannot bind gets its error line and no start line; the line says what to change for that cause', async (t) => {
  const { createServer } = await import('node:net');
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  const port = (taken.address() as { port: number }).port;
  const log = capture();
  const t0 = await startTestApp({ logger: log.logger, overrides: { inbound: { port } } });
  try {
    const entries = log.entries();
    const failed = entries.find((e) => e.listener === 'inbound');
    t.like(failed, { level: 50, code: 'EADDRINUSE', port });
    // A port in use (a local Postfix on 25) is not a missing privilege: the line names the cause
    // and the variable to set, as the HTTP API's does.
    t.regex(failed.msg, /another process is listening there.*inbound\.port \(POSTHORN_INBOUND_PORT\)/);
    t.notRegex(failed.msg, /CAP_NET_BIND_SERVICE/);
    t.false(entries.some((e) => /inbound SMTP listening/.test(e.msg)));
    t.false(entries.some((e) => e.msg === 'SMTP listeners started'));
    t.true(entries.some((e) => e.listener === 'submission' && /submission SMTP listening/.test(e.msg)));
  } finally {
    await t0.close();
    await new Promise((resolve) => taken.close(resolve));
  }
});

test('an SMTP port this user may not bind (25 as an ordinary user) says to grant the capability or set a higher port', async (t) => {
  const log = capture();
  const denied = Object.assign(new Error('listen EACCES: permission denied 0.0.0.0:587'), { code: 'EACCES' });
  t.is(await startOrReport('submission', { host: '0.0.0.0', port: 587 }, log.logger, () => Promise.reject(denied)), undefined);
  const [line] = log.entries();
  t.like(line, { level: 50, listener: 'submission', code: 'EACCES', port: 587 });
  t.regex(line.msg, /CAP_NET_BIND_SERVICE.*submission\.port \(POSTHORN_SUBMISSION_PORT\) to a port above 1023/);
});
