// A full disk, simulated by SQLite itself: PRAGMA max_page_count caps the database at its
// current size on the app's own connection, then a filler table takes every free page and
// the free space of its last page. From then on every write that needs a new page fails
// with a real SQLITE_FULL from the real write path (no mocks): an insert whose row does not
// fit in the free space left on an existing page, anything that spills to an overflow page
// (a row over ~4 KB), a page split. Small writes into existing free space still succeed,
// as they do on a real full disk whose WAL file can still be reused.
//
// The WAL: max_page_count limits the database's logical size, which in WAL mode lives in the
// WAL's commit frames, so the cap bites at the statement (before anything is appended to the
// WAL), and later checkpoints never grow the file past it.
import type { App } from '../../../src/app.js';
import { sqliteStoreOf } from '../../helpers/repositories.js';

const FILLER = 'proof_disk_filler';
/** SQLite's own ceiling for max_page_count. */
const NO_LIMIT = 4_294_967_294;

export interface FullDisk {
  /** Fills the database (under the store's connection lock, so no async transaction is joined). */
  fill(): Promise<{ pages: number; fillerRows: number }>;
  /** "Frees the disk": lifts the cap and drops the filler. */
  free(): Promise<void>;
}

export function fullDisk(app: App): FullDisk {
  const { sqlite, db } = sqliteStoreOf(app);
  const fillerTables: string[] = [];
  const locked = <T>(fn: () => T): Promise<T> => db.connection().execute(async () => fn());
  return {
    fill: () =>
      locked(() => {
        sqlite.exec(`create table if not exists ${FILLER} (b blob)`);
        const pages = sqlite.pragma('page_count', { simple: true }) as number;
        sqlite.pragma(`max_page_count = ${pages}`);
        const insert = sqlite.prepare(`insert into ${FILLER} (b) values (?)`);
        let fillerRows = 0;
        // Whole pages first (the free list), then ever smaller rows into what is left.
        for (const size of [4000, 1000, 200, 40, 1]) {
          for (;;) {
            try {
              insert.run(Buffer.alloc(size));
              fillerRows++;
            } catch (err) {
              if ((err as { code?: string }).code !== 'SQLITE_FULL') throw err;
              break;
            }
          }
        }
        // A last free page or two can be left when the next insert would need more than that
        // (a page split): give each its own one-page table, so no new page is left at all.
        for (let k = 0; (sqlite.pragma('freelist_count', { simple: true }) as number) > 0; k++) {
          try {
            sqlite.exec(`create table ${FILLER}_${k} (b blob)`);
            fillerTables.push(`${FILLER}_${k}`);
          } catch (err) {
            if ((err as { code?: string }).code !== 'SQLITE_FULL') throw err;
            break;
          }
        }
        const left = sqlite.pragma('freelist_count', { simple: true }) as number;
        if (left !== 0) throw new Error(`full-disk: ${left} free page(s) left`);
        return { pages, fillerRows };
      }),
    free: () =>
      locked(() => {
        sqlite.pragma(`max_page_count = ${NO_LIMIT}`);
        sqlite.exec(`drop table if exists ${FILLER}`);
        for (const name of fillerTables.splice(0)) sqlite.exec(`drop table if exists ${name}`);
      }),
  };
}
