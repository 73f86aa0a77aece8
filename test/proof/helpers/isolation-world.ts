import { randomString } from '../../../src/lib/ids.js';
import { ManualClock } from '../../../src/lib/clock.js';
import { WEBHOOK_EVENT_TYPES } from '../../../src/core/webhooks/webhook-endpoints-service.js';
import { addVerifiedDomain } from '../../helpers/domain-fixtures.js';
import { startMailWorld, type MailWorld } from '../../helpers/mail-world.js';
import type { TestResponse } from '../../helpers/test-app.js';
import { smtpSend } from '../../inbound/helpers/smtp-client.js';
import { sampleTlsReport, signedTlsReportMail } from '../../helpers/tls-report-mail.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../webhooks/webhook-receiver.js';

// Two teams with data in every resource, built through the API the way a customer would:
// "acme" (team A, the victim) and "bolt" (team B, the attacker). Each team has two verified,
// receiving domains; resources tied to a domain exist once per domain, so a key bound to the
// first domain can be tried against the second. Every name and address carries the team's
// word, so a leak shows up as text.

export interface Key {
  id: number;
  token: string;
}

/** The ids a probe may aim at: one domain's resources plus the team-wide ones. */
export interface Ids {
  teamId: number;
  domainId: number;
  domainName: string;
  /** A delivered email from this domain. */
  emailId: string;
  /** An email from this domain scheduled in the future. */
  scheduledEmailId: string;
  /** Mail received for this domain. */
  receivedId: string;
  /** A TLS report (RFC 8460) received for this domain. */
  tlsReportId: string;
  /** A webhook restricted to this domain. */
  webhookId: string;
  /** A campaign from this domain (domain 1: a draft; domain 2: running). */
  campaignId: string;
  /** A FULL key bound to this domain. */
  keyId: number;
  /** A contact book whose double opt-in confirmation is sent from this domain. */
  doiBookId: string;
  // team-wide
  templateId: string;
  bookId: string;
  contactId: string;
  contactEmail: string;
  segmentId: string;
  suppressedEmail: string;
  allWebhookId: string;
  fullKeyId: number;
  sendingKeyId: number;
}

export interface TeamData {
  word: string;
  teamId: number;
  keys: { full: Key; sending: Key; d1: Key; d2: Key };
  d1: Ids;
  d2: Ids;
  /** Idempotency-Keys this team has used on POST /emails and on POST /emails/batch, and the emails they made. */
  idempotency: { key: string; emailId: string; batchKey: string; batchEmailId: string };
  /** Text that must never reach the other team: the word, every string id, secrets, DKIM keys. */
  markers: string[];
  /** Text that must never reach the key bound to domain 1: what belongs to domain 2 only. */
  d2Markers: string[];
  /** Domain-2 ids and team-wide webhooks a key bound to domain 1 must not see. */
  d2DomainIds: number[];
}

export interface IsolationWorld {
  w: MailWorld;
  clock: ManualClock;
  receiver: WebhookReceiver;
  a: TeamData;
  b: TeamData;
  /** Ids of the same shape as a team's that exist nowhere. */
  ghost: Ids;
  /** A FULL key of team A that was revoked before any probe. */
  revokedKey: string;
  request(method: string, path: string, key: string | null, body?: unknown, headers?: Record<string, string>): Promise<TestResponse>;
  /** Delivers everything due, runs webhook calls, flushes analytics. */
  settle(): Promise<void>;
  close(): Promise<void>;
}

const doc = (text: string) => JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text }] }] });
export const WEBHOOK_PATH = (name: string) => `/${name}-hook`;

function ghostLike(id: string): string {
  const cut = id.indexOf('_') + 1;
  return id.slice(0, cut) + randomString(id.length - cut);
}

