import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { Accounts } from '../accounts/service.js';
import { registerProblemHandling, sendProblem } from '../http-kit/problem.js';
import { type RateLimit, registerIpRateLimit, registerRateLimit } from '../http-kit/rate-limit.js';
import { markTimedOut, timedOutByServer } from '../http-kit/request-timeout.js';
import { ProblemSchema, problemResponse } from '../http-kit/schemas.js';
import { createValidatorCompiler } from '../http-kit/validation.js';
import { withDeadline } from '../shared/deadline.js';
import type { FollowerStatus } from '../watch/follower/follower.js';
import { requireBearerToken } from './auth.js';
import type { Metrics } from './metrics.js';
import {
  answerClientError,
  answerFrameworkError,
  MAX_PARAM_LENGTH,
  registerRequestInput,
} from './request-input.js';
import { createRouteTable, type RouteTable } from './route-table.js';
import { cachedSerializerFactory } from './serialization.js';
import { WEBHOOK_SCHEMAS } from './webhook-schemas.js';

declare module 'fastify' {
  interface FastifyInstance {
    servedRoutes: readonly string[];
  }
}

/** A domain's routes: its plugin, registered by the composition root in the scope it belongs to. */
export type RoutePlugin = (scope: FastifyInstance) => void;

/**
 * What the server serves besides health, readiness, metrics and the documents: each domain's
 * route plugin, listed by the composition root (app/http-server.ts), in the order the OpenAPI document lists them.
 */
export interface ServedRoutes {
  /** Under /api/v1, behind the bearer token and the account's rate limit. */
  api: RoutePlugin[];
  /** Public pages without a token, limited per client address instead. */
  pages: RoutePlugin[];
  /** Without a token or a limit (the console's page and files, which sign in to /api/v1 with one). */
  open: RoutePlugin[];
}

export interface HttpServerDeps {
  logger: FastifyBaseLogger;
  /** Checks the bearer token of every /api/v1 request. */
  accounts: Accounts;
  /** Served when this process has the api role; health, readiness and metrics always are. */
  routes: ServedRoutes | undefined;
  metrics: Metrics;
  /** Resolves when the database answers; rejects otherwise. */
  checkReady: () => Promise<void>;
  /** The followers' state, shown by /readyz (an unreachable node does not make the API unready). */
  watchStatus?: () => FollowerStatus[];
  bodyLimit: number;
  /** A client must send a request's headers within this, */
  headersTimeoutMs: number;
  /** and the whole request (headers and body) within this, or the connection is closed (408). */
  requestTimeoutMs: number;
  /** /readyz answers 503 when the database has not answered within this. */
  readyTimeoutMs: number;
  version: string;
  /** Requests per account (undefined: unlimited). */
  rateLimit?: RateLimit;
  /** Public pass pages per client IP (undefined: unlimited). */
  passRateLimit?: RateLimit;
}

/** The Fastify instance with the server's options: limits, timeouts, routing, error answers, serialization. */
function createFastify(deps: HttpServerDeps): FastifyInstance {
  return Fastify({
    loggerInstance: deps.logger,
    bodyLimit: deps.bodyLimit,
    // Request logs carry method, URL and status; bodies are never logged (they may be encrypted at rest).
    return503OnClosing: true,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors: answerFrameworkError,
    schemaController: { compilersFactory: { buildSerializer: cachedSerializerFactory } },
    clientErrorHandler: answerClientError,
    // Slow clients (a body trickled a byte at a time, with or without a token) must not hold
    // connections open: Node answers 408 and closes once a request is not received in time.
    // Fastify's default of 0 would switch Node's whole-request limit off.
    requestTimeout: deps.requestTimeoutMs,
    http: {
      headersTimeout: deps.headersTimeoutMs,
      requestTimeout: deps.requestTimeoutMs,
      // Node enforces both limits on a periodic sweep (every 30 s by default), so the sweep must
      // be finer than the limits for them to hold.
      connectionsCheckingInterval: Math.max(
        10,
        Math.min(1_000, Math.floor(Math.min(deps.headersTimeoutMs, deps.requestTimeoutMs) / 4)),
      ),
    },
  });
}

/**
 * Logs (warn, 408) and counts the requests the server's own timeouts cut off. Node answers 408
 * and closes the connection itself (its clientError, answered by answerClientError); a request
 * whose body was still coming then ends like a client's hang-up, so it is marked first, and
 * logged when it ends, with its route. One still sending its headers has no request: logged here.
 */
