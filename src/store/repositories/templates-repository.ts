import type { Selectable } from 'kysely';
import { transact } from '../store-context.js';
import type { Db } from '../db.js';
import { containsIgnoringCase } from './text-search-sql.js';
import type { TemplatesTable, TemplateVersionsTable } from '../tables/database.js';
import { boundedRead } from '../bounded-read.js';

export type TemplateRow = Selectable<TemplatesTable>;
export type TemplateVersionRow = Selectable<TemplateVersionsTable>;

export function createTemplatesRepository(db: Db) {
  const live = () => db.selectFrom('templates').selectAll().where('deleted_at', 'is', null);
  return {
    async insert(row: TemplatesTable): Promise<void> {
      await db.insertInto('templates').values(row).execute();
    },
    async insertMany(rows: TemplatesTable[], versions: TemplateVersionsTable[]): Promise<void> {
      await transact(db, async (trx) => {
        for (const r of rows) await trx.insertInto('templates').values(r).execute();
        for (const v of versions) await trx.insertInto('template_versions').values(v).execute();
      });
    },
    async findById(teamId: number, id: string): Promise<TemplateRow | undefined> {
      return live().where('team_id', '=', teamId).where('id', '=', id).executeTakeFirst();
    },
    async list(teamId: number, f: { search?: string; offset: number; limit: number }): Promise<{ rows: TemplateRow[]; total: number }> {
      return boundedRead(db, async (rdb) => {
        let q = rdb.selectFrom('templates').where('team_id', '=', teamId).where('deleted_at', 'is', null);
        if (f.search) q = q.where(containsIgnoringCase(rdb, ['name', 'subject'], f.search));
        // One after the other: they share the read's connection.
        const rows = await q.selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc').limit(f.limit).offset(f.offset).execute();
        const total = await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
        return { rows, total: Number(total.n) };
      });
    },
    async updateDraft(teamId: number, id: string, patch: Partial<Pick<TemplatesTable, 'name' | 'subject' | 'content' | 'html' | 'text_body'>>, nowIso: string): Promise<TemplateRow | undefined> {
      return db
        .updateTable('templates')
        .set({ ...patch, updated_at: nowIso })
        .where('team_id', '=', teamId)
        .where('id', '=', id)
        .where('deleted_at', 'is', null)
        .returningAll()
        .executeTakeFirst();
    },
    async softDelete(teamId: number, id: string, nowIso: string): Promise<boolean> {
      const res = await db.updateTable('templates').set({ deleted_at: nowIso, updated_at: nowIso }).where('team_id', '=', teamId).where('id', '=', id).where('deleted_at', 'is', null).executeTakeFirst();
      return res.numUpdatedRows > 0n;
    },
    /** Freezes the draft as the next version and makes it the sending one, atomically. */
    async publish(t: TemplateRow, nowIso: string): Promise<number> {
      return transact(db, async (trx) => {
        // The template's row first: on PostgreSQL a concurrent publish of the same template waits
        // here until this one commits, then reads the version it wrote (two reading the same
        // latest number would collide on the version key). SQLite runs one transaction at a time.
        await trx.updateTable('templates').set({ updated_at: nowIso }).where('id', '=', t.id).execute();
        const last = await trx.selectFrom('template_versions').select((eb) => eb.fn.max('version_number').as('n')).where('template_id', '=', t.id).executeTakeFirst();
        const next = Number(last?.n ?? 0) + 1;
        await trx
          .insertInto('template_versions')
          .values({ template_id: t.id, version_number: next, subject: t.subject, content: t.content, html: t.html, text_body: t.text_body, created_at: nowIso })
          .execute();
        await trx.updateTable('templates').set({ published_version: next, updated_at: nowIso }).where('id', '=', t.id).execute();
        return next;
      });
    },
    async setPublishedVersion(id: string, version: number, nowIso: string): Promise<void> {
      await db.updateTable('templates').set({ published_version: version, updated_at: nowIso }).where('id', '=', id).execute();
    },
    async versions(templateId: string): Promise<TemplateVersionRow[]> {
      return db.selectFrom('template_versions').selectAll().where('template_id', '=', templateId).orderBy('version_number').execute();
    },
    async version(templateId: string, versionNumber: number): Promise<TemplateVersionRow | undefined> {
      return db.selectFrom('template_versions').selectAll().where('template_id', '=', templateId).where('version_number', '=', versionNumber).executeTakeFirst();
    },
  };
}
export type TemplatesRepository = ReturnType<typeof createTemplatesRepository>;
