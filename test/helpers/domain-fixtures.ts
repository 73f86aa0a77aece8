import type { TestApp } from './test-app.js';

/** Publishes exactly the records a domain asks for into the test zone. */
export function publishRecords(t0: TestApp, domain: { dnsRecords: { type: string; name: string; value: string; priority: string | null }[] }): void {
  const byNameType = new Map<string, { type: string; name: string; values: unknown[] }>();
  for (const r of domain.dnsRecords) {
    const key = `${r.name}|${r.type}`;
    const entry = byNameType.get(key) ?? { type: r.type, name: r.name, values: [] };
    entry.values.push(r.type === 'MX' ? { exchange: r.value, priority: Number(r.priority ?? 10) } : r.value);
    byNameType.set(key, entry);
  }
  for (const e of byNameType.values()) t0.zone.set(e.name, e.type as 'TXT', e.values as string[]);
}

/** Adds a domain through the API, publishes its records and verifies it. Returns the verified domain. */
export async function addVerifiedDomain(t0: TestApp, name: string, key?: string): Promise<any> {
  const created = await t0.request('POST', '/v1/domains', { body: { name, region: 'local' }, key });
  if (created.status !== 200) throw new Error(`domain create failed: ${JSON.stringify(created.body)}`);
  publishRecords(t0, created.body);
  const verify = await t0.request('PUT', `/v1/domains/${created.body.id}/verify`, { key });
  if (verify.status !== 200) throw new Error(`verify failed: ${JSON.stringify(verify.body)}`);
  const got = await t0.request('GET', `/v1/domains/${created.body.id}`, { key });
  if (got.body.status !== 'SUCCESS') throw new Error(`domain not verified: ${JSON.stringify(got.body)}`);
  return got.body;
}

/** Takes a domain's DKIM record out of the zone (its name passed to another team, who took it down). */
export function removeDkimRecord(t0: TestApp, domain: { dnsRecords: { name: string }[] }): void {
  const dkim = domain.dnsRecords.find((r) => r.name.includes('._domainkey.'));
  if (!dkim) throw new Error('the domain has no DKIM record');
  t0.zone.remove(dkim.name, 'TXT');
}
