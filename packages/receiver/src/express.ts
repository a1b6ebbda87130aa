/**
 * The receiver as express middleware (or a plain `node:http` handler: it uses only Node's request
 * and response). It reads the raw body itself, so mount it before any JSON body parser, or after
 * `express.raw()`:
 *
 *   app.post('/hooks', expressReceiver({ secret: process.env.LEDGERHOOK_SECRET!, handler }));
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import { createReceiver, problem, type ReceiverAnswer, type ReceiverOptions } from './receive.js';

export interface ExpressReceiverOptions extends ReceiverOptions {
  /** Largest body read, in bytes (default 1 MB); larger is 413. */
  limit?: number;
}

class TooLarge extends Error {}

async function readBody(req: IncomingMessage & { body?: unknown }, limit: number): Promise<Buffer> {
  if (Buffer.isBuffer(req.body)) return req.body; // express.raw() came first
  if (req.readableEnded || (req.body !== undefined && typeof req.body === 'object'))
    throw new Error(
      'the request body was already parsed: mount the Ledgerhook receiver before express.json(), or use express.raw() for its route',
    );
  const declared = Number(req.headers['content-length']);
  if (declared > limit) throw new TooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new TooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function send(res: ServerResponse, answer: ReceiverAnswer): void {
  res.statusCode = answer.status;
  res.setHeader('content-type', answer.contentType);
  res.end(answer.body);
}

export function expressReceiver(options: ExpressReceiverOptions): RequestHandler {
  const receive = createReceiver(options);
  const limit = options.limit ?? 1_048_576;
  return async (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => {
    let body: Buffer;
    try {
      body = await readBody(req, limit);
    } catch (error) {
      if (error instanceof TooLarge) {
        // What is left unread is not worth reading: the connection goes with the answer.
        res.setHeader('connection', 'close');
        return send(res, problem(413, 'Content Too Large', `the body is larger than ${limit} bytes`));
      }
      return next(error);
    }
    try {
      send(res, await receive(body, req.headers));
    } catch (error) {
      next(error);
    }
  };
}
