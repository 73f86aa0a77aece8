import { randomBytes } from 'node:crypto';
import type { Clock } from '../../lib/clock.js';
import type { ConsoleUserRow, ConsoleUsersRepository } from '../../store/repositories/console-users-repository.js';
import { isUniqueViolation } from '../../store/store-errors.js';
import { addressKey, isValidAddress } from '../emails/addresses.js';
import { badRequest, notFound, notUnique } from '../errors.js';
import { isIntId } from '../int-id.js';
import type { AuditService, OperatorActor } from '../operators/audit-service.js';
import { dummyHash, hashPassword, PASSWORD_HASH_COST, verifyPassword } from './password-hash.js';

export type { ConsoleUserRow };

/** NIST SP 800-63B: at least 8 characters; we ask a little more of an admin console. */
export const MIN_PASSWORD_LENGTH = 10;
/** Long enough for any passphrase, short enough that hashing it costs nothing extra. */
export const MAX_PASSWORD_LENGTH = 256;

export interface ConsoleUserView {
  id: number;
  teamId: number;
  email: string;
  operator: boolean;
  lastLoginAt: string | null;
  createdAt: string;
}

export function userView(u: ConsoleUserRow): ConsoleUserView {
  return { id: u.id, teamId: u.team_id, email: u.email, operator: u.operator === 1, lastLoginAt: u.last_login_at, createdAt: u.created_at };
}

/** 20 characters from a 62-letter alphabet (~119 bits), printed once. */
function generatePassword(): string {
  return randomBytes(15).toString('base64url').replace(/[-_]/g, 'x');
}

/** 400 for a password too short or too long to be set. */
export function checkPassword(password: string): void {
  if (password.length < MIN_PASSWORD_LENGTH) throw badRequest(`password: must be at least ${MIN_PASSWORD_LENGTH} characters`);
  if (password.length > MAX_PASSWORD_LENGTH) throw badRequest(`password: must be at most ${MAX_PASSWORD_LENGTH} characters`);
}

/** A new user's address as stored (its key), 400 when it is no address. */
export function userEmail(raw: string): string {
  const email = addressKey(raw.trim());
  if (!isValidAddress(email)) throw badRequest(`email: "${raw}" is not a valid email address`);
  return email;
}

export interface UserServiceDeps {
  users: ConsoleUsersRepository;
  clock: Clock;
  teamExists(teamId: number): Promise<boolean>;
  /** After an operator's reset: the account's failed sign-ins stop counting (the guesser's password is gone). */
  onPasswordReset?(email: string): Promise<void>;
  /** The operator audit log: an operator's change and its entry commit together. */
  audit?: Pick<AuditService, 'inTransaction'>;
  /** log2 of scrypt's N for new passwords (AppOptions.passwordHashCost); PASSWORD_HASH_COST unless a test asks for less. */
  passwordHashCost?: number;
}

