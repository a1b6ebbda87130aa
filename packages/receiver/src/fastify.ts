/**
 * The receiver as a fastify plugin: a POST route at `path` whose body is kept as raw bytes.
 *
 *   await app.register(fastifyReceiver, { path: '/hooks', secret: process.env.LEDGERHOOK_SECRET!, handler });
 *
 * The plugin is encapsulated (not wrapped in fastify-plugin), so its raw-body parser applies to its
 * own route only: the application's other routes keep parsing JSON as before.
 */
import type { FastifyPluginAsync } from 'fastify';
import { createReceiver, type ReceiverOptions } from './receive.js';

export interface FastifyReceiverOptions extends ReceiverOptions {
  /** The route's path, below the prefix the plugin is registered with. */
  path: string;
  /** Largest body read, in bytes (default: the server's bodyLimit); larger is 413. */
  bodyLimit?: number;
}

export const fastifyReceiver: FastifyPluginAsync<FastifyReceiverOptions> = async (app, options) => {
  const receive = createReceiver(options);
  // Whatever the content type: the signature covers the bytes, so they are never parsed here.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  app.post(
    options.path,
    options.bodyLimit === undefined ? {} : { bodyLimit: options.bodyLimit },
    async (request, reply) => {
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const answer = await receive(body, request.headers);
      return reply.code(answer.status).type(answer.contentType).send(answer.body);
    },
  );
};