export async function buildIsolationWorld(): Promise<IsolationWorld> {
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 10, 0, 0));
  const receiver = await startWebhookReceiver();
  const w = await startMailWorld({
    clock,
    domain: 'acme-mail.dev',
    overrides: {
      // The manual clock never leaves its first second: no window reset, so no low limit.
      rateLimit: { perSecond: 1_000_000 },
      webhooks: { allowPrivate: true },
      campaigns: { batchWindowSeconds: 60 },
      // No cron re-check may touch a domain between two snapshots.
      domains: { recheckUnverifiedCron: '0 0 1 1 *', recheckVerifiedCron: '0 0 1 1 *' },
    },
  });
  const app = () => w.t0.app;

  async function request(method: string, path: string, key: string | null, body?: unknown, headers?: Record<string, string>) {
    return w.t0.request(method, path, { key, body, headers });
  }
  async function must(key: string, method: string, path: string, body?: unknown): Promise<any> {
    const res = await request(method, path, key, body);
    if (res.status !== 200) throw new Error(`${method} ${path} -> ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }
  async function settle() {
    w.t0.app.engine.wake();
    await w.t0.app.engine.whenIdle();
    await app().webhookDispatcher.whenIdle();
  }

  // Team A is the mail world's team; team B is made the way the CLI makes one.
  const teamA = w.t0.teamId;
  const teamB = await app().services.teams.create('bolt team');
  const fullA = await app().services.apiKeys.create(teamA, { name: 'acme-full', permission: 'FULL' });
  const fullB = await app().services.apiKeys.create(teamB, { name: 'bolt-full', permission: 'FULL' });

  async function populate(word: string, teamId: number, full: Key, d1Given?: any, extraDelivered = 0): Promise<TeamData> {
    const k = full.token;
    const d1 = d1Given ?? (await addVerifiedDomain(w.t0, `${word}-mail.dev`, k));
    const d2 = await addVerifiedDomain(w.t0, `${word}-other.dev`, k);
    for (const d of [d1, d2]) await must(k, 'PATCH', `/v1/domains/${d.id}`, { receiving: true });

    const sending = await must(k, 'POST', '/v1/apiKeys', { name: `${word}-sending-key`, permission: 'SENDING' });
    const keyD1 = await must(k, 'POST', '/v1/apiKeys', { name: `${word}-mail-key`, permission: 'FULL', domainId: d1.id });
    const keyD2 = await must(k, 'POST', '/v1/apiKeys', { name: `${word}-other-key`, permission: 'FULL', domainId: d2.id });

    // A template with two published versions.
    const tpl = await must(k, 'POST', '/v1/templates', { name: `${word} template`, subject: `${word} subject {{name}}`, content: doc(`${word} body v1`) });
    await must(k, 'POST', `/v1/templates/${tpl.id}/publish`);
    await must(k, 'PATCH', `/v1/templates/${tpl.id}`, { content: doc(`${word} body v2`) });
    await must(k, 'POST', `/v1/templates/${tpl.id}/publish`);

    const book = await must(k, 'POST', '/v1/contactBooks', { name: `${word} book`, properties: { team: word }, variables: ['plan'] });
    const c1 = await must(k, 'POST', `/v1/contactBooks/${book.id}/contacts`, { email: `${word}-c1@example.net`, firstName: `${word}First`, properties: { plan: `${word}-plan` } });
    await must(k, 'POST', `/v1/contactBooks/${book.id}/contacts`, { email: `${word}-c2@example.net`, lastName: `${word}Last` });
    const doi1 = await must(k, 'POST', '/v1/contactBooks', { name: `${word} doi mail`, doubleOptInEnabled: true, doubleOptInFrom: `Confirm <confirm@${d1.name}>` });
    const doi2 = await must(k, 'POST', '/v1/contactBooks', { name: `${word} doi other`, doubleOptInEnabled: true, doubleOptInFrom: `Confirm <confirm@${d2.name}>` });
    const segment = await must(k, 'POST', '/v1/segments', {
      name: `${word} segment`,
      contactBookId: book.id,
      filters: { match: 'all', conditions: [{ field: 'email', op: 'contains', value: word }] },
    });
    const suppressedEmail = `${word}-suppressed@example.net`;
    await must(k, 'POST', '/v1/suppressions', { email: suppressedEmail, reason: 'MANUAL', source: `${word}-suppression-source` });

    const hook = (name: string) => `http://127.0.0.1:${receiver.port}${WEBHOOK_PATH(name)}`;
    const whAll = await must(k, 'POST', '/v1/webhooks', { url: hook(`${word}-all`), eventTypes: [...WEBHOOK_EVENT_TYPES], description: `${word} all domains` });
    const whD1 = await must(k, 'POST', '/v1/webhooks', { url: hook(`${word}-mail`), eventTypes: [...WEBHOOK_EVENT_TYPES], description: `${word} mail domain`, domainIds: [d1.id] });
    const whD2 = await must(k, 'POST', '/v1/webhooks', { url: hook(`${word}-other`), eventTypes: [...WEBHOOK_EVENT_TYPES], description: `${word}-other domain`, domainIds: [d2.id] });

    const later = new Date(clock.nowMs() + 2 * 86_400_000).toISOString();
    const emails: Record<string, { delivered: string; scheduled: string }> = {};
    for (const [label, d] of [['mail', d1], ['other', d2]] as const) {
      const send = (extra: Record<string, unknown>) =>
        must(k, 'POST', '/v1/emails', { from: `${word} <news@${d.name}>`, to: `${word}-rcpt@example.net`, text: `${word} text`, tags: [`${word}-tag`], ...extra });
      const delivered = (await send({ subject: `${word}-${label} delivered` })).emailId;
      const scheduled = (await send({ subject: `${word}-${label} scheduled`, scheduledAt: later })).emailId;
      emails[label] = { delivered, scheduled };
    }
    const idemKey = `${word}-idempotency-${randomString(8)}`;
    const idem = await w.t0.request('POST', '/v1/emails', {
      key: k,
      headers: { 'idempotency-key': idemKey },
      body: { from: `news@${d1.name}`, to: `${word}-idem@example.net`, subject: `${word} idempotent`, text: 'once' },
    });
    if (idem.status !== 200) throw new Error(JSON.stringify(idem.body));
    const batchKey = `${word}-idempotency-batch-${randomString(8)}`;
    const idemBatch = await w.t0.request('POST', '/v1/emails/batch', {
      key: k,
      headers: { 'idempotency-key': batchKey },
      body: [{ from: `news@${d1.name}`, to: `${word}-idem@example.net`, subject: `${word} idempotent batch`, text: 'once' }],
    });
    if (idemBatch.status !== 200) throw new Error(JSON.stringify(idemBatch.body));
    for (let i = 0; i < extraDelivered; i++) {
      await must(k, 'POST', '/v1/emails', { from: `news@${d1.name}`, to: `${word}-extra${i}@example.org`, subject: `${word} extra ${i}`, templateId: tpl.id, variables: { name: word } });
    }

    const draft = await must(k, 'POST', '/v1/campaigns', { name: `${word} campaign`, from: `news@${d1.name}`, subject: `${word} campaign subject`, contactBookId: book.id, content: doc(`${word} campaign body`) });
    // Running: one contact per batch window, and the manual clock never reaches the second window.
    const running = await must(k, 'POST', '/v1/campaigns', {
      name: `${word}-other campaign`,
      from: `news@${d2.name}`,
      subject: `${word}-other campaign subject`,
      contactBookId: book.id,
      segmentId: segment.id,
      content: doc(`${word}-other campaign body`),
      sendNow: true,
      batchSize: 1,
    });

    const received: Record<string, string> = {};
    for (const [label, d] of [['mail', d1], ['other', d2]] as const) {
      const raw = [`From: someone@example.org`, `To: ${word}-inbox@${d.name}`, `Subject: ${word}-${label} received`, `Message-ID: <${word}-${label}@example.org>`, '', `${word}-${label} received body`, ''].join('\r\n');
      const res = await smtpSend({ port: app().listeners.inbound!.port, from: 'someone@example.org', to: [`${word}-inbox@${d.name}`], raw });
      if (!res.ok) throw new Error(`inbound refused: ${res.response}`);
      const id = /queued as (re_\S+)/.exec(res.response)?.[1];
      if (!id) throw new Error(`no received id in ${res.response}`);
      received[label] = id;
      const to = `tlsrpt+${d.id}@mx.posthorn.test`;
      const report = sampleTlsReport(d.name, { organization: `${word}-${label} reporter`, reportId: `${word}-${label}-report-${randomString(8)}` });
      const tls = await smtpSend({ port: app().listeners.inbound!.port, from: 'reporter@example.org', to: [to], raw: await signedTlsReportMail(w.zone, to, report) });
      const tlsId = /queued as (tlsr_\S+)/.exec(tls.response)?.[1];
      if (!tls.ok || !tlsId) throw new Error(`TLS report refused: ${tls.response}`);
      received[`${label}-tls`] = tlsId;
    }

    const team = {
      teamId,
      templateId: tpl.id as string,
      bookId: book.id as string,
      contactId: c1.contactId as string,
      contactEmail: `${word}-c1@example.net`,
      segmentId: segment.id as string,
      suppressedEmail,
      allWebhookId: whAll.id as string,
      fullKeyId: full.id,
      sendingKeyId: sending.id as number,
    };
    const ids1: Ids = {
      ...team,
      domainId: d1.id,
      domainName: d1.name,
      emailId: emails.mail!.delivered,
      scheduledEmailId: emails.mail!.scheduled,
      receivedId: received.mail!,
      tlsReportId: received['mail-tls']!,
      webhookId: whD1.id,
      campaignId: draft.id,
      keyId: keyD1.id,
      doiBookId: doi1.id,
    };
    const ids2: Ids = {
      ...team,
      domainId: d2.id,
      domainName: d2.name,
      emailId: emails.other!.delivered,
      scheduledEmailId: emails.other!.scheduled,
      receivedId: received.other!,
      tlsReportId: received['other-tls']!,
      webhookId: whD2.id,
      campaignId: running.id,
      keyId: keyD2.id,
      doiBookId: doi2.id,
    };
    const stringIds = (ids: Ids) => Object.values(ids).filter((v): v is string => typeof v === 'string');
    const secrets = [full.token, sending.token, keyD1.token, keyD2.token, whAll.secret, whD1.secret, whD2.secret].map(String);
    return {
      word,
      teamId,
      keys: { full, sending: { id: sending.id, token: sending.token }, d1: { id: keyD1.id, token: keyD1.token }, d2: { id: keyD2.id, token: keyD2.token } },
      d1: ids1,
      d2: ids2,
      idempotency: { key: idemKey, emailId: idem.body.emailId, batchKey, batchEmailId: idemBatch.body.data[0].emailId },
      // Key secrets also on their own (ph_<public id>_<secret>); nothing short enough to match by chance.
      markers: [...new Set([word, ...stringIds(ids1), ...stringIds(ids2), idem.body.emailId, idemBatch.body.data[0].emailId, ...secrets, ...secrets.filter((s) => s.startsWith('ph_')).map((s) => s.split('_').slice(2).join('_')), d1.publicKey, d2.publicKey])].filter(
        (m) => m === word || m.length >= 12,
      ),
      d2Markers: [`${word}-other`, ids2.emailId, ids2.scheduledEmailId, ids2.receivedId, ids2.tlsReportId, ids2.webhookId, ids2.allWebhookId, `${word}-all-hook`, d2.publicKey, keyD2.token],
      d2DomainIds: [d2.id],
    };
  }

  const a = await populate('acme', teamA, { id: fullA.id, token: fullA.token }, w.domain, 2);
  const b = await populate('bolt', teamB, { id: fullB.id, token: fullB.token });

  // A key of A's that is revoked before anything else happens.
  const revoked = await must(a.keys.full.token, 'POST', '/v1/apiKeys', { name: 'acme-revoked-key', permission: 'FULL' });
  await must(a.keys.full.token, 'DELETE', `/v1/apiKeys/${revoked.id}`);

  // First batch of each running campaign, then everything delivered and announced.
  await app().runCampaigns();
  await settle();
  for (const t of [a, b]) {
    for (const ids of [t.d1, t.d2]) {
      const e = await must(t.keys.full.token, 'GET', `/v1/emails/${ids.emailId}`);
      if (e.latestStatus !== 'DELIVERED') throw new Error(`${ids.emailId} is ${e.latestStatus}`);
    }
    const c = await must(t.keys.full.token, 'GET', `/v1/campaigns/${t.d2.campaignId}`);
    if (c.status !== 'RUNNING') throw new Error(`campaign ${c.id} is ${c.status}`);
    // Every key used once, so lastUsed no longer moves (it is written at most once a minute).
    for (const key of [t.keys.sending, t.keys.d1, t.keys.d2]) await must(key.token, 'GET', '/v1/emails?limit=1');
  }
  await settle();

  const g = (ids: Ids): Ids => ({
    teamId: 0,
    domainId: 2_000_000_001,
    domainName: 'ghost-mail.dev',
    emailId: ghostLike(ids.emailId),
    scheduledEmailId: ghostLike(ids.scheduledEmailId),
    receivedId: ghostLike(ids.receivedId),
    tlsReportId: ghostLike(ids.tlsReportId),
    webhookId: ghostLike(ids.webhookId),
    campaignId: ghostLike(ids.campaignId),
    keyId: 2_000_000_002,
    doiBookId: ghostLike(ids.doiBookId),
    templateId: ghostLike(ids.templateId),
    bookId: ghostLike(ids.bookId),
    contactId: ghostLike(ids.contactId),
    contactEmail: 'ghost-c1@example.net',
    segmentId: ghostLike(ids.segmentId),
    suppressedEmail: 'ghost-suppressed@example.net',
    allWebhookId: ghostLike(ids.allWebhookId),
    fullKeyId: 2_000_000_003,
    sendingKeyId: 2_000_000_004,
  });

  return {
    w,
    clock,
    receiver,
    a,
    b,
    ghost: g(a.d1),
    revokedKey: revoked.token,
    request,
    settle,
    async close() {
      await w.close();
      await receiver.close();
    },
  };
}
