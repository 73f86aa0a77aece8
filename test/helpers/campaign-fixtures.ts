import type { MailWorld } from './mail-world.js';

// The steps campaign tests share: a contact book filled through the API, a campaign written
// with the test's defaults, reading it back, and running the due batches to the sink.

/** `world` is read at each call: a test file's world is made in its before hook, after this runs. */
export function campaignFixtures(world: () => MailWorld, defaults: () => Record<string, unknown>) {
  return {
    async book(name: string, contacts: Record<string, unknown>[], variables: string[] = []): Promise<string> {
      const w = world();
      const b = await w.t0.request('POST', '/v1/contactBooks', { body: { name, variables } });
      if (b.status !== 200) throw new Error(JSON.stringify(b.body));
      const bulk = await w.t0.request('POST', `/v1/contactBooks/${b.body.id}/contacts/bulk`, { body: contacts });
      if (bulk.status !== 200) throw new Error(JSON.stringify(bulk.body));
      return b.body.id as string;
    },
    async campaign(bookId: string, extra: Record<string, unknown> = {}) {
      const w = world();
      const res = await w.t0.request('POST', '/v1/campaigns', { body: { ...defaults(), contactBookId: bookId, ...extra } });
      if (res.status !== 200) throw new Error(JSON.stringify(res.body));
      return res.body;
    },
    get: async (id: string) => (await world().t0.request('GET', `/v1/campaigns/${id}`)).body,
    /** Runs every campaign batch due and waits until what they queued has been delivered. */
    run: async (): Promise<void> => {
      await world().t0.app.runCampaigns();
      await world().settle();
    },
  };
}
