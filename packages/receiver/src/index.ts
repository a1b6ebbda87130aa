/**
 * @ledgerhook/receiver: verify, type, deduplicate and acknowledge Ledgerhook webhooks.
 * Middleware: `@ledgerhook/receiver/express` and `@ledgerhook/receiver/fastify`.
 */
export {
  createMemoryStore,
  type DeliveryState,
  type DeliveryStore,
  type MemoryStoreOptions,
} from './dedupe.js';
export {
  createReceiver,
  type DeliveryContext,
  type ReceiverAnswer,
  type ReceiverOptions,
  type WebhookHandler,
} from './receive.js';
export * from './types.js';
export {
  createVerifier,
  type HeaderSource,
  InvalidKeyError,
  type VerificationFailure,
  type VerifiedDelivery,
  type VerifyOptions,
  verify,
  WebhookVerificationError,
} from './verify.js';
