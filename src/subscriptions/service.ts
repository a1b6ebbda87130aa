/**
 * The subscriptions service: one object whose methods the routes, the registries and the benches
 * call, composed of parts that each own one concern (their files say which). The types and
 * constants callers import from here live beside the parts and are re-exported.
 */
import { createAddressLists } from './address-lists.js';
import { createSubscriptionsContext, type SubscriptionsDeps } from './context.js';
import { createSubscriptionCreation } from './creation.js';
import { createDeliveryLog } from './delivery-log.js';
import { createSubscriptionLifecycle } from './lifecycle.js';
import { createRedelivery } from './redelivery.js';
import { createSecretRotation } from './secret-rotation.js';
import { createTestNotifications } from './test-notification.js';

export { MAX_ADDRESSES_PER_CALL } from './address-lists.js';
export type { SubscriptionsDeps, UrlChecker } from './context.js';
export { CREATE_SCOPE } from './creation.js';
export {
  ADDRESS_TRANSACTION,
  type AddressChangeInput,
  type AddressChangeResult,
  type AttemptView,
  CONTRACT_LOG_EVENT,
  type CreatedSubscription,
  type CreateSubscriptionInput,
  type LogFilter,
  type NotificationView,
  REGISTRY_EVENTS,
  type SubscriptionView,
  type VerificationKey,
  type WatchedAddressView,
} from './model.js';
export { MAX_PREVIOUS_SECRETS, SECRET_OVERLAP_MS } from './secret-rotation.js';

export function createSubscriptions(deps: SubscriptionsDeps) {
  const ctx = createSubscriptionsContext(deps);
  const creation = createSubscriptionCreation(ctx);
  const lifecycle = createSubscriptionLifecycle(ctx);
  const addressLists = createAddressLists(ctx);
  const secrets = createSecretRotation(ctx);
  const test = createTestNotifications(ctx);
  const log = createDeliveryLog(ctx);
  const redelivery = createRedelivery(ctx);

  // Each method by name, in the order the service has always listed them.
  return {
    create: creation.create,
    changeAddresses: addressLists.changeAddresses,
    listAddresses: addressLists.listAddresses,
    getWatchedAddress: addressLists.getWatchedAddress,
    createRegistryEndpoint: creation.createRegistryEndpoint,
    checkUrl: creation.checkUrl,
    list: lifecycle.list,
    countByState: lifecycle.countByState,
    get: lifecycle.get,
    remove: lifecycle.remove,
    enable: lifecycle.enable,
    rotateSecret: secrets.rotateSecret,
    sendTest: test.sendTest,
    notifications: log.notifications,
    accountNotifications: log.accountNotifications,
    resend: redelivery.resend,
    recover: redelivery.recover,
  };
}

export type Subscriptions = ReturnType<typeof createSubscriptions>;
