import type { Selectable, Transaction, Updateable } from 'kysely';
import type { Db } from '../db.js';
import { groupCommitOf } from '../group-commit.js';
import { isPostgres, transact } from '../store-context.js';
import type { Database, DomainsTable, DomainStatus, MtaStsMode } from '../tables/database.js';

export type { DomainStatus, MtaStsMode };

export interface DomainRecord {
  id: number;
  teamId: number;
  name: string;
  region: string;
  status: DomainStatus;
  subdomain: string | null;
  dkimSelector: string;
  dkimPrivateKey: string;
  publicKey: string;
  bounceLabel: string;
  dkimStatus: DomainStatus | null;
  spfStatus: DomainStatus | null;
  mxStatus: DomainStatus | null;
  dmarcStatus: DomainStatus | null;
  dmarcAdded: boolean;
  clickTracking: boolean;
  openTracking: boolean;
  trackingDomain: string | null;
  trackingDomainStatus: DomainStatus | null;
  tlsPolicy: 'OPPORTUNISTIC' | 'ENFORCED';
  receiving: boolean;
  receivingMxStatus: DomainStatus | null;
  /** The MTA-STS mode served for the domain when receiving. */
  mtaStsMode: MtaStsMode;
  mtaStsStatus: DomainStatus | null;
  mtaStsHostStatus: DomainStatus | null;
  tlsRptStatus: DomainStatus | null;
  isVerifying: boolean;
  /** When the check under way began (ISO): a flag older than a check can last is a dead process's. */
  verifyingSince: string | null;
  errorMessage: string | null;
  verificationError: string | null;
  lastCheckedAt: string | null;
  /** When a check last found the domain verified (ISO); null: never, or unknown (verified before this was kept). */
  verifiedAt: string | null;
  unverifiedSince: string | null;
  createdAt: string;
  updatedAt: string;
  /** Egress pool of the domain's mail; null: its team's. */
  pool: string | null;
}

export type DomainPatch = Partial<Omit<DomainRecord, 'id' | 'teamId' | 'name' | 'createdAt' | 'dkimPrivateKey' | 'publicKey'>>;

export function fromRow(r: Selectable<DomainsTable>): DomainRecord {
  return {
    id: r.id,
    teamId: r.team_id,
    name: r.name,
    region: r.region,
    status: r.status,
    subdomain: r.subdomain,
    dkimSelector: r.dkim_selector,
    dkimPrivateKey: r.dkim_private_key,
    publicKey: r.public_key,
    bounceLabel: r.bounce_label,
    dkimStatus: r.dkim_status,
    spfStatus: r.spf_status,
    mxStatus: r.mx_status,
    dmarcStatus: r.dmarc_status,
    dmarcAdded: r.dmarc_added === 1,
    clickTracking: r.click_tracking === 1,
    openTracking: r.open_tracking === 1,
    trackingDomain: r.tracking_domain,
    trackingDomainStatus: r.tracking_domain_status,
    tlsPolicy: r.tls_policy,
    receiving: r.receiving === 1,
    receivingMxStatus: r.receiving_mx_status,
    mtaStsMode: r.mta_sts_mode,
    mtaStsStatus: r.mta_sts_status,
    mtaStsHostStatus: r.mta_sts_host_status,
    tlsRptStatus: r.tls_rpt_status,
    isVerifying: r.is_verifying === 1,
    verifyingSince: r.verifying_since,
    errorMessage: r.error_message,
    verificationError: r.verification_error,
    lastCheckedAt: r.last_checked_at,
    verifiedAt: r.verified_at,
    unverifiedSince: r.unverified_since,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    pool: r.pool,
  };
}

function toRow(p: DomainPatch): Updateable<DomainsTable> {
  const b = (v: boolean | undefined) => (v === undefined ? undefined : v ? 1 : 0);
  const row: Updateable<DomainsTable> = {
    region: p.region,
    status: p.status,
    subdomain: p.subdomain,
    dkim_selector: p.dkimSelector,
    bounce_label: p.bounceLabel,
    dkim_status: p.dkimStatus,
    spf_status: p.spfStatus,
    mx_status: p.mxStatus,
    dmarc_status: p.dmarcStatus,
    dmarc_added: b(p.dmarcAdded),
    click_tracking: b(p.clickTracking),
    open_tracking: b(p.openTracking),
    tracking_domain: p.trackingDomain,
    tracking_domain_status: p.trackingDomainStatus,
    tls_policy: p.tlsPolicy,
    receiving: b(p.receiving),
    receiving_mx_status: p.receivingMxStatus,
    mta_sts_mode: p.mtaStsMode,
    mta_sts_status: p.mtaStsStatus,
    mta_sts_host_status: p.mtaStsHostStatus,
    tls_rpt_status: p.tlsRptStatus,
    is_verifying: b(p.isVerifying),
    verifying_since: p.verifyingSince,
    error_message: p.errorMessage,
    verification_error: p.verificationError,
    last_checked_at: p.lastCheckedAt,
    verified_at: p.verifiedAt,
    unverified_since: p.unverifiedSince,
    updated_at: p.updatedAt,
  };
  for (const k of Object.keys(row) as (keyof typeof row)[]) if (row[k] === undefined) delete row[k];
  return row;
}

