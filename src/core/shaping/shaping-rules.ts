import { parseDuration, parseRate, type MessageRate } from '../../lib/rate-spec.js';
import { asciiDomain } from '../emails/addresses.js';

/*
 * Traffic-shaping rules (docs/outbound.md, "Traffic shaping"): which rollup a destination
 * belongs to and what each (source, rollup) may do. A rule names a recipient domain
 * (`domain`) or an MX host suffix (`mx`: every domain whose primary MX is under it shares one
 * budget, KumoMTA's MX rollup), and optionally one egress source. Posthorn's built-in rules for
 * the large providers come first; the operator's rules override them field by field, and a
 * rule for one source overrides the rule for every source.
 */

/** A rule as configured ([[outbound.shaping]]); the spellings are checked by the config schema. */
export interface ShapingRuleSpec {
  domain?: string;
  mx?: string;
  source?: string;
  connectionLimit?: number;
  messageRate?: string;
  maxDeliveriesPerConnection?: number;
  maxRecipientsPerTransaction?: number;
  idleTimeout?: string;
}

/** What one (source, rollup) may do; an absent field does not limit anything. */
export interface ShapingLimits {
  connectionLimit?: number;
  messageRate?: MessageRate;
  maxDeliveriesPerConnection?: number;
  maxRecipientsPerTransaction?: number;
  idleTimeoutMs?: number;
}

/**
 * Built-in rules. The providers publish guidance, not numbers (Google's and Yahoo's sender
 * requirements, Microsoft's and Apple's postmaster pages all say: few connections, ramp up
 * slowly, back off when told): these are conservative values in that spirit, in line with what
 * KumoMTA ships for the same rollups. No built-in message rate: the volume of a new address is
 * the warm-up's business, and an established one should not be slowed by a guess.
 */
export const BUILTIN_SHAPING: readonly ShapingRuleSpec[] = [
  // Gmail and Google Workspace: few, long-lived connections.
  { mx: 'google.com', connectionLimit: 10, maxDeliveriesPerConnection: 50 },
  { mx: 'googlemail.com', connectionLimit: 10, maxDeliveriesPerConnection: 50 },
  // Outlook.com and Microsoft 365 (*.mail.protection.outlook.com).
  { mx: 'outlook.com', connectionLimit: 8, maxDeliveriesPerConnection: 100 },
  { mx: 'hotmail.com', connectionLimit: 8, maxDeliveriesPerConnection: 100 },
  // Yahoo and AOL: few messages per connection.
  { mx: 'yahoodns.net', connectionLimit: 5, maxDeliveriesPerConnection: 20 },
  // iCloud.
  { mx: 'icloud.com', connectionLimit: 5, maxDeliveriesPerConnection: 20 },
];

export type ReplyAction = 'suspend' | 'throttle';

/** A reply rule as configured ([[outbound.replyRules]]). */
export interface ReplyRuleSpec {
  /** Only for destinations of this rollup (an MX suffix or a domain); absent: any. */
  rollup?: string;
  code?: number;
  /** Prefix of the enhanced status code (RFC 3463), "4.7.28" or "4.7". */
  enhancedCode?: string;
  /** A regular expression (case-insensitive) the reply text must match. */
  text?: string;
  action: ReplyAction;
  /** How long the suspension or throttle lasts ("30m", "4h"). */
  duration: string;
  /** With throttle: the rate for that time. */
  messageRate?: string;
  /** Shown with the hold; absent: the reply itself. */
  reason?: string;
}

/**
 * Built-in reply rules, from the providers' documented deferrals. First match wins; the
 * operator's rules are tried before these.
 */