function reportRequestTimeouts(
  app: FastifyInstance,
  deps: Pick<HttpServerDeps, 'metrics' | 'headersTimeoutMs' | 'requestTimeoutMs'>,
): void {
  // The last request of each connection; a finished one (complete) means the next one's headers.
  const lastRequest = new WeakMap<Socket, IncomingMessage>();
  app.server.on('request', (request: IncomingMessage) => lastRequest.set(request.socket, request));
  // Before Fastify's own listener, which closes the socket.
  app.server.prependListener('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (err.code !== 'ERR_HTTP_REQUEST_TIMEOUT') return;
    const request = lastRequest.get(socket);
    if (request && !request.complete) {
      markTimedOut(request);
      return;
    }
    app.log.warn(
      { statusCode: 408, remoteAddress: socket.remoteAddress, timeoutMs: deps.headersTimeoutMs },
      'request timed out: its headers did not arrive in time (LEDGERHOOK_HEADERS_TIMEOUT); answered 408',
    );
    deps.metrics.headersTimedOut();
  });
  app.addHook('onRequestAbort', async (request) => {
    if (!timedOutByServer(request.raw)) return;
    request.log.warn(
      {
        statusCode: 408,
        method: request.method,
        url: request.url,
        route: request.routeOptions.url ?? 'unmatched',
        timeoutMs: deps.requestTimeoutMs,
      },
      'request timed out: its body did not arrive in time (LEDGERHOOK_REQUEST_TIMEOUT); answered 408',
    );
  });
}

/** Records each route as it is added: in `servedRoutes`, and in the table of methods per path it returns. */
function recordServedRoutes(app: FastifyInstance): RouteTable {
  const served: string[] = [];
  const table = createRouteTable();
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      served.push(`${method} ${route.url}`);
      table.add(method, route.url);
    }
  });
  app.decorate('servedRoutes', served);
  return table;
}

/** The OpenAPI document (/openapi.json), its browsable documentation (/docs) and the root pointing to them. */
async function registerDocumentation(app: FastifyInstance, version: string): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Ledgerhook API',
        version,
        description:
          'Address notifications, registries and transaction lookup. Errors are RFC 9457 problem details (application/problem+json). A path asked with a method it does not have is 405 with an `Allow` header (components.responses.MethodNotAllowed). The bodies webhooks deliver are components.schemas.WebhookEvent and the schemas it names. Every /api/v1 route may answer 429 over the account’s rate limit and 503 while the database is unavailable, both with `Retry-After`.',
        license: { name: 'MIT', url: 'https://opensource.org/licenses/MIT' },
      },
      // Relative: the document describes the service that serves it, wherever it listens.
      servers: [{ url: '/', description: 'This Ledgerhook service' }],
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'API token (lh_...)' },
          apiKey: {
            type: 'apiKey',
            in: 'header',
            name: 'x-api-key',
            description: 'The same API token, as Tatum clients send it',
          },
        },
        // Components are not rewritten like route schemas: the reference is the document's own.
        responses: {
          MethodNotAllowed: {
            description: problemResponse(405).description,
            content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
          },
        },
        // What webhooks deliver, which no route answers: described for receivers (WebhookEvent).
        schemas: WEBHOOK_SCHEMAS,
      },
      security: [{ bearerAuth: [] }, { apiKey: [] }],
    },
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => (json.$id as string) ?? `def-${i}` },
  });
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { deepLinking: false } });

  const open = { security: [] as never[], tags: ['service'] };
  app.get(
    '/',
    {
      schema: {
        ...open,
        operationId: 'getRoot',
        summary: 'Where to start: the API documentation',
        description:
          'A browser (Accept: text/html) is redirected to /docs; other clients get links to the documentation and the OpenAPI document.',
        response: {
          200: Type.Object({
            service: Type.String(),
            version: Type.String(),
            docs: Type.String({ description: 'Browsable API documentation' }),
            openapi: Type.String({ description: 'The OpenAPI 3 document' }),
          }),
          302: Type.Null({ description: 'Redirect to /docs (browsers)' }),
        },
      },
    },
    async (request, reply) => {
      if (/\btext\/html\b/.test(request.headers.accept ?? '')) return reply.redirect('/docs', 302);
      return { service: 'ledgerhook', version, docs: '/docs', openapi: '/openapi.json' };
    },
  );
  app.get(
    '/openapi.json',
    {
      schema: {
        ...open,
        operationId: 'getOpenApi',
        summary: 'This OpenAPI 3 document',
        response: { 200: Type.Object({}, { additionalProperties: true, description: 'OpenAPI 3.0' }) },
      },
    },
    async () => app.swagger(),
  );
}

