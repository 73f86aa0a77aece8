import type { IsolationWorld, TeamData } from './isolation-world.js';

export type Snapshot = Record<string, { status: number; body: unknown }>;

/**
 * Everything a team's FULL key can read about the team: every list, every object the
 * isolation world made, with its versions, contacts, attempts, raw messages and analytics.
 * Two snapshots are compared whole, so any write that leaked through shows up.
 */
export async function snapshotTeam(x: IsolationWorld, team: TeamData): Promise<Snapshot> {
  const key = team.keys.full.token;
  const { d1, d2 } = team;
  const paths = [
    '/domains',
    '/apiKeys',
    '/emails?limit=100',
    '/templates?limit=100',
    '/campaigns?limit=100',
    '/contactBooks',
    '/segments?limit=100',
    '/suppressions?limit=100',
    '/receivedEmails?limit=100',
    '/tlsReports?limit=100',
    '/webhooks?limit=100',
    '/analytics/email-time-series',
    '/analytics/reputation-metrics',
    `/templates/${d1.templateId}`,
    `/templates/${d1.templateId}/versions`,
    `/contactBooks/${d1.bookId}/contacts/${d1.contactId}`,
    `/segments/${d1.segmentId}`,
    `/segments/${d1.segmentId}/contacts`,
    `/suppressions/${d1.suppressedEmail}`,
    `/webhooks/${d1.allWebhookId}`,
    `/webhooks/${d1.allWebhookId}/attempts?limit=100`,
  ];
  for (const ids of [d1, d2]) {
    paths.push(
      `/domains/${ids.domainId}`,
      `/emails/${ids.emailId}`,
      `/emails/${ids.scheduledEmailId}`,
      `/campaigns/${ids.campaignId}`,
      `/contactBooks/${ids.doiBookId}`,
      `/contactBooks/${ids.doiBookId}/contacts`,
      `/receivedEmails/${ids.receivedId}`,
      `/receivedEmails/${ids.receivedId}/raw`,
      `/tlsReports/${ids.tlsReportId}`,
      `/webhooks/${ids.webhookId}`,
      `/webhooks/${ids.webhookId}/attempts?limit=100`,
      `/analytics/email-time-series?domainId=${ids.domainId}`,
      `/analytics/reputation-metrics?domainId=${ids.domainId}`,
    );
  }
  paths.push(`/contactBooks/${d1.bookId}`, `/contactBooks/${d1.bookId}/contacts`);
  const out: Snapshot = {};
  for (const p of paths) {
    const res = await x.request('GET', `/v1${p}`, key);
    if (res.status !== 200) throw new Error(`snapshot GET ${p} -> ${res.status} ${JSON.stringify(res.body)}`);
    out[p] = { status: res.status, body: res.body };
  }
  return out;
}