export const BUILTIN_REPLY_RULES: readonly ReplyRuleSpec[] = [
  // Gmail: "421 4.7.28 ... unusual rate of unsolicited mail originating from your IP address".
  { enhancedCode: '4.7.28', action: 'suspend', duration: '1h', reason: 'Gmail: unusual rate of unsolicited mail from this address (4.7.28)' },
  // Gmail: "421 4.7.0 ... our system has detected an unusual rate" and "4.7.26/27" rate limits.
  { rollup: 'google.com', text: 'unusual rate|rate limit|try again later', action: 'throttle', messageRate: '30/min', duration: '1h', reason: 'Gmail: rate limited' },
  // Microsoft: "451 4.7.650 The mail server [x] has been temporarily rate limited due to IP reputation".
  { enhancedCode: '4.7.650', action: 'throttle', messageRate: '10/min', duration: '1h', reason: 'Microsoft: temporarily rate limited for IP reputation (4.7.650)' },
  // Microsoft: "451 4.7.500 Server busy. Please try again later" (S3150 and similar).
  { enhancedCode: '4.7.500', action: 'suspend', duration: '15m', reason: 'Microsoft: server busy (4.7.500)' },
  // Yahoo: "421 4.7.0 [TSS04] Messages from x temporarily deferred due to unexpected volume or user complaints".
  { text: '\\[?TS(S0[1-9]|0[1-9])\\]?', action: 'suspend', duration: '1h', reason: 'Yahoo: temporarily deferred for volume or complaints (TSS04)' },
  // Apple iCloud: "421 4.7.0 [CS01] Message rejected due to local policy" and "too much mail".
  { rollup: 'icloud.com', text: '\\[CS0[1-9]\\]|too much mail', action: 'suspend', duration: '30m', reason: 'iCloud: deferred by local policy' },
  // Anyone: "421 Too many connections", "421 4.7.0 Rate limit exceeded", "slow down"; Exchange:
  // "421 4.3.2 The maximum number of concurrent server connections has exceeded a limit".
  { code: 421, text: 'too many (connections|concurrent|messages|sessions)|concurrent (server )?connections|rate.?limit|throttl|slow down|too fast', action: 'throttle', messageRate: '30/min', duration: '15m', reason: 'rate limited by the destination' },
];

/** A reply rule ready to match. */
export interface CompiledReplyRule {
  rollup?: string;
  code?: number;
  enhancedCode?: string;
  text?: RegExp;
  action: ReplyAction;
  durationMs: number;
  messageRate?: MessageRate;
  reason?: string;
}

export function compileReplyRule(r: ReplyRuleSpec, where: string): CompiledReplyRule {
  const durationMs = parseDuration(r.duration);
  if (durationMs === undefined) throw new Error(`${where}.duration: not a duration such as "30m"`);
  const rate = r.messageRate === undefined ? undefined : parseRate(r.messageRate);
  if (r.messageRate !== undefined && !rate) throw new Error(`${where}.messageRate: not a rate such as "10/min"`);
  if (r.action === 'throttle' && !rate) throw new Error(`${where}.messageRate: a throttle needs a rate`);
  return {
    ...(r.rollup ? { rollup: ruleName(r.rollup) } : {}),
    ...(r.code !== undefined ? { code: r.code } : {}),
    ...(r.enhancedCode ? { enhancedCode: r.enhancedCode } : {}),
    ...(r.text ? { text: new RegExp(r.text, 'i') } : {}),
    action: r.action,
    durationMs,
    ...(rate ? { messageRate: rate } : {}),
    ...(r.reason ? { reason: r.reason } : {}),
  };
}

const ENHANCED = /(?:^|\s)([245]\.\d{1,3}\.\d{1,3})(?![\d.]*\d)/;

/** The first rule a reply matches, if any. */
export function matchReply(rules: readonly CompiledReplyRule[], rollup: string, code: number | undefined, text: string): CompiledReplyRule | undefined {
  const enhanced = ENHANCED.exec(text)?.[1];
  for (const r of rules) {
    if (r.rollup !== undefined && r.rollup !== rollup) continue;
    if (r.code !== undefined && r.code !== code) continue;
    if (r.enhancedCode !== undefined && !(enhanced !== undefined && (enhanced === r.enhancedCode || enhanced.startsWith(`${r.enhancedCode}.`)))) continue;
    if (r.text && !r.text.test(text)) continue;
    return r;
  }
  return undefined;
}

