import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { Accounts } from '../accounts/service.js';
import { registerRegistryRoutes } from '../registry/routes.js';
import type { Registries } from '../registry/service.js';
import { registerSubscriptionRoutes } from '../subscriptions/routes.js';
import type { Subscriptions } from '../subscriptions/service.js';
import { registerTransactionRoutes } from '../transactions/routes.js';
import type { Transactions } from '../transactions/service.js';
import type { FollowerStatus } from '../watch/follower.js';
import { requireBearerToken } from './auth.js';
import type { Metrics } from './metrics.js';
import { registerProblemHandling, sendProblem } from './problem.js';
import { ProblemSchema } from './schemas.js';
import { createValidatorCompiler } from './validation.js';

declare module 'fastify' {
  interface FastifyInstance {
    servedRoutes: readonly string[];
  }
}

export interface HttpServerDeps {
  logger: FastifyBaseLogger;
  accounts: Accounts;
  registries: Registries;
  subscriptions: Subscriptions;
  transactions: Transactions;
  /** Whether /api/v1 is served (the api role); health, readiness and metrics always are. */
  serveApi: boolean;
  metrics: Metrics;
  /** Resolves when the database answers; rejects otherwise. */
  checkReady: () => Promise<void>;
  /** The followers' state, shown by /readyz (an unreachable node does not make the API unready). */
  watchStatus?: () => FollowerStatus[];
  bodyLimit: number;
  version: string;
}

export async function createHttpServer(deps: HttpServerDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger,
    bodyLimit: deps.bodyLimit,
    // Request logs carry method, URL and status; bodies are never logged (they may be encrypted at rest).
    return503OnClosing: true,
    routerOptions: { ignoreTrailingSlash: true },
  });
  // Every route this server serves, so a test can hold the OpenAPI document to all of them.
  const served: string[] = [];
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) if (method !== 'HEAD') served.push(`${method} ${route.url}`);
  });
  app.decorate('servedRoutes', served);
  app.setValidatorCompiler(createValidatorCompiler());
  // The API takes JSON only: without Fastify's built-in text/plain parser a text body is 415,
  // not a confusing 400 about the body's type.
  app.removeContentTypeParser('text/plain');
  app.addSchema(ProblemSchema);
  registerProblemHandling(app);
  deps.metrics.instrument(app);

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Ledgerhook API',
        version: deps.version,
        description:
          'Address notifications, registries and transaction lookup. Errors are RFC 9457 problem details (application/problem+json).',
      },
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'API token (lh_...)' },
        },
      },
      security: [{ bearerAuth: [] }],
    },
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => (json.$id as string) ?? `def-${i}` },
  });
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { deepLinking: false } });

  const open = { security: [] as never[], tags: ['service'] };
  app.get('/openapi.json', { schema: { ...open, summary: 'This OpenAPI 3 document' } }, async () =>
    app.swagger(),
  );
  app.get(
    '/healthz',
    {
      schema: {
        ...open,
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
              }),
            ),
          }),
          503: { $ref: 'Problem#' },
        },
      },
    },
    async (request, reply) => {
      try {
        await deps.checkReady();
        return { status: 'ready', database: 'ok', networks: deps.watchStatus?.() ?? [] };
      } catch (err) {
        request.log.warn({ err }, 'readiness check failed');
        return sendProblem(reply, 503, 'not_ready', 'The database does not answer');
      }
    },
  );
  app.get(
    '/metrics',
    { schema: { ...open, summary: 'Prometheus metrics (text exposition format)', produces: ['text/plain'] } },
    async (_request, reply) =>
      reply.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics()),
  );

  if (deps.serveApi) {
    await app.register(
      async (api) => {
        requireBearerToken(api, deps.accounts);
        registerRegistryRoutes(api, deps.registries);
        registerSubscriptionRoutes(api, deps.subscriptions);
        registerTransactionRoutes(api, deps.transactions);
      },
      { prefix: '/api/v1' },
    );
  }
  return app;
}
