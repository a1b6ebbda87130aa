import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { NetworkCatalog } from '../chains/networks.js';
import { ValidationError } from '../errors.js';
import type { Store } from '../store/db.js';
import { type FillSummary, fillTraceGapsOf } from '../watch/trace-gaps/fill-on-demand.js';

/** The admin endpoint's route `ledgerhook traces fill` calls while the service holds the embedded database. */
export const TRACES_FILL_ROUTE = '/admin/traces/fill';

/** What the CLI sends: the networks (checked by it), and optionally another tracing node and a range. */
export interface TracesFillBody {
  networks: string[];
  rpc?: string;
  from?: number;
  to?: number;
}

/**
 * `POST /admin/traces/fill` on the admin endpoint: the embedded database admits one process, so
 * while the service runs, the gaps are filled through it; a summary per network comes back.
 */
export function tracesFillRoute(deps: {
  store: Store;
  networks: NetworkCatalog;
  logger: Logger;
  traceWaitMs: number;
}): (admin: FastifyInstance) => void {
  return (admin) => {
    admin.post(TRACES_FILL_ROUTE, async (request): Promise<FillSummary[]> => {
      const body = request.body as TracesFillBody;
      const networks = (body.networks ?? []).map((name) => {
        const network = deps.networks.find(name);
        if (network?.family !== 'evm')
          throw new ValidationError(`${name} is not an EVM network of this service`);
        return network;
      });
      return fillTraceGapsOf(
        { db: deps.store.db, logger: deps.logger, traceWaitMs: deps.traceWaitMs },
        networks,
        { rpc: body.rpc, from: body.from, to: body.to },
      );
    });
  };
}
