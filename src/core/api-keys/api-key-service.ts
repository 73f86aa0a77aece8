import { AppError, badRequest, forbidden, notFound } from '../errors.js';
import { isIntId } from '../int-id.js';
import type { Clock } from '../../lib/clock.js';
import { newKeyToken, parseKeyToken, secretMatches } from './key-token.js';
import type { ApiKeysRepository, ApiKeyRow } from '../../store/repositories/api-keys-repository.js';
import type { AuditService, OperatorActor } from '../operators/audit-service.js';
import { createLastUsedThrottle } from './last-used-throttle.js';

export type Permission = 'FULL' | 'SENDING';

/** Who is calling: resolved once per request by authenticate(). */
export interface AuthContext {
  teamId: number;
  keyId: number;
  permission: Permission;
  /** A key bound to a domain sends only from it and sees only its emails, received mail, domain, webhooks, analytics and API keys. */
  domainId: number | null;
  /** The team's requests-per-second override, null for the configured default. */
  teamRateLimit: number | null;
}

export interface ApiKeyView {
  id: number;
  name: string;
  permission: Permission;
  domainId: number | null;
  partialKey: string;
  lastUsed: string | null;
  createdAt: string;
}


export interface ApiKeyServiceDeps {
  apiKeys: ApiKeysRepository;
  clock: Clock;
  /** Checks that a domain id belongs to the team (wired once domains exist). */
  domainBelongsToTeam?: (teamId: number, domainId: number) => Promise<boolean>;
  /** The operator audit log: an operator's change (the CLI's) and its entry commit together. */
  audit?: Pick<AuditService, 'inTransaction'>;
}

/** A key's name as stored: trimmed, and not empty (a team's key and an operator's). */
export function keyName(raw: string): string {
  const name = raw.trim();
  if (!name) throw badRequest('name: must not be empty');
  // the API's schema says the same; the console and the CLI reach this without it
  if (name.length > 200) throw badRequest('name: must be at most 200 characters');
  return name;
}

export function createApiKeyService(deps: ApiKeyServiceDeps) {
  const lastUsed = createLastUsedThrottle();

  /** The entry of an operator's change, written inside the change's transaction; nothing for a team's own change. */
  function audited<T>(by: OperatorActor | undefined, entry: (value: T) => [string, Record<string, unknown>]): ((value: T) => void) | undefined {
    if (!by) return undefined;
    if (!deps.audit) throw new Error('API key service: no audit log wired for operator changes');
    const audit = deps.audit;
    return (value) => audit.inTransaction(by, ...entry(value));
  }

  function toView(row: ApiKeyRow): ApiKeyView {
    return {
      id: row.id,
      name: row.name,
      permission: row.permission,
      domainId: row.domainId,
      partialKey: row.partialKey,
      lastUsed: row.lastUsedAt,
      createdAt: row.createdAt,
    };
  }

  /**
   * A key bound to a domain manages only keys bound to the same domain: it must not mint an
   * unrestricted key (that would undo its own restriction) nor see or revoke the keys of
   * other domains or of the whole team. `callerDomainId` is the calling key's domain.
   */
  function keyDomain(callerDomainId: number | null, requested: number | null | undefined): number | null {
    if (callerDomainId === null) return requested ?? null;
    if (requested === undefined) return callerDomainId;
    if (requested !== callerDomainId) throw forbidden(`domainId: this API key is restricted to domain ${callerDomainId} and can only create keys bound to it`);
    return requested;
  }

  return {
    /** With `by` (an operator's), its api-key.create audit entry commits with the key. */
    async create(teamId: number, input: { name: string; permission?: Permission; domainId?: number | null }, callerDomainId: number | null = null, by?: OperatorActor) {
      const name = keyName(input.name);
      const permission = input.permission ?? 'FULL';
      const domainId = keyDomain(callerDomainId, input.domainId);
      if (domainId !== null && deps.domainBelongsToTeam && !(await deps.domainBelongsToTeam(teamId, domainId))) {
        throw badRequest(`domainId: domain ${domainId} does not exist in this team`);
      }
      const { publicId, token, secretHash, partialKey } = newKeyToken();
      const createdAt = deps.clock.now().toISOString();
      const id = await deps.apiKeys.insert(
        { teamId, name, publicId, secretHash, partialKey, permission, domainId, createdAt },
        audited(by, (keyId: number) => ['api-key.create', { keyId, teamId, name, permission, domainId }]),
      );
      return { ...toView({ id, teamId, name, publicId, secretHash: '', partialKey, permission, domainId, lastUsedAt: null, createdAt }), token };
    },

    async list(teamId: number, callerDomainId: number | null = null): Promise<ApiKeyView[]> {
      return (await deps.apiKeys.listByTeam(teamId, callerDomainId ?? undefined)).map(toView);
    },

    async listAll(): Promise<(ApiKeyView & { teamId: number })[]> {
      return (await deps.apiKeys.listAll()).map((r) => ({ ...toView(r), teamId: r.teamId }));
    },

    /** Revocation deletes the row, so the very next request with the key fails (spec, Authentication 4). */
    async revoke(id: number, teamId: number, callerDomainId: number | null = null): Promise<void> {
      // Outside a domain-bound caller's reach a key is simply not there (404).
      if (!isIntId(id) || !(await deps.apiKeys.deleteInTeam(id, teamId, callerDomainId ?? undefined))) throw notFound(`API key ${id} not found`);
    },

    /** The operator's revocation of any team's key (the CLI), audited as `by`. */
    async revokeAnyTeam(id: number, by: OperatorActor): Promise<void> {
      const entry = audited<void>(by, () => ['api-key.revoke', { keyId: id }]);
      if (!isIntId(id) || !(await deps.apiKeys.deleteAnyTeam(id, entry))) throw notFound(`API key ${id} not found`);
    },

    async count(): Promise<number> {
      return deps.apiKeys.count();
    },

    /** Resolves a presented token, or throws UNAUTHORIZED. Compares hashes in constant time. */
    async authenticate(token: string | undefined): Promise<AuthContext> {
      if (!token) throw new AppError('UNAUTHORIZED', 'missing API key: send "Authorization: Bearer <key>"');
      const parsed = parseKeyToken(token);
      if (!parsed) throw new AppError('UNAUTHORIZED', 'invalid API key');
      const row = await deps.apiKeys.findForAuth(parsed.publicId);
      if (!secretMatches(parsed.secret, row?.secretHash) || !row) throw new AppError('UNAUTHORIZED', 'invalid API key');
      const now = deps.clock.nowMs();
      if (lastUsed.due(row.id, now)) {
        await deps.apiKeys.touch(row.id, new Date(now).toISOString());
      }
      return { teamId: row.teamId, keyId: row.id, permission: row.permission, domainId: row.domainId, teamRateLimit: row.teamRateLimit };
    },
  };
}
export type ApiKeyService = ReturnType<typeof createApiKeyService>;
