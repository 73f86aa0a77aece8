import type { CampaignRef } from '../../store/repositories/segments-repository.js';

/** The campaigns a refused delete names: `campaign cp_1 ("Spring sale", SCHEDULED)`, comma-separated. */
export function describeCampaigns(refs: CampaignRef[]): string {
  const named = refs.map((c) => `${c.id} (${JSON.stringify(c.name)}, ${c.status})`).join(', ');
  return `${refs.length === 1 ? 'campaign' : 'campaigns'} ${named}`;
}
