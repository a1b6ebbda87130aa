import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { AppError, LedgerhookError, NotFoundError, UnauthorizedError } from '../errors.js';
import { closeServer } from '../shared/shutdown.js';
import { dataDirHolder } from '../store/lock.js';
import type { Accounts, IssuedToken, TokenInfo } from './service.js';

/**
 * The embedded database admits one process, so while the service runs the CLI manages tokens
 * through this loopback-only endpoint. The address is published in `admin.json` and the client
 * proves it may use it by reading `admin.secret` (mode 0600) from the same data directory.
 */
export const ADMIN_FILE = 'admin.json';
export const SECRET_FILE = 'admin.secret';

function writePrivate(file: string, content: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, content, { mode: 0o600 });
  fs.renameSync(tmp, file);
}

export async function startAdminServer(deps: {
  accounts: Accounts;
  dataDir: string;
  logger: FastifyBaseLogger;
  /** Routes of other parts, given by the composition root (the backup), behind the same secret. */
  routes?: ((admin: FastifyInstance) => void)[];
}) {
  const secret = crypto.randomBytes(32).toString('base64url');
  const expected = Buffer.from(`Bearer ${secret}`);
  // Only warnings: a request log line per CLI call would be noise.
  const app = Fastify({ loggerInstance: deps.logger.child({ component: 'admin' }, { level: 'warn' }) });

  app.addHook('onRequest', async (request) => {
    const given = Buffer.from(request.headers.authorization ?? '');
    if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected))
      throw new UnauthorizedError('bad admin secret');
  });
  app.setErrorHandler((error, _request, reply) => {
    const status =
      error instanceof UnauthorizedError
        ? 401
        : error instanceof NotFoundError
          ? 404
          : error instanceof AppError
            ? 400
            : 500;
    return reply.code(status).send({ error: (error as Error).message });
  });
  app.post('/admin/tokens', async (request) => {
    const { account } = (request.body ?? {}) as { account?: string };
    return deps.accounts.issueToken(account);
  });
  app.get('/admin/tokens', async () => deps.accounts.listTokens());
  app.post('/admin/tokens/:id/revoke', async (request) =>
    deps.accounts.revokeToken((request.params as { id: string }).id),
  );
  for (const register of deps.routes ?? []) register(app);

  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  writePrivate(path.join(deps.dataDir, SECRET_FILE), secret);
  writePrivate(path.join(deps.dataDir, ADMIN_FILE), JSON.stringify({ pid: process.pid, url }));
  return {
    url,
    /** Unpublishes the endpoint, then closes it; connections still open at `forceAt` are cut. */
    async close(forceAt = Date.now()) {
      fs.rmSync(path.join(deps.dataDir, ADMIN_FILE), { force: true });
      fs.rmSync(path.join(deps.dataDir, SECRET_FILE), { force: true });
      await closeServer(app, forceAt);
    },
  };
}

/** The service holding the data directory has not published its admin endpoint in time. */
export class ServiceStartingError extends LedgerhookError {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(
      `the service using ${dataDir} (pid ${pid}) is still starting: its admin endpoint is not up yet; try again once it serves`,
    );
  }
}

function publishedBy(dataDir: string): number | undefined {
  try {
    const { pid } = JSON.parse(fs.readFileSync(path.join(dataDir, ADMIN_FILE), 'utf8')) as { pid?: unknown };
    return typeof pid === 'number' ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The admin client of the service `pid` that holds `dataDir`. A service that is still starting
 * has not published its endpoint yet (or an earlier one's file is still there): wait for it up to
 * `waitMs`. Resolves undefined if the service stops meanwhile, so the caller can open the
 * database itself.
 */
export async function connectAdmin(
  dataDir: string,
  pid: number,
  waitMs: number,
): Promise<ReturnType<typeof createAdminClient> | undefined> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    if (publishedBy(dataDir) === pid) return createAdminClient(dataDir);
    if (dataDirHolder(dataDir) !== pid) return undefined;
    if (Date.now() >= deadline) throw new ServiceStartingError(dataDir, pid);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The token operations, carried out by the running service through its admin endpoint. */
export function createAdminClient(dataDir: string) {
  async function request(method: string, route: string, body?: unknown): Promise<Response> {
    let admin: { url: string };
    let secret: string;
    try {
      admin = JSON.parse(fs.readFileSync(path.join(dataDir, ADMIN_FILE), 'utf8')) as { url: string };
      secret = fs.readFileSync(path.join(dataDir, SECRET_FILE), 'utf8').trim();
    } catch {
      throw new Error(
        `the service using ${dataDir} has not published its admin endpoint yet; try again in a moment`,
      );
    }
    return fetch(`${admin.url}${route}`, {
      method,
      headers: {
        authorization: `Bearer ${secret}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  }
  async function call<T>(method: string, route: string, body?: unknown): Promise<T> {
    const response = await request(method, route, body);
    const payload = (await response.json()) as T & { error?: string };
    if (response.status === 404) throw new NotFoundError(payload.error ?? 'not found');
    if (!response.ok) throw new Error(payload.error ?? `admin endpoint answered ${response.status}`);
    return payload;
  }
  const revive = (t: TokenInfo): TokenInfo => ({
    ...t,
    createdAt: new Date(t.createdAt),
    lastUsedAt: t.lastUsedAt ? new Date(t.lastUsedAt) : null,
    revokedAt: t.revokedAt ? new Date(t.revokedAt) : null,
  });
  return {
    /** A route that is not a token operation (the backup), its answer unread. */
    request,
    async issueToken(account?: string): Promise<IssuedToken> {
      const issued = await call<IssuedToken>('POST', '/admin/tokens', { account });
      return { token: issued.token, info: revive(issued.info) };
    },
    async listTokens(): Promise<TokenInfo[]> {
      return (await call<TokenInfo[]>('GET', '/admin/tokens')).map(revive);
    },
    async revokeToken(id: string): Promise<TokenInfo> {
      return revive(await call<TokenInfo>('POST', `/admin/tokens/${encodeURIComponent(id)}/revoke`, {}));
    },
  };
}

export type TokenAdmin = Pick<Accounts, 'issueToken' | 'listTokens' | 'revokeToken'>;
