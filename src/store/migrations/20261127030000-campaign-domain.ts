import { domainToASCII } from 'node:url';
import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// The domain a campaign sends from, as emails keep theirs: a key bound to a domain sees and
// manages only its domain's campaigns, filtered in the query. Existing campaigns get the team's
// live domain their from-address names (the address was checked against it when it was set);
// null where there is none (the domain was deleted), which only unbound keys and the console see.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table campaigns add column domain_id integer`.execute(db);
  await sql`create index campaigns_team_domain on campaigns(team_id, domain_id, created_at) where deleted_at is null`.execute(db);
  const campaigns = await sql<{ id: string; team_id: number; from_addr: string }>`select id, team_id, from_addr from campaigns`.execute(db);
  if (campaigns.rows.length === 0) return;
  const domains = await sql<{ id: number; team_id: number; name: string }>`select id, team_id, name from domains where deleted_at is null`.execute(db);
  const byName = new Map(domains.rows.map((d) => [`${d.team_id} ${d.name}`, Number(d.id)]));
  for (const c of campaigns.rows) {
    const id = byName.get(`${c.team_id} ${fromDomain(c.from_addr)}`);
    if (id !== undefined) await sql`update campaigns set domain_id = ${id} where id = ${c.id}`.execute(db);
  }
}

/** The domain of a stored from: the addr-spec is the `<...>` at the end when there is one, else the whole. */
function fromDomain(from: string): string {
  const trimmed = from.trim();
  const address = trimmed.endsWith('>') ? trimmed.slice(trimmed.lastIndexOf('<') + 1, -1) : trimmed;
  const domain = address.slice(address.lastIndexOf('@') + 1).trim().replace(/\.$/, '');
  // As the domain of a send is compared (core/emails/addresses.ts asciiDomain).
  return /^[\x00-\x7f]*$/.test(domain) ? domain.toLowerCase() : domainToASCII(domain);
}
