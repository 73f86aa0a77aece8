import { createHash } from 'node:crypto';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import { canonicalJson } from '../../lib/canonical-json.js';
import { randomString } from '../../lib/ids.js';
import type { EmailsRepository } from '../../store/repositories/emails-repository.js';
import type { IdempotencyRepository } from '../../store/repositories/idempotency-repository.js';
import { badRequest, forbidden, notUnique } from '../errors.js';

// The spec's Idempotency-Key for sends (rule 4): a key claims the request, its response is kept
// with the accepted email in one transaction, and a failed request gives its claim up.

/** Idempotency entries live 24 hours (spec rule 4). */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * Giving up a failed request's idempotency key: tried before the request is answered, again after
 * each of these pauses (ms; a cut connection's pool hands out its other dead sessions first),
 * then in the background after each of the longer ones.
 */
const KEY_RELEASE_NOW_PAUSES_MS = [50, 200];
const KEY_RELEASE_PAUSES_MS = [1000, 2000, 5000, 10_000, 30_000, 60_000, 60_000, 60_000];

/** Who sends: the team, and the key's domain restriction (a replay shows only its own domain's). */
export interface IdempotencyCaller {
  teamId: number;
  domainId: number | null;
}

/** The request's key, if any, and its body as received (hashed canonically). */
export interface IdempotencyRequest {
  idempotencyKey?: string;
  rawBody?: unknown;
}

export interface SendIdempotencyDeps {
  keys: IdempotencyRepository;
  emails: Pick<EmailsRepository, 'findHeadAnyTeamFast'>;
  clock: Clock;
  logger?: Logger;
}

export function createSendIdempotency(deps: SendIdempotencyDeps) {
  /**
   * Runs fn under the spec's idempotency rules: same key + same body replays the stored
   * response; another body or a request still in flight is 409 NOT_UNIQUE.
   */
  async function idempotent<T>(ctx: IdempotencyCaller, opts: IdempotencyRequest, fn: (complete: { teamId: number; key: string } | undefined) => Promise<T>): Promise<T> {
    const key = opts.idempotencyKey;
    if (key === undefined) return fn(undefined);
    if (key.length < 1 || key.length > 256) throw badRequest('Idempotency-Key: must be 1 to 256 characters');
    const bodyHash = createHash('sha256').update(canonicalJson(opts.rawBody ?? null)).digest('hex');
    // This request's claim of the key: a failure may leave the claim's fate unknown (the
    // connection was cut as it committed), and giving it up must not take another request's.
    const token = randomString(16);
    let begin: Awaited<ReturnType<IdempotencyRepository['begin']>>;
    try {
      begin = await deps.keys.begin(ctx.teamId, key, bodyHash, deps.clock.nowMs(), IDEMPOTENCY_TTL_MS, token);
    } catch (err) {
      await giveUpKey(ctx.teamId, key, token);
      throw err;
    }
    if (begin.kind === 'replay') {
      const response = JSON.parse(begin.responseJson) as T;
      // Keys are the team's: a key bound to a domain gets a replay only of sends from its own
      // domain. Another domain's is refused as the same request without a key would be, and
      // its email ids stay unseen.
      if (ctx.domainId !== null) {
        const r = response as { emailId?: string; data?: { emailId: string }[] };
        const ids = r.data ? r.data.map((d) => d.emailId) : r.emailId ? [r.emailId] : [];
        for (const id of ids) {
          const head = await deps.emails.findHeadAnyTeamFast(id); // without the body, which may be large
          if (head && head.team_id === ctx.teamId && head.domain_id !== ctx.domainId) throw forbidden(`this API key may only send from domain ${ctx.domainId}`);
        }
      }
      return response;
    }
    if (begin.kind === 'conflict') {
      throw notUnique(
        begin.reason === 'in_flight'
          ? 'a request with this Idempotency-Key is still in progress; retry later'
          : 'this Idempotency-Key was already used with a different request body',
      );
    }
    try {
      return await fn({ teamId: ctx.teamId, key });
    } catch (err) {
      await giveUpKey(ctx.teamId, key, token);
      throw err;
    }
  }

  /**
   * Gives up a failed request's claim of its key, so the client's retry can send. A store that
   * failed the request may fail this too (a cut connection: the pool opens a new one for the
   * next try); left in flight, the key would answer 409 until the process restarts. Tried
   * again after short pauses before the request is answered, then in the background with a
   * growing pause; the request's own error is what its client gets.
   */
  async function giveUpKey(teamId: number, key: string, token: string): Promise<void> {
    const attempt = () => deps.keys.abandon(teamId, key, token).then(() => true, () => false);
    if (await attempt()) return;
    for (const pauseMs of KEY_RELEASE_NOW_PAUSES_MS) {
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
      if (await attempt()) return;
    }
    deps.logger?.warn({ event: 'idempotency.release_failed', teamId }, 'an Idempotency-Key of a failed request could not be given up; retrying in the background');
    void (async () => {
      for (const pauseMs of KEY_RELEASE_PAUSES_MS) {
        await new Promise((resolve) => setTimeout(resolve, pauseMs).unref());
        if (await attempt()) return;
      }
    })();
  }

  return { idempotent };
}
