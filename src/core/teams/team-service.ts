import { badRequest } from '../errors.js';
import { isIntId } from '../int-id.js';
import type { Clock } from '../../lib/clock.js';
import type { TeamsRepository } from '../../store/repositories/teams-repository.js';
import type { AuditService, OperatorActor } from '../operators/audit-service.js';

export interface TeamServiceDeps {
  teams: TeamsRepository;
  clock: Clock;
  /** Called once for every new team (seeds the starter templates when that feature is wired). */
  onTeamCreated?: (teamId: number) => Promise<void>;
  /** Whether an egress pool of that name is configured (outbound.pools). */
  isPool?: (name: string) => boolean;
  /** The operator audit log: an operator's change and its entry commit together. */
  audit?: Pick<AuditService, 'inTransaction'>;
}

const MAX_TEAM_NAME = 200;

export function teamName(name: string): string {
  const trimmed = name.trim();
  if (!trimmed) throw badRequest('name: must not be empty');
  if (trimmed.length > MAX_TEAM_NAME) throw badRequest(`name: at most ${MAX_TEAM_NAME} characters`);
  return trimmed;
}

export function rateLimitOf(rateLimit: number | null): number | null {
  if (rateLimit !== null && (!Number.isInteger(rateLimit) || rateLimit < 1 || rateLimit > 1_000_000)) throw badRequest('rateLimit: must be a positive integer (at most 1000000), or null for the default');
  return rateLimit;
}

/** An egress pool name to store: null for the default pool ("default" too), 400 for one not configured. */
export function poolOf(pool: string | null, isPool: ((name: string) => boolean) | undefined): string | null {
  if (pool === null || pool === 'default') return null;
  if (!isPool?.(pool)) throw badRequest(`pool: no egress pool named "${pool}" is configured (outbound.pools)`);
  return pool;
}

export function createTeamService(deps: TeamServiceDeps) {
  /** The entry of an operator's change, written inside the change's transaction; nothing for a change no operator made. */
  function audited<T>(by: OperatorActor | undefined, entry: (value: T) => [string, Record<string, unknown>]): ((value: T) => void) | undefined {
    if (!by) return undefined;
    if (!deps.audit) throw new Error('team service: no audit log wired for operator changes');
    const audit = deps.audit;
    return (value) => audit.inTransaction(by, ...entry(value));
  }

  /**
   * Renames, sets the rate limit (null: the configured default) and/or the egress pool (null:
   * the default); undefined when there is no such team. With `by`, an operator's change: its
   * team.update audit entry (the values as stored) commits with it.
   */
  async function update(id: number, changes: { name?: string; rateLimit?: number | null; pool?: string | null }, by?: OperatorActor) {
    const clean: { name?: string; rateLimit?: number | null; pool?: string | null } = {};
    if (changes.name !== undefined) clean.name = teamName(changes.name);
    if (changes.rateLimit !== undefined) clean.rateLimit = rateLimitOf(changes.rateLimit);
    if (changes.pool !== undefined) clean.pool = poolOf(changes.pool, deps.isPool);
    if (!isIntId(id)) return undefined;
    return deps.teams.update(id, clean, deps.clock.now().toISOString(), audited(by, (team) => ['team.update', { teamId: team.id, ...clean }]));
  }
  return {
    /** With `by`, an operator's: its team.create audit entry (the name as stored) commits with the team. */
    async create(name: string, rateLimit: number | null = null, by?: OperatorActor): Promise<number> {
      const trimmed = teamName(name);
      rateLimitOf(rateLimit);
      const id = await deps.teams.insert(trimmed, deps.clock.now().toISOString(), rateLimit, audited(by, (team) => ['team.create', { teamId: team.id, name: team.name }]));
      await deps.onTeamCreated?.(id);
      return id;
    },
    async get(id: number) {
      return isIntId(id) ? deps.teams.findById(id) : undefined;
    },
    async list() {
      return deps.teams.list();
    },
    update,
    async setRateLimit(id: number, rateLimit: number | null, by?: OperatorActor): Promise<boolean> {
      return (await update(id, { rateLimit }, by)) !== undefined;
    },
  };
}
export type TeamService = ReturnType<typeof createTeamService>;
