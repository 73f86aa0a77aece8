import { consoleUser } from '../console/helpers/console-client.js';
import { addVerifiedDomain } from './domain-fixtures.js';
import type { TestApp } from './test-app.js';

// The two tenants a wall test needs: team A is the test app's own team (its FULL key, t0.key),
// team B is made beside it the way the CLI makes one, with a key of its own. Tests that aim one
// team's key at the other's rows start here; what each team then holds is the test's own story.

/** A domain as GET /v1/domains/:id answers it once verified. */
export interface VerifiedDomain {
  id: number;
  name: string;
  status: 'SUCCESS';
  [field: string]: unknown;
}

export interface TeamHandle {
  teamId: number;
  /** The token of a FULL key of the team (team A: the app's own, t0.key). */
  key: string;
  /** The verified domains asked for, in the order asked (through the API, with this key). */
  domains: VerifiedDomain[];
}

export interface TwoTeamsOptions {
  a?: {
    /** Names team A adds and verifies, before team B's. */
    domains?: string[];
  };
  b?: {
    /** 'Team B' unless the test's story wants another name. */
    name?: string;
    /** Names team B adds and verifies with its key. */
    domains?: string[];
    /** A console user of team B, signed in with the console client's PASSWORD. */
    consoleUser?: string;
  };
}

/** Team A (the app's team) and a new team B, each with a key and the verified domains asked for. */
export async function twoTeams(t0: TestApp, opts: TwoTeamsOptions = {}): Promise<{ a: TeamHandle; b: TeamHandle }> {
  const app = t0.app;
  const teamB = await app.services.teams.create(opts.b?.name ?? 'Team B');
  const keyB = (await app.services.apiKeys.create(teamB, { name: 'b', permission: 'FULL' })).token;
  if (opts.b?.consoleUser) await consoleUser(app, opts.b.consoleUser, teamB);
  const verified = async (names: string[] | undefined, key: string): Promise<VerifiedDomain[]> => {
    const out: VerifiedDomain[] = [];
    for (const name of names ?? []) out.push(await addVerifiedDomain(t0, name, key));
    return out;
  };
  const a: TeamHandle = { teamId: t0.teamId, key: t0.key, domains: await verified(opts.a?.domains, t0.key) };
  const b: TeamHandle = { teamId: teamB, key: keyB, domains: await verified(opts.b?.domains, keyB) };
  return { a, b };
}
