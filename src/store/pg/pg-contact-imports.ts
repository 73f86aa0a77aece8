import type { Kysely } from 'kysely';
import type { Database } from '../tables/database.js';
import { dropFileQuery, endsImport, ImportNotOwnedError, recordQuery, type ContactImportChanges, type ContactImportsRepository } from '../repositories/contact-imports-repository.js';
import { openTxWrites, type TxWriteKind } from './pg-exec.js';

/*
 * A contact import's progress on PostgreSQL: the record of a chunk is queued while the chunk's
 * contacts transaction runs and written in it just before the commit (pg-exec.ts, TxWrites).
 * Its update takes the import's row, so a node that took the import over meanwhile (this one was
 * taken for dead) either finds it no longer ours (the chunk rolls back) or waits for this commit
 * and carries on after the chunk.
 */

interface Progress {
  id: string;
  owner: string;
  changes: ContactImportChanges;
}

function progressKind(db: Kysely<Database>): TxWriteKind<Progress> {
  return {
    name: 'contact-import-progress',
    // Before the outbox and analytics: a lost import rolls back before they write anything.
    order: 5,
    async flush(exec, items) {
      for (const p of items) {
        const q = recordQuery(db, p.id, p.owner, p.changes).compile();
        if ((await exec.run(q.sql, q.parameters)) === 0) throw new ImportNotOwnedError(p.id);
        if (endsImport(p.changes)) {
          const d = dropFileQuery(db, p.id).compile();
          await exec.run(d.sql, d.parameters);
        }
      }
    },
  };
}

export function pgContactImports(db: Kysely<Database>): Partial<ContactImportsRepository> {
  const kind = progressKind(db);
  return {
    recordInOpenTransaction(id: string, owner: string, changes: ContactImportChanges): void {
      openTxWrites('recordInOpenTransaction').add(kind, { id, owner, changes });
    },
  };
}
