import { badRequest } from '../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { TeamsRepository } from '../../store/repositories/teams-repository.js';

export interface TeamServiceDeps {
  teams: TeamsRepository;
  clock: Clock;
  /** Called once for every new team (seeds the starter templates when that feature is wired). */
  onTeamCreated?: (teamId: number) => Promise<void>;
}

export function createTeamService(deps: TeamServiceDeps) {
  return {
    async create(name: string, rateLimit: number | null = null): Promise<number> {
      const trimmed = name.trim();
      if (!trimmed) throw badRequest('name: must not be empty');
      if (trimmed.length > 200) throw badRequest('name: at most 200 characters');
      if (rateLimit !== null && (!Number.isInteger(rateLimit) || rateLimit < 1)) throw badRequest('rateLimit: must be a positive integer');
      const id = await deps.teams.insert(trimmed, deps.clock.now().toISOString(), rateLimit);
      await deps.onTeamCreated?.(id);
      return id;
    },
    async get(id: number) {
      return deps.teams.findById(id);
    },
    async list() {
      return deps.teams.list();
    },
    async setRateLimit(id: number, rateLimit: number | null): Promise<boolean> {
      if (rateLimit !== null && (!Number.isInteger(rateLimit) || rateLimit < 1)) throw badRequest('rateLimit: must be a positive integer');
      return deps.teams.setRateLimit(id, rateLimit, deps.clock.now().toISOString());
    },
    async rename(id: number, name: string): Promise<boolean> {
      const trimmed = name.trim();
      if (!trimmed) throw badRequest('name: must not be empty');
      if (trimmed.length > 200) throw badRequest('name: at most 200 characters');
      return deps.teams.rename(id, trimmed, deps.clock.now().toISOString());
    },
  };
}
export type TeamService = ReturnType<typeof createTeamService>;
