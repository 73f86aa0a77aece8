import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../../lib/clock.js';
import type { ConsoleUsersRepository } from '../../store/repositories/console-users-repository.js';
import { userView, type ConsoleUserView } from './user-service.js';

// Console sessions (docs/console.md, Users and sessions). The cookie carries a random
// 256-bit token; the store keeps only its SHA-256 (the token has far too many bits to guess,
// so a fast hash is enough, as for API keys). A session ends on logout, after `idleMs`
// without a request, `absoluteMs` after sign-in whatever the activity, and when the user's
// password is reset or the user deleted.

/** Writing last-seen on every request would be a write per page view; once a minute is enough. */
const TOUCH_INTERVAL_MS = 60_000;

export interface SessionPolicy {
  idleMs: number;
  absoluteMs: number;
}

export interface ActiveSession {
  user: ConsoleUserView;
  /** Sent back in every form and header of a change; compared with checkCsrf. */
  csrfToken: string;
  expiresAtMs: number;
}

const sha256 = (token: string) => createHash('sha256').update(token).digest('hex');

export function createSessionService(deps: { users: ConsoleUsersRepository; clock: Clock; policy: SessionPolicy }) {
  const { users, clock, policy } = deps;

  return {
    policy,

    /** Starts a session for a signed-in user; returns the token for the cookie. */
    async create(userId: number): Promise<{ token: string; csrfToken: string }> {
      const now = clock.nowMs();
      // Expired sessions are swept here, at the rate people sign in, rather than by a timer.
      await users.deleteExpiredSessions(now - policy.idleMs, now - policy.absoluteMs);
      const token = randomBytes(32).toString('base64url');
      const csrfToken = randomBytes(24).toString('base64url');
      await users.insertSession({ token_hash: sha256(token), user_id: userId, csrf_token: csrfToken, created_at_ms: now, last_seen_ms: now });
      return { token, csrfToken };
    },

    /** The live session of a cookie token, or null (unknown, logged out, idle or too old). */
    async resolve(token: string | undefined): Promise<ActiveSession | null> {
      if (!token || !/^[A-Za-z0-9_-]{43}$/.test(token)) return null;
      const hash = sha256(token);
      const s = await users.findSession(hash);
      if (!s) return null;
      const now = clock.nowMs();
      if (now - s.last_seen_ms >= policy.idleMs || now - s.created_at_ms >= policy.absoluteMs || now < s.created_at_ms) {
        await users.deleteSession(hash);
        return null;
      }
      if (now - s.last_seen_ms >= TOUCH_INTERVAL_MS) await users.touchSession(hash, now);
      return {
        user: userView(s.user),
        csrfToken: s.csrf_token,
        expiresAtMs: Math.min(now + policy.idleMs, s.created_at_ms + policy.absoluteMs),
      };
    },

    async destroy(token: string | undefined): Promise<void> {
      if (token && /^[A-Za-z0-9_-]{43}$/.test(token)) await users.deleteSession(sha256(token));
    },
  };
}
export type SessionService = ReturnType<typeof createSessionService>;

/** Constant-time comparison of a presented CSRF token with the session's. */
export function csrfTokenMatches(expected: string, presented: string | undefined): boolean {
  if (!presented) return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(presented);
  return a.length === b.length && timingSafeEqual(a, b);
}
