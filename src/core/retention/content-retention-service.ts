import type { Clock } from '../../lib/clock.js';
import { timeOrderedIdLength, timePrefix } from '../../lib/ids.js';
import type { ChunkLimit } from '../../store/repositories/content-chunks.js';
import type { EmailsRepository } from '../../store/repositories/emails-repository.js';
import type { InboundReportsRepository } from '../../store/repositories/inbound-reports-repository.js';
import type { ReceivedEmailsRepository } from '../../store/repositories/received-emails-repository.js';
import type { RetentionRepository } from '../../store/repositories/retention-repository.js';
import type { SandboxMessagesRepository } from '../../store/repositories/sandbox-messages-repository.js';
import type { SettingsRepository } from '../../store/repositories/settings-repository.js';

/**
 * One write's share: each chunk is one short write, and a graceful stop waits at most one. The
 * bytes bound it when the content is large (store/repositories/content-chunks.ts): 16 MB took
 * ~7 ms to free on SQLite on a 2-vCPU VM.
 */
const CHUNK: ChunkLimit = { rows: 500, bytes: 16 * 1024 * 1024 };

/**
 * Where the sent emails' scan starts: every email id at or below it was looked at by a run, and
 * emptied or remembered as kept (retention_kept). Kept in the store so a day's run reads only
 * the mail that became old since the last one (and the few kept), not all of history.
 */
const EMAILS_DONE_THROUGH = 'retention.emails_done_through';
/**
 * The one-off scan of the emails whose ids do not begin with their time (a store from before
 * they did): where it is, or LEGACY_DONE. What it finds too young, or still to be sent, is kept.
 */
const LEGACY_EMAILS_THROUGH = 'retention.legacy_emails_through';
const LEGACY_DONE = 'done';
/** The same for bounce and complaint reports: every id at or below it is emptied. */
const REPORTS_DONE_THROUGH = 'retention.reports_done_through';
/**
 * The same for received emails, by the time they were stored (their ids are random): every one
 * stored before it is emptied, and those stored at that instant may still be (a chunk can end
 * among them), so the next scan starts at it.
 */
const RECEIVED_DONE_THROUGH = 'retention.received_done_through';

export interface ContentRetentionDeps {
  emails: Pick<EmailsRepository, 'withContentBetween' | 'withContentOtherIds' | 'emptyContent'>;
  kept: RetentionRepository;
  received: Pick<ReceivedEmailsRepository, 'purgeContent'>;
  reports: Pick<InboundReportsRepository, 'emptyRawBefore'>;
  sandbox: Pick<SandboxMessagesRepository, 'purgeBefore'>;
  settings: Pick<SettingsRepository, 'get' | 'put'>;
  clock: Clock;
}

export interface ContentPurged {
  emails: number;
  /** Emails still scheduled or being delivered (or with an id of the old shape, not yet old): kept, and tried again by the next run. */
  emailsKept: number;
  received: number;
  /** Bounce, delay and complaint reports whose stored message was emptied. */
  reports: number;
  sandbox: number;
}

/**
 * Between two chunks: SQLite's statements run on the thread that serves the API, and with
 * `store.durability = "normal"` nothing else in a chunk waits for I/O.
 */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Runs `chunk` until it does nothing (or a stop); the sum of what it did. */
async function chunks(chunk: () => Promise<number>, signal?: AbortSignal): Promise<number> {
  let total = 0;
  while (!signal?.aborted) {
    const n = await chunk();
    if (!n) break;
    total += n;
    await turn();
  }
  return total;
}

/**
 * Content retention (`retention.contentDays`): the bodies are most of a mail server's disk, and
 * what an operator needs after a few weeks is the record (who, when, what happened), not the
 * text. Mail that may still be sent keeps its content whatever its age.
 */
export function createContentRetentionService(deps: ContentRetentionDeps) {
  return {
    async purge(days: number, signal?: AbortSignal): Promise<ContentPurged> {
      const out: ContentPurged = { emails: 0, emailsKept: 0, received: 0, reports: 0, sandbox: 0 };
      if (days <= 0) return out;
      const cutoffMs = deps.clock.nowMs() - days * 86_400_000;
      const cutoffIso = new Date(cutoffMs).toISOString();
      // Email ids are `em_` and their acceptance time, so the range is a walk on the primary key.
      const beforeId = `em_${timePrefix(cutoffMs)}`;
      const idLength = timeOrderedIdLength('em');
      // Empties what it may of `ids` (all past the cutoff's key, or listed as kept) and
      // remembers the rest: `emptyContent` checks the age too, as an id of the old shape has
      // none in its key.
      const emptyOrKeep = async (ids: string[]) => {
        const emptied = await deps.emails.emptyContent(ids, cutoffIso);
        const kept = ids.filter((id) => !emptied.has(id));
        await deps.kept.keep(kept);
        out.emails += emptied.size;
        out.emailsKept += kept.length;
      };
      // The emails earlier runs had to keep, emptied once nothing will send them.
      for (let from = ''; !signal?.aborted; ) {
        const ids = await deps.kept.keptAfter(from, CHUNK);
        if (!ids.length) break;
        const emptied = await deps.emails.emptyContent(ids, cutoffIso);
        await deps.kept.forget([...emptied]);
        out.emails += emptied.size;
        out.emailsKept += ids.length - emptied.size;
        from = ids[ids.length - 1]!;
        await turn();
      }
      // Once: the emails with random ids (before ids began with their time), wherever they sit.
      let legacyAfter = (await deps.settings.get(LEGACY_EMAILS_THROUGH)) ?? '';
      while (legacyAfter !== LEGACY_DONE && !signal?.aborted) {
        const ids = await deps.emails.withContentOtherIds(legacyAfter, idLength, CHUNK);
        legacyAfter = ids.length ? ids[ids.length - 1]! : LEGACY_DONE;
        await emptyOrKeep(ids);
        await deps.settings.put(LEGACY_EMAILS_THROUGH, legacyAfter);
        await turn();
      }
      // The mail that became old since: the mark moves past all of it, and what must keep its
      // content is remembered first, so a kill between the two only looks at a chunk again.
      let after = (await deps.settings.get(EMAILS_DONE_THROUGH)) ?? 'em_';
      while (!signal?.aborted) {
        const ids = await deps.emails.withContentBetween(after, beforeId, idLength, CHUNK);
        if (!ids.length) break;
        await emptyOrKeep(ids);
        after = ids[ids.length - 1]!;
        await deps.settings.put(EMAILS_DONE_THROUGH, after);
        await turn();
      }
      let receivedFrom = (await deps.settings.get(RECEIVED_DONE_THROUGH)) ?? '';
      while (!signal?.aborted) {
        const { through, emptied } = await deps.received.purgeContent(receivedFrom, cutoffIso, CHUNK);
        if (through === null) break;
        out.received += emptied;
        receivedFrom = through;
        await deps.settings.put(RECEIVED_DONE_THROUGH, through);
        await turn();
      }
      let reportsAfter = Number((await deps.settings.get(REPORTS_DONE_THROUGH)) ?? 0);
      while (!signal?.aborted) {
        const { lastId, emptied } = await deps.reports.emptyRawBefore(reportsAfter, cutoffIso, CHUNK);
        if (lastId === null) break;
        out.reports += emptied;
        reportsAfter = lastId;
        await deps.settings.put(REPORTS_DONE_THROUGH, String(lastId));
        await turn();
      }
      out.sandbox = await chunks(() => deps.sandbox.purgeBefore(cutoffIso, CHUNK), signal);
      return out;
    },
  };
}
export type ContentRetentionService = ReturnType<typeof createContentRetentionService>;