/**
 * `inTransaction` runs with the write's result inside the write's own transaction (the
 * webhook outbox of the domain events it causes, core/events.ts); without it the write is a
 * single autocommitted statement as before.
 */
type InTransaction<T> = ((result: T) => void) | undefined;

/**
 * Every send reads its from-domain (a wide row: keys, statuses), ~8% of an API send's CPU;
 * domains change rarely. findByName keeps a record this long, and every write through this
 * repository forgets them all, so a change made in this process is seen at once and one made
 * elsewhere (the CLI, another node) within this time.
 */
const BY_NAME_TTL_MS = 1000;
const BY_NAME_MAX_ENTRIES = 10_000;

export function createDomainsRepository(db: Db) {
  const sync = groupCommitOf(db);
  const live = () => db.selectFrom('domains').selectAll().where('deleted_at', 'is', null);
  const byName = new Map<string, { record: DomainRecord | undefined; at: number }>();
  async function write<T>(run: (ex: Db | Transaction<Database>) => Promise<T>, inTransaction: InTransaction<T>): Promise<T> {
    try {
      if (!inTransaction) return await run(db);
      return await transact(db, async (trx) => {
        const result = await run(trx);
        inTransaction(result);
        return result;
      });
    } finally {
      byName.clear();
    }
  }
  /** The hot reads: prepared statements in the group commit on SQLite, plain queries on PostgreSQL. */
  const pg = isPostgres(db);
  const readByName = (teamId: number, name: string): Promise<Selectable<DomainsTable> | undefined> =>
    pg
      ? live().where('team_id', '=', teamId).where('name', '=', name).executeTakeFirst()
      : sync.read(() => sync.sqlite.prepare('select * from domains where team_id = ? and name = ? and deleted_at is null').get(teamId, name) as Selectable<DomainsTable> | undefined);
  const readPool = (id: number): Promise<{ pool: string | null } | undefined> =>
    pg
      ? db.selectFrom('domains as d').innerJoin('teams as t', 't.id', 'd.team_id').select((eb) => eb.fn.coalesce('d.pool', 't.pool').as('pool')).where('d.id', '=', id).executeTakeFirst()
      : sync.read(() => sync.sqlite.prepare('select coalesce(d.pool, t.pool) as pool from domains d join teams t on t.id = d.team_id where d.id = ?').get(id) as { pool: string | null } | undefined);
  return {
    async insert(d: Omit<DomainRecord, 'id' | 'pool'>, inTransaction?: InTransaction<DomainRecord>): Promise<DomainRecord> {
      return write(async (ex) => fromRow(await ex
        .insertInto('domains')
        .values({
          team_id: d.teamId,
          name: d.name,
          region: d.region,
          status: d.status,
          subdomain: d.subdomain,
          dkim_selector: d.dkimSelector,
          dkim_private_key: d.dkimPrivateKey,
          public_key: d.publicKey,
          bounce_label: d.bounceLabel,
          dkim_status: d.dkimStatus,
          spf_status: d.spfStatus,
          mx_status: d.mxStatus,
          dmarc_status: d.dmarcStatus,
          dmarc_added: d.dmarcAdded ? 1 : 0,
          click_tracking: d.clickTracking ? 1 : 0,
          open_tracking: d.openTracking ? 1 : 0,
          tracking_domain: d.trackingDomain,
          tracking_domain_status: d.trackingDomainStatus,
          tls_policy: d.tlsPolicy,
          receiving: d.receiving ? 1 : 0,
          receiving_mx_status: d.receivingMxStatus,
          mta_sts_mode: d.mtaStsMode,
          mta_sts_status: d.mtaStsStatus,
          mta_sts_host_status: d.mtaStsHostStatus,
          tls_rpt_status: d.tlsRptStatus,
          is_verifying: d.isVerifying ? 1 : 0,
          verifying_since: d.verifyingSince,
          error_message: d.errorMessage,
          verification_error: d.verificationError,
          last_checked_at: d.lastCheckedAt,
          verified_at: d.verifiedAt,
          unverified_since: d.unverifiedSince,
          created_at: d.createdAt,
          updated_at: d.updatedAt,
        })
        .returningAll()
        .executeTakeFirstOrThrow()), inTransaction);
    },
    async findById(teamId: number, id: number): Promise<DomainRecord | undefined> {
      const r = await live().where('team_id', '=', teamId).where('id', '=', id).executeTakeFirst();
      return r && fromRow(r);
    },
    /** Any team's live domain by id (engine and inbound use this). */
    async findByIdAnyTeam(id: number): Promise<DomainRecord | undefined> {
      const r = await live().where('id', '=', id).executeTakeFirst();
      return r && fromRow(r);
    },
    /**
     * A deleted domain by id, with when it was deleted: inbound takes late reports to its
     * return paths for a while (core/received/inbound-router.ts). Undefined for a live one.
     */
    async findDeletedByIdAnyTeam(id: number): Promise<{ domain: DomainRecord; deletedAt: string } | undefined> {
      const r = await db.selectFrom('domains').selectAll().where('id', '=', id).where('deleted_at', 'is not', null).executeTakeFirst();
      return r && r.deleted_at !== null ? { domain: fromRow(r), deletedAt: r.deleted_at } : undefined;
    },
    /** The egress pool of a domain's mail: its own, else its team's; null: the default pool. */
    async egressPoolOf(id: number): Promise<string | null> {
      return (await readPool(id))?.pool ?? null;
    },
    /** Sets a domain's egress pool (null: the team's). */
    /** False when there is no such domain; otherwise `inTransaction` runs inside the update's transaction (the operator's audit entry commits with it). */
    async setPool(id: number, pool: string | null, nowIso: string, inTransaction?: () => void): Promise<boolean> {
      return transact(db, async (trx) => {
        const res = await trx.updateTable('domains').set({ pool, updated_at: nowIso }).where('id', '=', id).where('deleted_at', 'is', null).executeTakeFirst();
        const updated = res.numUpdatedRows > 0n;
        if (updated) inTransaction?.();
        return updated;
      });
    },
    async findByName(teamId: number, name: string): Promise<DomainRecord | undefined> {
      // Hot path (every send checks its from-domain): a prepared statement, and a short cache.
      const key = `${teamId}\u0000${name}`;
      const now = performance.now();
      const hit = byName.get(key);
      if (hit && now - hit.at < BY_NAME_TTL_MS) return hit.record && { ...hit.record };
      const r = await readByName(teamId, name);
      const record = r && fromRow(r);
      if (byName.size >= BY_NAME_MAX_ENTRIES) byName.clear();
      byName.set(key, { record, at: now });
      return record && { ...record };
    },
    /** Live domains of any team with this exact name (inbound routing). */
    async findAllByName(name: string): Promise<DomainRecord[]> {
      return (await live().where('name', '=', name).orderBy('id').execute()).map(fromRow);
    },
    /**
     * The DKIM selectors of every domain of any team with this name, deleted ones too (their
     * records may still be published), with their ids.
     */
    async dkimSelectorsOfName(name: string): Promise<{ id: number; dkimSelector: string }[]> {
      const rows = await db.selectFrom('domains').select(['id', 'dkim_selector']).where('name', '=', name).orderBy('id').execute();
      return rows.map((r) => ({ id: r.id, dkimSelector: r.dkim_selector }));
    },
    async list(teamId: number, onlyId?: number | null): Promise<DomainRecord[]> {
      let q = live().where('team_id', '=', teamId);
      if (onlyId) q = q.where('id', '=', onlyId);
      return (await q.orderBy('id').execute()).map(fromRow);
    },
    async listForRecheck(verified: boolean): Promise<DomainRecord[]> {
      const q = live();
      return (await (verified ? q.where('status', '=', 'SUCCESS') : q.where('status', '!=', 'SUCCESS')).orderBy('id').execute()).map(fromRow);
    },
    /** ifStatus: only while the domain still has that status (undefined otherwise), so a change of status is made, and announced, once. */
    async update(id: number, patch: DomainPatch, inTransaction?: InTransaction<DomainRecord | undefined>, ifStatus?: DomainStatus): Promise<DomainRecord | undefined> {
      return write(async (ex) => {
        const r = await ex
          .updateTable('domains')
          .set(toRow(patch))
          .where('id', '=', id)
          .where('deleted_at', 'is', null)
          .$if(ifStatus !== undefined, (q) => q.where('status', '=', ifStatus!))
          .returningAll()
          .executeTakeFirst();
        return r && fromRow(r);
      }, inTransaction);
    },
    /** Clears every domain's verifying flag (at start on SQLite, where no check can be under way). */
    async clearVerifying(): Promise<number> {
      return write(async (ex) => Number((await ex.updateTable('domains').set({ is_verifying: 0 }).where('is_verifying', '=', 1).executeTakeFirst()).numUpdatedRows), undefined);
    },
    async softDelete(teamId: number, id: number, nowIso: string, inTransaction?: InTransaction<boolean>): Promise<boolean> {
      return write(async (ex) => {
        const res = await ex
          .updateTable('domains')
          .set({ deleted_at: nowIso, updated_at: nowIso, receiving: 0 })
          .where('team_id', '=', teamId)
          .where('id', '=', id)
          .where('deleted_at', 'is', null)
          .executeTakeFirst();
        if (res.numUpdatedRows === 0n) return false;
        // A key bound to the domain could do nothing more (it sees and sends only within the
        // domain): it goes with it, in this transaction.
        await ex.deleteFrom('api_keys').where('team_id', '=', teamId).where('domain_id', '=', id).execute();
        return true;
        // Two statements: with no caller hook a no-op one still makes `write` open a transaction,
        // so the domain never goes without its keys or its keys without the domain.
      }, inTransaction ?? (() => undefined));
    },
  };
}
export type DomainsRepository = ReturnType<typeof createDomainsRepository>;
