// Campaign fan-out benchmark: filled in once campaigns exist (returns null until then).
export interface CampaignBenchResult {
  contacts: number;
  seconds: number;
  contactsQueuedPerSecond: number;
  peakRssMb: number;
}

export async function runCampaignBench(): Promise<CampaignBenchResult | null> {
  return null;
}
