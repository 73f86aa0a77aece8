import type { Clock } from '../../lib/clock.js';
import type { OperatorKeyRow, OperatorKeysRepository } from '../../store/repositories/operator-keys-repository.js';
import { AppError, notFound } from '../errors.js';
import { keyName } from '../api-keys/api-key-service.js';
import { createLastUsedThrottle } from '../api-keys/last-used-throttle.js';
import { newKeyToken, parseKeyToken, secretMatches } from '../api-keys/key-token.js';
import type { AuditService, OperatorActor } from './audit-service.js';

/*
 * Server-operator keys: the same `ph_<id>_<secret>` form as team keys, bound to no team. They
 * may call only the operator API (/admin/v1) and /metrics; team keys may not call those.
 */

export interface OperatorAuth {
  keyId: number;
  name: string;
}

export interface OperatorKeyView {
  id: number;
  name: string;
  partialKey: string;
  lastUsed: string | null;
  createdAt: string;
}

const view = (r: OperatorKeyRow): OperatorKeyView => ({ id: r.id, name: r.name, partialKey: r.partial_key, lastUsed: r.last_used_at, createdAt: r.created_at });

export interface OperatorKeyServiceDeps {
  keys: OperatorKeysRepository;
  clock: Clock;
  /** The operator audit log: an operator's change and its entry commit together. */
  audit?: Pick<AuditService, 'inTransaction'>;
}

export function createOperatorKeyService(deps: OperatorKeyServiceDeps) {
  /** The entry of an operator's change, written inside the change's transaction; nothing for a change no operator made. */
  function audited<T>(by: OperatorActor | undefined, entry: (value: T) => [string, Record<string, unknown>]): ((value: T) => void) | undefined {
    if (!by) return undefined;
    if (!deps.audit) throw new Error('operator key service: no audit log wired for operator changes');
    const audit = deps.audit;
    return (value) => audit.inTransaction(by, ...entry(value));
  }

  const lastUsed = createLastUsedThrottle();

  /** The row a token names, if its secret matches. */
  async function match(token: string | undefined): Promise<OperatorKeyRow | undefined> {
    const parsed = token ? parseKeyToken(token) : null;
    if (!parsed) return undefined;
    const row = await deps.keys.findByPublicId(parsed.publicId);
    return secretMatches(parsed.secret, row?.secret_hash) ? row : undefined;
  }

  return {
    /** With `by`, an operator's: its operator-key.create audit entry commits with the key. */
    async create(name: string, by?: OperatorActor): Promise<OperatorKeyView & { token: string }> {
      const trimmed = keyName(name);
      const { publicId, token, secretHash, partialKey } = newKeyToken();
      const createdAt = deps.clock.now().toISOString();
      const id = await deps.keys.insert(
        { name: trimmed, public_id: publicId, secret_hash: secretHash, partial_key: partialKey, created_at: createdAt },
        audited(by, (keyId: number) => ['operator-key.create', { keyId, name: trimmed }]),
      );
      return { id, name: trimmed, partialKey, lastUsed: null, createdAt, token };
    },

    async list(): Promise<OperatorKeyView[]> {
      return (await deps.keys.list()).map(view);
    },

    /** With `by`, an operator's: its operator-key.revoke audit entry commits with the revocation. */
    async revoke(id: number, by?: OperatorActor): Promise<void> {
      if (!(await deps.keys.delete(id, audited<void>(by, () => ['operator-key.revoke', { keyId: id }])))) throw notFound(`operator key ${id} not found`);
    },

    /** Resolves an operator key, or throws UNAUTHORIZED. */
    async authenticate(token: string | undefined): Promise<OperatorAuth> {
      if (!token) throw new AppError('UNAUTHORIZED', 'missing operator key: send "Authorization: Bearer <key>"');
      const row = await match(token);
      if (!row) throw new AppError('UNAUTHORIZED', 'invalid operator key');
      const now = deps.clock.nowMs();
      if (lastUsed.due(row.id, now)) {
        await deps.keys.touch(row.id, new Date(now).toISOString());
      }
      return { keyId: row.id, name: row.name };
    },

    /** Whether a token is a valid operator key (to answer 403 rather than 401 where it may not go). */
    async isOperatorKey(token: string | undefined): Promise<boolean> {
      return (await match(token)) !== undefined;
    },
  };
}
export type OperatorKeyService = ReturnType<typeof createOperatorKeyService>;