export function createUserService(deps: UserServiceDeps) {
  const { users, clock } = deps;
  const cost = deps.passwordHashCost ?? PASSWORD_HASH_COST;
  let unknownUserHash: Promise<string> | undefined;

  /** The entry of an operator's change, written inside the change's transaction; nothing for a change no operator made. */
  function audited<T>(by: OperatorActor | undefined, entry: (value: T) => [string, Record<string, unknown>]): ((value: T) => void) | undefined {
    if (!by) return undefined;
    if (!deps.audit) throw new Error('user service: no audit log wired for operator changes');
    const audit = deps.audit;
    return (value) => audit.inTransaction(by, ...entry(value));
  }

  async function find(idOrEmail: string): Promise<ConsoleUserRow> {
    // An id past the ids' range is no user (PostgreSQL would refuse the number itself).
    const u = /^\d+$/.test(idOrEmail) ? (isIntId(Number(idOrEmail)) ? await users.findById(Number(idOrEmail)) : undefined) : await users.findByEmail(addressKey(idOrEmail.trim()));
    if (!u) throw notFound(`console user ${idOrEmail} not found`);
    return u;
  }

  return {
    /** Creates a user; without a password one is generated and returned (shown once). With `by`, its console-user.create entry commits with it. */
    async create(input: { email: string; teamId: number; operator?: boolean; password?: string }, by?: OperatorActor): Promise<{ user: ConsoleUserView; password: string; generated: boolean }> {
      const email = userEmail(input.email);
      if (!(await deps.teamExists(input.teamId))) throw badRequest(`team: team ${input.teamId} not found`);
      const generated = input.password === undefined;
      const password = input.password ?? generatePassword();
      checkPassword(password);
      if (await users.findByEmail(email)) throw notUnique(`email: a console user ${email} already exists`);
      try {
        const row = await users.insert(
          { teamId: input.teamId, email, passwordHash: await hashPassword(password, cost), operator: input.operator ?? false, nowIso: clock.now().toISOString() },
          audited(by, (u: ConsoleUserRow) => ['console-user.create', { userId: u.id, email: u.email, teamId: u.team_id, operator: u.operator === 1 }]),
        );
        return { user: userView(row), password, generated };
      } catch (err) {
        if (isUniqueViolation(err, 'console_users')) throw notUnique(`email: a console user ${email} already exists`);
        throw err;
      }
    },

    async list(): Promise<ConsoleUserView[]> {
      return (await users.list()).map(userView);
    },

    async count(): Promise<number> {
      return users.count();
    },

    async get(idOrEmail: string): Promise<ConsoleUserView> {
      return userView(await find(idOrEmail));
    },

    /** Sets a new password (generated when none is given), ends every session of the user and lifts its sign-in lock. With `by`, audited. */
    async resetPassword(idOrEmail: string, password?: string, by?: OperatorActor): Promise<{ user: ConsoleUserView; password: string; generated: boolean }> {
      const u = await find(idOrEmail);
      const generated = password === undefined;
      const next = password ?? generatePassword();
      checkPassword(next);
      const entry = audited<void>(by, () => ['console-user.password-reset', { userId: u.id, email: u.email }]);
      if (!(await users.setPassword(u.id, await hashPassword(next, cost), clock.now().toISOString(), entry))) throw notFound(`console user ${idOrEmail} not found`);
      await deps.onPasswordReset?.(u.email);
      return { user: userView(u), password: next, generated };
    },

    /** A user changing its own password must prove the old one. */
    async changePassword(userId: number, current: string, next: string): Promise<void> {
      const u = await users.findById(userId);
      if (!u) throw notFound('console user not found');
      if (!(await verifyPassword(current, u.password_hash))) throw badRequest('currentPassword: is not your current password');
      checkPassword(next);
      await users.setPassword(u.id, await hashPassword(next, cost), clock.now().toISOString());
    },

    /** With `by`, its console-user.delete entry commits with the deletion. */
    async remove(idOrEmail: string, by?: OperatorActor): Promise<ConsoleUserView> {
      const u = await find(idOrEmail);
      if (!(await users.delete(u.id, audited<void>(by, () => ['console-user.delete', { userId: u.id, email: u.email }])))) throw notFound(`console user ${idOrEmail} not found`);
      return userView(u);
    },

    /** The user whose password this is, or null. Costs one scrypt whether or not the user exists. */
    async verifyCredentials(rawEmail: string, password: string): Promise<ConsoleUserView | null> {
      const email = addressKey(rawEmail.trim());
      const u = email && password.length <= MAX_PASSWORD_LENGTH ? await users.findByEmail(email) : undefined;
      unknownUserHash ??= dummyHash(cost);
      const ok = await verifyPassword(password, u?.password_hash ?? (await unknownUserHash));
      if (!u || !ok) return null;
      await users.touchLogin(u.id, clock.now().toISOString());
      return userView(u);
    },
  };
}
export type UserService = ReturnType<typeof createUserService>;
