import { sql, type Kysely } from 'kysely';
import { addressWithDomainKey, domainKey } from './address-key-2026-11-29.js';

// Frozen: never edit a migration that has shipped; add a new one.
// Since 2026-11-25 a recipient's domain is kept in A-labels ("xn--bcher-kva.example"), and every
// match by destination compares that form: the delivery claim's suspensions and shaping, the
// operator's queue (summary, messages, suspend, retry, bounce) and the grouping of recipients
// into one transaction. A delivery queued before then and still waiting holds the domain in
// Unicode (only lowercased) in rcpt_domain and in its recipient: an operator's suspension of the
// A-label name did not hold it, shaping state made from it (replies' holds, warm-up usage,
// rates), the MTA-STS policy cached for it and its TLS counts were keyed apart, and its RCPT TO
// named the Unicode domain, which a server without SMTPUTF8 never got (refused locally, 553 5.6.7).
//
// Keyed here as a row stored now is:
// - deliveries still queued: rcpt_domain and the recipient's domain (a non-ASCII local part
//   stays as it is). Final rows stay as they were sent: a DSN's return-path tag is made from the
//   rcpt_domain of the transaction (core/received), and they match no suspension or shaping.
// - shaping_holds: the rollup (a hold keeps its id, kind and time).
// - warmup_usage: under the A-label rollup; usage under both keys on one day is added up.
// - shaping_rates: under the A-label rollup; of two, the later theoretical arrival time stays
//   (never faster than either allowed).
// - mta_sts_policies: renamed; a policy already cached under the A-label stays (what lookups
//   found since) and the other is dropped (a cache: fetched again when it is wanted).
// - tls_session_counts not yet reported: under the A-label policy domain, counts of one key
//   added up, so a day makes one TLS report for the domain. A day whose A-label report is made
//   already keeps them as they are (moved, they would never be reported). Reports made stay.
// Queue suspensions need nothing: their destination has been ASCII-only since they exist.
// Rows that need it hold a non-ASCII character (characters and bytes differ); a run again finds none.

const BATCH = 500;

interface Delivery {
  id: number;
  recipient: string;
  rcpt_domain: string;
}

/** Queued deliveries in batches by id (one pass over the table, a bounded read each time). */
async function keyDeliveries(db: Kysely<unknown>): Promise<void> {
  let after = 0;
  for (;;) {
    const rows = (
      await sql<Delivery>`select id, recipient, rcpt_domain from deliveries
        where id > ${after} and state = 'queued' and length(rcpt_domain) <> octet_length(rcpt_domain) order by id limit ${BATCH}`.execute(db)
    ).rows;
    for (const row of rows) {
      const domain = domainKey(row.rcpt_domain);
      const recipient = addressWithDomainKey(row.recipient);
      if (domain === row.rcpt_domain && recipient === row.recipient) continue;
      await sql`update deliveries set rcpt_domain = ${domain}, recipient = ${recipient} where id = ${row.id} and state = 'queued'`.execute(db);
    }
    if (rows.length < BATCH) return;
    after = Number(rows[rows.length - 1]!.id);
  }
}

async function nonAscii<T>(db: Kysely<unknown>, table: string, columns: string, key: string): Promise<T[]> {
  return (await sql<T>`select ${sql.raw(columns)} from ${sql.table(table)} where length(${sql.ref(key)}) <> octet_length(${sql.ref(key)})`.execute(db)).rows;
}

async function keyHolds(db: Kysely<unknown>): Promise<void> {
  for (const h of await nonAscii<{ id: string; rollup: string }>(db, 'shaping_holds', 'id, rollup', 'rollup')) {
    const rollup = domainKey(h.rollup);
    if (rollup !== h.rollup) await sql`update shaping_holds set rollup = ${rollup} where id = ${h.id}`.execute(db);
  }
}

