import type { Clock } from '../../lib/clock.js';
import type { OperatorAuditRepository } from '../../store/repositories/operator-audit-repository.js';
import { decodeIdCursor, encodeIdCursor } from '../id-cursor.js';

/** Who took an operator action: a key, or the CLI on the server itself. */
export type OperatorActor = { keyId: number; name: string } | 'cli';

export interface AuditEntry {
  id: number;
  keyId: number | null;
  actor: string;
  action: string;
  target: Record<string, unknown>;
  createdAt: string;
}

export function createAuditService(deps: { audit: OperatorAuditRepository; clock: Clock }) {
  return {
    async record(actor: OperatorActor, action: string, target: Record<string, unknown>): Promise<void> {
      await deps.audit.insert({
        key_id: actor === 'cli' ? null : actor.keyId,
        actor: actor === 'cli' ? 'cli' : `key ${actor.keyId} (${actor.name})`,
        action,
        target_json: JSON.stringify(target),
        created_at: deps.clock.now().toISOString(),
      });
    },

    /** Newest first; `cursor` is the previous page's nextCursor. */
    async list(limit: number, cursor?: string): Promise<{ entries: AuditEntry[]; nextCursor: string | null }> {
      const rows = await deps.audit.page(limit + 1, cursor === undefined ? undefined : decodeIdCursor('u', cursor));
      const page = rows.slice(0, limit);
      return {
        entries: page.map((r) => ({ id: r.id, keyId: r.key_id, actor: r.actor, action: r.action, target: JSON.parse(r.target_json) as Record<string, unknown>, createdAt: r.created_at })),
        nextCursor: rows.length > limit ? encodeIdCursor('u', page[page.length - 1]!.id) : null,
      };
    },
  };
}
export type AuditService = ReturnType<typeof createAuditService>;
