import type { Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import { ImportNotOwnedError, type ContactImportChanges, type ContactImportRow, type ContactImportsRepository } from '../../store/repositories/contact-imports-repository.js';
import type { ContactImportStatus } from '../../store/tables/database.js';
import { AppError, notFound } from '../errors.js';
import { isStorageFailure } from '../../store/store-errors.js';
import type { BookScope } from './contact-book-service.js';
import { readContactsCsv, type CsvContactRow } from './contact-csv.js';
import type { ContactService } from './contact-service.js';

// A CSV import runs in the background, a chunk of rows at a time through contacts.bulkAdd
// (the API's bulk add: same validation, same events, same double opt-in), and records its
// progress in each chunk's own transaction (bulkAdd's inTransaction), so the console can show a
// progress bar and, at the end, each refused row with its line. The file is stored with the job
// (in a row of its own, so a chunk's progress update does not rewrite it), until the job ends:
// a process killed mid-import continues at the next start from the last recorded chunk, and a
// chunk commits only with its progress, so none is written or counted twice.

/** Rows per bulkAdd: small enough that progress moves visibly, large enough to be cheap. */
export const IMPORT_CHUNK_ROWS = 100;
/** Pause before an import whose progress could not be recorded carries on. */
const RETRY_DELAY_MS = 5000;
/**
 * Imports one team may have running at once: each runs on the main thread beside everyone's
 * mail, so one team starting dozens of files would slow the server for every team.
 */
export const MAX_RUNNING_IMPORTS = 3;
/** Refused rows kept for the report; beyond these only the count grows. */
export const MAX_REPORTED_ERRORS = 500;

export interface ImportError {
  line: number;
  email: string;
  message: string;
}

export interface ContactImportView {
  id: string;
  contactBookId: string;
  fileName: string;
  status: ContactImportStatus;
  totalRows: number;
  processedRows: number;
  created: number;
  updated: number;
  errorCount: number;
  errors: ImportError[];
  /** Why the import stopped early (the book was deleted, its double opt-in sender lapsed). */
  failure: string | null;
  createdAt: string;
  updatedAt: string;
}

function view(r: ContactImportRow): ContactImportView {
  return {
    id: r.id,
    contactBookId: r.contact_book_id,
    fileName: r.file_name,
    status: r.status,
    totalRows: r.total_rows,
    processedRows: r.processed_rows,
    created: r.created_count,
    updated: r.updated_count,
    errorCount: r.error_count,
    errors: JSON.parse(r.errors_json) as ImportError[],
    failure: r.failure,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** A run's counts; the run moves on to the next only once it is recorded. */
interface Progress {
  processed: number;
  created: number;
  updated: number;
  errorCount: number;
  errors: ImportError[];
}

/** The progress once a chunk of `rows` rows is counted (a new object: the run's own moves only once recorded). */
function after(p: Progress, rows: number, added: { created: number; updated: number }, refused: ImportError[]): Progress {
  const errors = [...p.errors, ...refused.slice(0, Math.max(0, MAX_REPORTED_ERRORS - p.errors.length))];
  return { processed: p.processed + rows, created: p.created + added.created, updated: p.updated + added.updated, errorCount: p.errorCount + refused.length, errors };
}

const LOST = 'contact import stopped here: another node runs it now (this one was taken for dead), or it ended meanwhile';

export interface ContactImportServiceDeps {
  imports: ContactImportsRepository;
  contacts: Pick<ContactService, 'bulkAdd' | 'search'>;
  clock: Clock;
  logger: Logger;
  /** This node's id: the owner written on the imports it runs. */
  node: string;
  /** Several nodes share the store: at start, take only imports nobody runs (not those of live nodes). */
  cluster: boolean;
  /** Pause before an import whose progress could not be recorded carries on (default 5 s). */
  retryDelayMs?: number;
}

export function createContactImportService(deps: ContactImportServiceDeps) {
  const { imports, clock } = deps;
  const running = new Map<string, Promise<void>>();
  let stopping = false;

  /** Writes the run's progress or end; false (and the run stops) when the import is no longer this node's to run. */
  async function record(job: ContactImportRow, changes: ContactImportChanges): Promise<boolean> {
    if (await imports.record(job.id, deps.node, changes)) return true;
    deps.logger.warn({ importId: job.id }, LOST);
    return false;
  }

  /** `read`: the file's rows when start() has just read them, else read again (a resumed import). */
  async function run(job: ContactImportRow, read?: CsvContactRow[]): Promise<void> {
    const scope: BookScope = { teamId: job.team_id, domainId: null };
    let rows = read;
    if (!rows) {
      const file = await imports.readFile(job.team_id, job.id);
      // A running import has its file (both are written and ended in one transaction): none means
      // it ended meanwhile, or the store lost it; then it fails rather than hold a running slot.
      if (file === undefined) {
        await record(job, { status: 'FAILED', failure: 'the uploaded file is no longer stored; import it again', updated_at: clock.now().toISOString() });
        return;
      }
      rows = await readContactsCsv(file);
    }
    let state: Progress = { processed: job.processed_rows, created: job.created_count, updated: job.updated_count, errorCount: job.error_count, errors: JSON.parse(job.errors_json) as ImportError[] };
    const changesOf = (p: Progress, done: boolean): ContactImportChanges => ({
      status: done ? 'DONE' : 'RUNNING',
      processed_rows: p.processed,
      created_count: p.created,
      updated_count: p.updated,
      error_count: p.errorCount,
      errors_json: JSON.stringify(p.errors),
      updated_at: clock.now().toISOString(),
    });
    while (state.processed < rows.length && !stopping) {
      const chunk = rows.slice(state.processed, state.processed + IMPORT_CHUNK_ROWS);
      const valid = chunk.filter((r): r is Extract<CsvContactRow, { body: unknown }> => 'body' in r);
      const unreadable = chunk.flatMap((r) => ('error' in r ? [{ line: r.line, email: r.email, message: r.error }] : []));
      const done = state.processed + chunk.length >= rows.length;
      if (!valid.length) {
        const next = after(state, chunk.length, { created: 0, updated: 0 }, unreadable);
        if (!(await record(job, changesOf(next, done)))) return;
        state = next;
        continue;
      }
      let next: Progress | undefined;
      try {
        // The chunk's contacts commit only with its progress, and only while the import is this
        // node's: a process killed in between has neither (the chunk runs again, counted once),
        // and a node that lost the import (taken for dead) rolls its chunk back.
        await deps.contacts.bulkAdd(scope, job.contact_book_id, valid.map((r) => r.body), (outcome) => {
          const refused = outcome.errors.map((e) => {
            const row = valid[e.index]!;
            // bulkAdd names the field by the request index ("[3].email: ..."); the line says where.
            return { line: row.line, email: row.email, message: e.message.replace(/^\[\d+\]\.?/, '') || e.message };
          });
          next = after(state, chunk.length, outcome, [...unreadable, ...refused]);
          imports.recordInOpenTransaction(job.id, deps.node, changesOf(next, done));
        });
      } catch (err) {
        if (err instanceof ImportNotOwnedError) {
          deps.logger.warn({ importId: job.id }, LOST);
          return;
        }
        // The store failing (full, out of reach, busy) is not the file's fault: the run stops and carries on from this chunk.
        if (isStorageFailure(err)) throw err;
        const failure = err instanceof AppError ? err.message : 'the import failed unexpectedly; see the server log';
        if (!(err instanceof AppError)) deps.logger.error({ err, importId: job.id }, 'contact import failed');
        // A failure after the commit (an after-commit step of bulkAdd) leaves the chunk
        // recorded: the stored progress says which, and the report keeps what was written.
        const committed = next && (await imports.findRunning(job.id, deps.node))?.processed_rows === next.processed;
        const stopped = committed ? next! : after(state, 0, { created: 0, updated: 0 }, unreadable);
        // Its file goes with it (record deletes it in the same transaction); the report stays.
        await record(job, { ...changesOf(stopped, false), status: 'FAILED', failure });
        return;
      }
      state = next!;
    }
    if (rows.length === 0) {
      await record(job, { status: 'DONE', updated_at: clock.now().toISOString() });
    }
  }

  /** Imports pausing before they carry on; stop() ends their pause. */
  const pauses = new Set<() => void>();

  function pause(): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        pauses.delete(done);
        resolve();
      };
      const timer = setTimeout(done, deps.retryDelayMs ?? RETRY_DELAY_MS);
      timer.unref();
      pauses.add(done);
    });
  }

  /**
   * Runs the import to its end. A run that failed to record its progress (the store failed or
   * was out of reach) carries on after a pause from the last chunk it recorded, while the import
   * is still RUNNING and this node's: otherwise it stayed RUNNING, run by nobody, until a restart.
   */
  async function runToEnd(job: ContactImportRow, rows?: CsvContactRow[]): Promise<void> {
    for (let current: ContactImportRow | undefined = job; current; ) {
      try {
        // Only the first run has the rows start() read; one carrying on after a pause reads its stored file.
        await run(current, current === job ? rows : undefined);
        return;
      } catch (err) {
        if (!isStorageFailure(err)) {
          deps.logger.error({ err, importId: job.id }, 'contact import stopped');
          return;
        }
        deps.logger.error({ err, importId: job.id }, 'contact import could not reach the store; it carries on from its last recorded chunk');
      }
      for (current = undefined; !current; ) {
        await pause();
        if (stopping) return; // the next start carries on
        try {
          current = await imports.findRunning(job.id, deps.node);
          if (!current) return; // finished, failed, deleted, or taken over meanwhile
        } catch (err) {
          deps.logger.warn({ err, importId: job.id }, 'contact import waits for the store');
        }
      }
    }
  }

  function launch(job: ContactImportRow, rows?: CsvContactRow[]): void {
    if (running.has(job.id)) return;
    const p = runToEnd(job, rows).finally(() => running.delete(job.id));
    running.set(job.id, p);
  }

  return {
    /** Checks the file (400 naming the column for a bad header) and starts importing it; RATE_LIMITED while the team has MAX_RUNNING_IMPORTS running. */
    async start(scope: BookScope, bookId: string, fileName: string, text: string): Promise<ContactImportView> {
      // Read a piece at a time: a 20 MB file holds the thread for seconds when read in one go.
      const rows = await readContactsCsv(text);
      // The book must be the team's (404 otherwise) before anything is stored.
      await deps.contacts.search(scope, bookId, { offset: 0, limit: 1 });
      const now = clock.now().toISOString();
      const row: ContactImportRow = {
        id: newId('ci'),
        team_id: scope.teamId,
        contact_book_id: bookId,
        file_name: fileName.slice(0, 200) || 'contacts.csv',
        status: 'RUNNING',
        total_rows: rows.length,
        processed_rows: 0,
        created_count: 0,
        updated_count: 0,
        error_count: 0,
        errors_json: '[]',
        failure: null,
        created_at: now,
        updated_at: now,
      };
      if (!(await imports.insertIfRoom(row, text, deps.node, MAX_RUNNING_IMPORTS))) {
        throw new AppError('RATE_LIMITED', `${MAX_RUNNING_IMPORTS} imports are running for this team; start this one when one of them has finished`, 30);
      }
      launch(row, rows);
      return view(row);
    },

    async get(scope: BookScope, id: string): Promise<ContactImportView> {
      const r = await imports.findById(scope.teamId, id);
      if (!r) throw notFound(`import ${id} not found`);
      return view(r);
    },

    async listForBook(scope: BookScope, bookId: string, limit = 10): Promise<ContactImportView[]> {
      return (await imports.listForBook(scope.teamId, bookId, limit)).map(view);
    },

    /** At start, and when a dead node's imports were freed: unfinished imports carry on (here). */
    async resume(): Promise<number> {
      stopping = false;
      const jobs = (await imports.claimRunning(deps.node, !deps.cluster)).filter((j) => !running.has(j.id));
      for (const j of jobs) launch(j);
      return jobs.length;
    },

    /**
     * Cluster sweeps: takes up the unfinished imports no node runs (freed from a dead node by
     * this sweep, or by a node that stopped or died before it took them up itself).
     */
    async adoptUnowned(): Promise<number> {
      if (stopping) return 0;
      const jobs = (await imports.claimRunning(deps.node, 'unowned')).filter((j) => !running.has(j.id));
      for (const j of jobs) launch(j);
      return jobs.length;
    },

    /** Resolves once every running import has recorded its current chunk and stopped. */
    async stop(): Promise<void> {
      stopping = true;
      for (const wake of [...pauses]) wake();
      await Promise.all(running.values());
    },

    /** Resolves when the import is no longer running (tests; the edge never waits). */
    async whenFinished(id: string): Promise<void> {
      await running.get(id);
    },
  };
}
export type ContactImportService = ReturnType<typeof createContactImportService>;
