import type { FastifyInstance } from 'fastify';
import type { Store } from '../store/db.js';
import { type DatabaseHealth, databaseHealth } from '../store/health.js';
import { type FollowState, followState } from '../watch/followed-networks.js';

/** The admin endpoint's route that `ledgerhook doctor` calls while the service holds the embedded database. */
export const DOCTOR_ROUTE = '/admin/doctor';

/** What doctor reads from a database: the database itself, and the networks followed with their cursors. */
export interface ServiceHealth {
  database: DatabaseHealth;
  /** Undefined when it could not be read (a database not migrated yet has no subscriptions table). */
  follow: FollowState | undefined;
  followError?: string;
}

/** Reads the database's health and the watchers' state; reads only. */
export async function serviceHealth(store: Store): Promise<ServiceHealth> {
  const database = await databaseHealth(store);
  try {
    return { database, follow: await followState(store.db) };
  } catch (err) {
    // drizzle's message quotes the statement; the driver's (its cause) says what is wrong.
    const cause = (err as { cause?: Error }).cause ?? (err as Error);
    return { database, follow: undefined, followError: cause.message.split('\n')[0] };
  }
}

/**
 * `GET /admin/doctor` on the admin endpoint: the embedded database admits one process, so while
 * the service runs, doctor reads the database through it instead of opening it.
 */
export function doctorRoute(store: Store): (admin: FastifyInstance) => void {
  return (admin) => {
    admin.get(DOCTOR_ROUTE, async () => serviceHealth(store));
  };
}
