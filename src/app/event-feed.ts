import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Metrics } from '../http/metrics.js';
import { createFeedSequencer } from '../notify/feed.js';
import { createEventFeed, type EventFeed } from '../notify/feed-reader.js';
import type { Store } from '../store/db.js';
import type { Subscriptions } from '../subscriptions/service.js';
import type { Shutdown } from './shutdown.js';

/**
 * The pull feed (api role), served with the API, and its sequencer beside it (one pass at a time
 * across processes, by an advisory lock).
 */
export async function startEventFeed(deps: {
  config: Config;
  store: Store;
  logger: Logger;
  subscriptions: Subscriptions;
  metrics: Metrics;
  shutdown: Shutdown;
}): Promise<EventFeed> {
  const { config, store, logger, subscriptions, metrics, shutdown } = deps;
  const events = createEventFeed({
    db: store.db,
    listen: (channel, onNotify) => store.listen(channel, onNotify),
    checkSubscription: async (accountId, id) => void (await subscriptions.get(accountId, id)),
  });
  const sequencer = createFeedSequencer({
    store,
    logger,
    pollIntervalMs: config.pollIntervalMs,
    onSequenced: (accounts) => events.signal(accounts),
  });
  // Registered before starting, so that a failed start still stops what did start.
  shutdown.steps.push({
    name: 'event feed',
    stop: async () => {
      await events.stop();
      await sequencer.stop();
    },
  });
  await events.start();
  await sequencer.start();
  metrics.observe({ feedWaiting: () => events.waiting() });
  return events;
}
