import type { BusEvent } from '../events.js';

// Opens and clicks made by machines rather than people: privacy proxies that fetch every image
// when a message arrives (Apple Mail Privacy Protection) and link scanners that follow every
// link at delivery (Microsoft Defender Safe Links, Mimecast, Proofpoint, Barracuda). The hit is
// still recorded; it is flagged, from evidence in hand (no lookups), and each rule is meant to
// be wrong in the direction of "human": a person's open is never hidden by a guess.

export type MachineReason = 'network' | 'scanner_user_agent' | 'no_user_agent' | 'soon_after_delivery' | 'link_burst';

export interface MachineVerdict {
  machine: boolean;
  machineReason: MachineReason | null;
}

/**
 * User agents that only machines send, matched case-insensitively as substrings, except Apple's
 * proxy, whose user agent is exactly "Mozilla/5.0" (every browser and mail client writes more).
 * Gmail's GoogleImageProxy is not here: it fetches when the reader opens the message. Scanners
 * that pose as a browser are caught by the timing rules instead, or by the networks the operator
 * lists (tracking.machineNetworks).
 */
const APPLE_PRIVACY_PROXY = 'mozilla/5.0';
export const MACHINE_USER_AGENT_TOKENS = [
  'mimecast',
  'proofpoint',
  'barracuda',
  'safelinks', // Microsoft Defender for Office 365 when it names itself
  'headlesschrome', // sandbox detonation of links
  'python-requests',
  'go-http-client',
  'curl/',
  'wget/',
  'libwww-perl',
] as const;

/** Two different links of one email followed within this many milliseconds: the second is a scanner's. */
export const LINK_BURST_MS = 2_000;

export function isMachineUserAgent(userAgent: string): boolean {
  const ua = userAgent.trim().toLowerCase();
  return ua === APPLE_PRIVACY_PROXY || MACHINE_USER_AGENT_TOKENS.some((t) => ua.includes(t));
}

export interface HitEvidence {
  userAgent: string | null;
  /** Whether the client address is in tracking.machineNetworks (a gateway's own ranges, named by the operator). */
  fromMachineNetwork?: boolean;
  nowMs: number;
  /** The email's latest DELIVERED event at or before now, if any. */
  deliveredAtMs: number | null;
  /** How soon after delivery a hit counts as a machine's (tracking.machineWindowSeconds, in ms; 0 turns the rule off). */
  windowMs: number;
  /** Clicks only: whether another link of the email was followed within LINK_BURST_MS before this one. */
  otherLinkJustClicked?: boolean;
}

export function classifyHit(e: HitEvidence): MachineVerdict {
  const machine = (machineReason: MachineReason): MachineVerdict => ({ machine: true, machineReason });
  // First: the operator's word for where a gateway fetches from, whatever user agent it poses with.
  if (e.fromMachineNetwork) return machine('network');
  if (e.userAgent !== null && e.userAgent.trim() !== '' && isMachineUserAgent(e.userAgent)) return machine('scanner_user_agent');
  // Every mail client and browser sends one; scripts and some scanners do not.
  if (e.userAgent === null || e.userAgent.trim() === '') return machine('no_user_agent');
  if (e.deliveredAtMs !== null && e.windowMs > 0) {
    const after = e.nowMs - e.deliveredAtMs;
    if (after >= 0 && after <= e.windowMs) return machine('soon_after_delivery');
  }
  if (e.otherLinkJustClicked) return machine('link_burst');
  return { machine: false, machineReason: null };
}

/** Whether an email.opened or email.clicked event is flagged as a machine's (its open or click data). */
export function isMachineHit(event: BusEvent): boolean {
  const hit = event.type === 'email.opened' ? event.data.open : event.type === 'email.clicked' ? event.data.click : undefined;
  return (hit as { machine?: unknown } | undefined)?.machine === true;
}
