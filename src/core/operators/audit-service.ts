import type { Clock } from '../../lib/clock.js';
import type { OperatorAuditRepository } from '../../store/repositories/operator-audit-repository.js';
import { decodeIdCursor, encodeIdCursor } from '../id-cursor.js';

/** Who took an operator action: an operator key, an operator signed in to the web console, or the CLI on the server itself. */
export type OperatorActor = { keyId: number; name: string } | { consoleUserId: number; email: string } | 'cli';

/** How the audit log and suspensions name an actor: "key 2 (ops)", "console user 3 (ops@example.com)", "cli". */
export function actorLabel(actor: OperatorActor): string {
  if (actor === 'cli') return 'cli';
  if ('keyId' in actor) return `key ${actor.keyId} (${actor.name})`;
  return `console user ${actor.consoleUserId} (${actor.email})`;
}

export interface AuditEntry {
  id: number;
  keyId: number | null;
  consoleUserId: number | null;
  actor: string;
  action: string;
  target: Record<string, unknown>;
  createdAt: string;
}

export function createAuditService(deps: { audit: OperatorAuditRepository; clock: Clock }) {
  const rowOf = (actor: OperatorActor, action: string, target: Record<string, unknown>) => ({
    key_id: actor !== 'cli' && 'keyId' in actor ? actor.keyId : null,
    console_user_id: actor !== 'cli' && 'consoleUserId' in actor ? actor.consoleUserId : null,
    actor: actorLabel(actor),
    action,
    target_json: JSON.stringify(target),
    created_at: deps.clock.now().toISOString(),
  });
  return {
    /** An entry in a write of its own: only for an action with no change to ride on. */
    async record(actor: OperatorActor, action: string, target: Record<string, unknown>): Promise<void> {
      await deps.audit.insert(rowOf(actor, action, target));
    },

    /**
     * The entry of an action, written inside the write transaction that makes the change (a
     * repository's `inTransaction` callback), so the change and its entry commit together or
     * not at all: a refused entry refuses the change, and a process killed after the commit
     * has both. Synchronous and pure (the write may be rolled back and run again).
     */
    inTransaction(actor: OperatorActor, action: string, target: Record<string, unknown>): void {
      deps.audit.insertInOpenTransaction(rowOf(actor, action, target));
    },

    /** Newest first; `cursor` is the previous page's nextCursor. */
    async list(limit: number, cursor?: string): Promise<{ entries: AuditEntry[]; nextCursor: string | null }> {
      const rows = await deps.audit.page(limit + 1, cursor === undefined ? undefined : decodeIdCursor('u', cursor));
      const page = rows.slice(0, limit);
      return {
        entries: page.map((r) => ({ id: r.id, keyId: r.key_id, consoleUserId: r.console_user_id, actor: r.actor, action: r.action, target: JSON.parse(r.target_json) as Record<string, unknown>, createdAt: r.created_at })),
        nextCursor: rows.length > limit ? encodeIdCursor('u', page[page.length - 1]!.id) : null,
      };
    },
  };
}
export type AuditService = ReturnType<typeof createAuditService>;
