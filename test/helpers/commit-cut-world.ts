import pg from 'pg';
import type { DeepPartial } from '../../src/config/load.js';
import type { Config } from '../../src/config/defaults.js';
import type { Clock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from './mail-world.js';
import { startCommitCutter, type CommitCutter } from './pg-commit-cutter.js';
import { createTestDatabase, dropTestDatabase } from './pg-databases.js';

/**
 * A mail world on a throwaway PostgreSQL database reached through the commit cutter
 * (pg-commit-cutter.ts), and a direct client to that database to look at what was committed.
 */
export interface CommitCutWorld {
  w: MailWorld;
  cutter: CommitCutter;
  /** Straight to the server, never cut. */
  client: pg.Client;
  close(): Promise<void>;
}

export async function startCommitCutWorld(clock: Clock, overrides: DeepPartial<Config>): Promise<CommitCutWorld> {
  const url = await createTestDatabase();
  const cutter = await startCommitCutter(url);
  const w = await startMailWorld({ clock, overrides: { ...overrides, store: { url: cutter.url } } });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return {
    w,
    cutter,
    client,
    async close() {
      await client.end();
      await w.close();
      await cutter.close();
      await dropTestDatabase(url);
    },
  };
}
