import type { Db } from '../db.js';

/** Small key/value facts the process keeps across restarts (for example the link-signing secret). */
export function createSettingsRepository(db: Db) {
  return {
    async get(key: string): Promise<string | undefined> {
      const r = await db.selectFrom('settings').select('value').where('key', '=', key).executeTakeFirst();
      return r?.value;
    },
    async put(key: string, value: string): Promise<void> {
      await db.insertInto('settings').values({ key, value }).onConflict((oc) => oc.column('key').doUpdateSet({ value })).execute();
    },
    /** Inserts only if absent and returns the stored value, so concurrent starters agree. */
    async getOrInsert(key: string, value: string): Promise<string> {
      await db.insertInto('settings').values({ key, value }).onConflict((oc) => oc.column('key').doNothing()).execute();
      return (await this.get(key))!;
    },
  };
}
export type SettingsRepository = ReturnType<typeof createSettingsRepository>;