async function keyWarmup(db: Kysely<unknown>): Promise<void> {
  for (const w of await nonAscii<{ source: string; rollup: string; day: string; used: number }>(db, 'warmup_usage', 'source, rollup, day, used', 'rollup')) {
    const rollup = domainKey(w.rollup);
    if (rollup === w.rollup) continue;
    const kept = (await sql<{ used: number }>`select used from warmup_usage where source = ${w.source} and rollup = ${rollup} and day = ${w.day}`.execute(db)).rows[0];
    if (!kept) {
      await sql`update warmup_usage set rollup = ${rollup} where source = ${w.source} and rollup = ${w.rollup} and day = ${w.day}`.execute(db);
      continue;
    }
    await sql`update warmup_usage set used = ${Number(kept.used) + Number(w.used)} where source = ${w.source} and rollup = ${rollup} and day = ${w.day}`.execute(db);
    await sql`delete from warmup_usage where source = ${w.source} and rollup = ${w.rollup} and day = ${w.day}`.execute(db);
  }
}

async function keyRates(db: Kysely<unknown>): Promise<void> {
  for (const r of await nonAscii<{ source: string; rollup: string; tat_ms: number }>(db, 'shaping_rates', 'source, rollup, tat_ms', 'rollup')) {
    const rollup = domainKey(r.rollup);
    if (rollup === r.rollup) continue;
    const kept = (await sql<{ tat_ms: number }>`select tat_ms from shaping_rates where source = ${r.source} and rollup = ${rollup}`.execute(db)).rows[0];
    if (!kept) {
      await sql`update shaping_rates set rollup = ${rollup} where source = ${r.source} and rollup = ${r.rollup}`.execute(db);
      continue;
    }
    if (Number(r.tat_ms) > Number(kept.tat_ms)) await sql`update shaping_rates set tat_ms = ${r.tat_ms} where source = ${r.source} and rollup = ${rollup}`.execute(db);
    await sql`delete from shaping_rates where source = ${r.source} and rollup = ${r.rollup}`.execute(db);
  }
}

interface SessionCount {
  policy_domain: string;
  day: string;
  policy_key: string;
  result: string;
  sending_ip: string;
  mx_host: string;
  receiving_ip: string;
  reason_code: string;
  count: number;
}

async function keySessionCounts(db: Kysely<unknown>): Promise<void> {
  const columns = 'policy_domain, day, policy_key, result, sending_ip, mx_host, receiving_ip, reason_code, count';
  for (const c of await nonAscii<SessionCount>(db, 'tls_session_counts', columns, 'policy_domain')) {
    const domain = domainKey(c.policy_domain);
    if (domain === c.policy_domain) continue;
    // The A-label's report for that day is made: moved there, the counts would never be reported.
    if ((await sql`select day from tls_reports_out where policy_domain = ${domain} and day = ${c.day}`.execute(db)).rows.length) continue;
    const same = (name: string) =>
      sql`policy_domain = ${name} and day = ${c.day} and policy_key = ${c.policy_key} and result = ${c.result} and sending_ip = ${c.sending_ip}
        and mx_host = ${c.mx_host} and receiving_ip = ${c.receiving_ip} and reason_code = ${c.reason_code}`;
    const kept = (await sql<{ count: number }>`select count from tls_session_counts where ${same(domain)}`.execute(db)).rows[0];
    if (!kept) {
      await sql`update tls_session_counts set policy_domain = ${domain} where ${same(c.policy_domain)}`.execute(db);
      continue;
    }
    await sql`update tls_session_counts set count = ${Number(kept.count) + Number(c.count)} where ${same(domain)}`.execute(db);
    await sql`delete from tls_session_counts where ${same(c.policy_domain)}`.execute(db);
  }
}

async function keyPolicies(db: Kysely<unknown>): Promise<void> {
  for (const p of await nonAscii<{ domain: string }>(db, 'mta_sts_policies', 'domain', 'domain')) {
    const domain = domainKey(p.domain);
    if (domain === p.domain) continue;
    const taken = (await sql`select domain from mta_sts_policies where domain = ${domain}`.execute(db)).rows.length > 0;
    if (taken) await sql`delete from mta_sts_policies where domain = ${p.domain}`.execute(db);
    else await sql`update mta_sts_policies set domain = ${domain} where domain = ${p.domain}`.execute(db);
  }
}

export async function up(db: Kysely<unknown>): Promise<void> {
  const run = async (trx: Kysely<unknown>) => {
    await keyDeliveries(trx);
    await keyHolds(trx);
    await keyWarmup(trx);
    await keyRates(trx);
    await keyPolicies(trx);
    await keySessionCounts(trx);
  };
  // PostgreSQL runs each migration in a transaction already; SQLite does not.
  if (db.isTransaction) await run(db);
  else await db.transaction().execute(run);
}