/** Liveness, readiness and the Prometheus metrics, served by every role without a token. */
function registerServiceRoutes(
  app: FastifyInstance,
  deps: Pick<HttpServerDeps, 'metrics' | 'checkReady' | 'watchStatus' | 'readyTimeoutMs'>,
): void {
  const open = { security: [] as never[], tags: ['service'] };
  app.get(
    '/healthz',
    {
      schema: {
        ...open,
        operationId: 'getHealth',
        summary: 'Liveness: the process serves requests',
        response: { 200: Type.Object({ status: Type.String() }) },
      },
    },
    async () => ({ status: 'ok' }),
  );
  app.get(
    '/readyz',
    {
      schema: {
        ...open,
        operationId: 'getReadiness',
        summary: 'Readiness: the database answers',
        description:
          'Ready when the database answers. `networks` shows each chain follower: last block processed, node head, and the last error while its node is unreachable (which does not make the API unready).',
        response: {
          200: Type.Object({
            status: Type.String(),
            database: Type.String(),
            networks: Type.Array(
              Type.Object({
                network: Type.String(),
                height: Type.Union([Type.Integer(), Type.Null()]),
                head: Type.Union([Type.Integer(), Type.Null()]),
                healthy: Type.Boolean(),
                lastError: Type.Union([Type.String(), Type.Null()]),
                standby: Type.Boolean({
                  description: 'another process follows this network; this one waits to take over',
                }),
                internalTransfers: Type.Optional(
                  Type.Boolean({
                    description:
                      'EVM networks: whether internal transfers (native value moved by contract calls) are read from the node’s traces; false with `internalTransfersReason` when the network’s `traces` setting is off or its node refuses both trace methods',
                  }),
                ),
                internalTransfersReason: Type.Optional(
                  Type.Union([Type.String(), Type.Null()], {
                    description: 'Why internal transfers are not read; null while they are',
                  }),
                ),
                tracesNode: Type.Optional(
                  Type.String({
                    description:
                      'EVM networks that name a tracing node (tracesRpc): its host and port; traces are read there, blocks and receipts from the network’s rpc',
                  }),
                ),
                traceGaps: Type.Optional(
                  Type.Object(
                    {
                      count: Type.Integer({ minimum: 0 }),
                      first: Type.Union([Type.Integer(), Type.Null()]),
                      last: Type.Union([Type.Integer(), Type.Null()]),
                    },
                    {
                      description:
                        'EVM networks: blocks committed without their internal transfers because the node could not trace them (its state pruned, or traces failing past LEDGERHOOK_TRACE_WAIT), still open: how many, and the first and last block; every other notification of those blocks was sent',
                    },
                  ),
                ),
              }),
            ),
          }),
          503: problemResponse(503, 'The database does not answer (within the readiness deadline)'),
        },
      },
    },
    async (request, reply) => {
      try {
        // A database that accepts connections but never answers must not hang the probe.
        await withDeadline(deps.checkReady(), deps.readyTimeoutMs, 'the database readiness check');
        return { status: 'ready', database: 'ok', networks: deps.watchStatus?.() ?? [] };
      } catch (err) {
        request.log.warn({ err }, 'readiness check failed');
        return sendProblem(reply, 503, 'not_ready', 'The database does not answer');
      }
    },
  );
  app.get(
    '/metrics',
    {
      schema: {
        ...open,
        operationId: 'getMetrics',
        summary: 'Prometheus metrics (text exposition format)',
        response: {
          200: {
            description: 'Prometheus text exposition format 0.0.4',
            content: { 'text/plain': { schema: { type: 'string' } } },
          },
        },
      },
    },
    async (_request, reply) =>
      reply.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics()),
  );
}

/**
 * The domains' routes in their scopes: /api/v1 behind the bearer token and the account's rate
 * limit, the public pages limited per client address, and the open routes.
 */
async function registerRouteScopes(
  app: FastifyInstance,
  routes: ServedRoutes,
  deps: Pick<HttpServerDeps, 'accounts' | 'rateLimit' | 'passRateLimit'>,
): Promise<void> {
  await app.register(
    async (api) => {
      requireBearerToken(api, deps.accounts);
      await registerRateLimit(api, deps.rateLimit);
      for (const register of routes.api) register(api);
    },
    { prefix: '/api/v1' },
  );
  // Public, without a token: limited per client address instead of per account.
  await app.register(async (pages) => {
    await registerIpRateLimit(pages, deps.passRateLimit);
    for (const register of routes.pages) register(pages);
  });
  for (const register of routes.open) register(app);
}

export async function createHttpServer(deps: HttpServerDeps): Promise<FastifyInstance> {
  const app = createFastify(deps);
  // Every route this server serves, so a test can hold the OpenAPI document to all of them, and
  // a known path asked with another method is answered 405 with Allow.
  const table = recordServedRoutes(app);
  app.setValidatorCompiler(createValidatorCompiler());
  registerRequestInput(app);
  app.addSchema(ProblemSchema);
  registerProblemHandling(app, { allowedMethods: (path) => table.allowed(path) });
  deps.metrics.instrument(app);
  reportRequestTimeouts(app, deps);

  await registerDocumentation(app, deps.version);
  registerServiceRoutes(app, deps);

  const { routes } = deps;
  if (routes) await registerRouteScopes(app, routes, deps);
  return app;
}