const endsWithLabel = (host: string, suffix: string) => host === suffix || host.endsWith(`.${suffix}`);

/** A rule's domain or MX suffix as DNS has it ("Bücher.example" is "xn--bcher-kva.example"). */
function ruleName(name: string): string {
  return asciiDomain(name) || name.toLowerCase();
}

/** The rollup a shaping rule's mail is counted in: its domain, or its MX suffix without outer dots, as DNS has it. */
export function ruleRollup(r: Pick<ShapingRuleSpec, 'domain' | 'mx'>): string {
  return r.domain ? ruleName(r.domain) : ruleName((r.mx ?? '').replace(/^\.+|\.+$/g, ''));
}

/** Resolves rollups and the limits of each (source, rollup), cached. */
export class ShapingRules {
  private readonly domainRules = new Map<string, ShapingRuleSpec[]>();
  /** MX suffixes with rules, longest first. */
  private readonly mxSuffixes: string[] = [];
  private readonly mxRules = new Map<string, ShapingRuleSpec[]>();
  private readonly limitsCache = new Map<string, ShapingLimits>();
  private readonly rollupCache = new Map<string, string>();

  constructor(rules: readonly ShapingRuleSpec[]) {
    for (const r of rules) {
      // Rollups are compared with stored recipient domains and MX names: lowercased, A-labels.
      if (r.domain) push(this.domainRules, ruleRollup(r), r);
      else if (r.mx) push(this.mxRules, ruleRollup(r), r);
    }
    this.mxSuffixes = [...this.mxRules.keys()].sort((a, b) => b.length - a.length);
  }

  /**
   * The rollup of a destination: the recipient domain when a rule names it, else the longest
   * MX suffix with rules that the primary MX host is under, else the recipient domain itself.
   */
  rollupOf(rcptDomain: string, mxHost: string | undefined): string {
    const cacheKey = `${rcptDomain}\u0000${mxHost ?? ''}`;
    let rollup = this.rollupCache.get(cacheKey);
    if (rollup === undefined) {
      rollup = rcptDomain;
      if (!this.domainRules.has(rcptDomain) && mxHost) {
        const mx = mxHost.toLowerCase().replace(/\.$/, '');
        rollup = this.mxSuffixes.find((s) => endsWithLabel(mx, s)) ?? rcptDomain;
      }
      if (this.rollupCache.size > 50_000) this.rollupCache.clear();
      this.rollupCache.set(cacheKey, rollup);
    }
    return rollup;
  }

  /** The limits of a (source, rollup): every rule for the rollup, then those for the source. */
  limits(source: string, rollup: string): ShapingLimits {
    const cacheKey = `${source}\u0000${rollup}`;
    let limits = this.limitsCache.get(cacheKey);
    if (!limits) {
      const rules = this.domainRules.get(rollup) ?? this.mxRules.get(rollup) ?? [];
      limits = {};
      for (const r of [...rules.filter((x) => !x.source), ...rules.filter((x) => x.source === source)]) {
        if (r.connectionLimit !== undefined) limits.connectionLimit = r.connectionLimit;
        if (r.messageRate !== undefined) limits.messageRate = parseRate(r.messageRate);
        if (r.maxDeliveriesPerConnection !== undefined) limits.maxDeliveriesPerConnection = r.maxDeliveriesPerConnection;
        if (r.maxRecipientsPerTransaction !== undefined) limits.maxRecipientsPerTransaction = r.maxRecipientsPerTransaction;
        if (r.idleTimeout !== undefined) limits.idleTimeoutMs = parseDuration(r.idleTimeout);
      }
      if (this.limitsCache.size > 50_000) this.limitsCache.clear();
      this.limitsCache.set(cacheKey, limits);
    }
    return limits;
  }
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
