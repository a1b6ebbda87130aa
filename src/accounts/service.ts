import crypto from 'node:crypto';
import { and, asc, count, eq, isNull, sql } from 'drizzle-orm';
import { v7 as uuidv7 } from 'uuid';
import { NotFoundError } from '../errors.js';
import { isUuid } from '../http-kit/pagination.js';
import type { Db } from '../store/db.js';
import { validateAccountName } from './names.js';
import { createPrincipalCache, type Principal, TOKEN_REVOKED_CHANNEL } from './principal-cache.js';
import { accounts, apiTokens } from './schema.js';

export interface Account {
  id: string;
  name: string;
  createdAt: Date;
}

export interface TokenInfo {
  id: string;
  accountId: string;
  accountName: string;
  prefix: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

export interface IssuedToken {
  /** The secret itself; it is not stored and cannot be shown again. */
  token: string;
  info: TokenInfo;
}

export type { Principal } from './principal-cache.js';

export const DEFAULT_ACCOUNT = 'default';
const TOKEN_PREFIX = 'lh_';
const TOKEN_PATTERN = /^lh_[A-Za-z0-9_-]{32}$/;
// Bootstrap runs once per database even when several processes start together.
const BOOTSTRAP_LOCK_KEY = 7_461_002;
// Recording last use on every request would turn reads into writes; once a minute is enough.
const LAST_USED_RESOLUTION_MS = 60_000;

export function hashToken(token: string): string {
  // One-shot, cheaper than createHash, and paid by every authenticated request.
  return crypto.hash('sha256', token, 'hex');
}

function newToken(): string {
  return TOKEN_PREFIX + crypto.randomBytes(24).toString('base64url');
}

// The rule lives apart so that the command line can check a name without loading the service.
export { validateAccountName };

export function createAccounts(deps: {
  db: Db;
  now?: () => Date;
  /** How long a token's principal is served from memory; 0 reads the database every time. */
  principalCacheTtlMs?: number;
}) {
  const { db } = deps;
  const now = deps.now ?? (() => new Date());
  const lastUsedWritten = new Map<string, number>();
  const principals = createPrincipalCache({
    ttlMs: deps.principalCacheTtlMs ?? 1_000,
    now: () => now().getTime(),
  });

  async function recordUse(principal: Principal): Promise<void> {
    const at = now();
    const last = lastUsedWritten.get(principal.tokenId) ?? 0;
    if (at.getTime() - last < LAST_USED_RESOLUTION_MS) return;
    lastUsedWritten.set(principal.tokenId, at.getTime());
    await db.update(apiTokens).set({ lastUsedAt: at }).where(eq(apiTokens.id, principal.tokenId));
  }

  async function ensureAccount(tx: Db, name: string): Promise<Account> {
    validateAccountName(name);
    await tx.insert(accounts).values({ id: uuidv7(), name, createdAt: now() }).onConflictDoNothing();
    const [row] = await tx.select().from(accounts).where(eq(accounts.name, name));
    if (!row) throw new Error(`account ${name} vanished`);
    return row;
  }

  async function insertToken(tx: Db, account: Account): Promise<IssuedToken> {
    const token = newToken();
    const row = {
      id: uuidv7(),
      accountId: account.id,
      tokenHash: hashToken(token),
      prefix: token.slice(0, 10),
      createdAt: now(),
    };
    await tx.insert(apiTokens).values(row);
    return {
      token,
      info: {
        id: row.id,
        accountId: account.id,
        accountName: account.name,
        prefix: row.prefix,
        createdAt: row.createdAt,
        lastUsedAt: null,
        revokedAt: null,
      },
    };
  }

  return {
    /** Issues a token for `accountName`, creating the account if it does not exist yet. */
    async issueToken(accountName: string = DEFAULT_ACCOUNT): Promise<IssuedToken> {
      return db.transaction(async (tx) => insertToken(tx, await ensureAccount(tx, accountName)));
    },

    async listTokens(): Promise<TokenInfo[]> {
      return db
        .select({
          id: apiTokens.id,
          accountId: apiTokens.accountId,
          accountName: accounts.name,
          prefix: apiTokens.prefix,
          createdAt: apiTokens.createdAt,
          lastUsedAt: apiTokens.lastUsedAt,
          revokedAt: apiTokens.revokedAt,
        })
        .from(apiTokens)
        .innerJoin(accounts, eq(accounts.id, apiTokens.accountId))
        .orderBy(asc(apiTokens.createdAt), asc(apiTokens.id));
    },

    /** Revokes a token at once; revoking it again is harmless. */
    async revokeToken(id: string): Promise<TokenInfo> {
      if (!isUuid(id)) {
        throw new NotFoundError(`No token with id ${id}`);
      }
      await db.transaction(async (tx) => {
        await tx
          .update(apiTokens)
          .set({ revokedAt: now() })
          .where(and(eq(apiTokens.id, id), isNull(apiTokens.revokedAt)));
        // Other processes drop the token from their caches when this commits.
        await tx.execute(sql`SELECT pg_notify(${TOKEN_REVOKED_CHANNEL}, ${id})`);
      });
      principals.forgetToken(id);
      const [info] = (await this.listTokens()).filter((t) => t.id === id);
      if (!info) throw new NotFoundError(`No token with id ${id}`);
      return info;
    },

    /** The account a presented token belongs to, or undefined for a malformed, unknown or revoked one. */
    async authenticate(token: string): Promise<Principal | undefined> {
      if (!TOKEN_PATTERN.test(token)) return undefined;
      const tokenHash = hashToken(token);
      let principal = principals.get(tokenHash);
      if (!principal) {
        const generation = principals.generation();
        [principal] = await db
          .select({ tokenId: apiTokens.id, accountId: apiTokens.accountId })
          .from(apiTokens)
          .where(and(eq(apiTokens.tokenHash, tokenHash), isNull(apiTokens.revokedAt)));
        if (!principal) return undefined;
        principals.set(tokenHash, principal, generation);
      }
      await recordUse(principal);
      return principal;
    },

    /**
     * What arrives on TOKEN_REVOKED_CHANNEL: a revoked token's id, or nothing after the listener
     * reconnected (revocations may have been missed meanwhile, so everything is forgotten).
     */
    onTokenRevoked(tokenId?: string): void {
      if (tokenId === undefined) principals.clear();
      else principals.forgetToken(tokenId);
    },

    /**
     * On a database with no account yet, creates the default account and its first token.
     * Returns the token to show, or undefined when the database was already set up.
     */
    async bootstrap(): Promise<IssuedToken | undefined> {
      return db.transaction(async (tx) => {
        await tx.execute(sql`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK_KEY})`);
        const [existing] = await tx.select({ n: count() }).from(accounts);
        if ((existing?.n ?? 0) > 0) return undefined;
        return insertToken(tx, await ensureAccount(tx, DEFAULT_ACCOUNT));
      });
    },
  };
}

export type Accounts = ReturnType<typeof createAccounts>;
