import { isUtf8 } from 'node:buffer';
import http from 'node:http';
import type { Socket } from 'node:net';
import {
  errorCodes,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type RouteOptions,
} from 'fastify';
import { ValidationError } from '../errors.js';
import { PROBLEM_CONTENT_TYPE, sendProblem } from '../http-kit/problem.js';
import { escapePointerToken } from '../http-kit/validation.js';
import { MalformedBodyError, parseJsonBody } from './json-body.js';

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Longest path parameter the router passes on; declared `maxLength`s (all shorter) then name it. */
export const MAX_PARAM_LENGTH = 1024;

/** Query strings of API routes that declare none: no parameter is known, so any is refused. */
const NO_QUERY = { type: 'object', properties: {}, additionalProperties: false };

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** An empty body is no body, whatever its content type; a route with a body schema needs one. */
function emptyBody(request: FastifyRequest): undefined {
  if (request.routeOptions.schema?.body !== undefined)
    throw new MalformedBodyError('The body is empty; this route takes a JSON object');
  return undefined;
}

/** The only body a route without a body schema takes is none, or `{}`. */
async function refuseBody(request: FastifyRequest): Promise<void> {
  const body = request.body;
  if (body === undefined) return;
  if (isPlainObject(body)) {
    const keys = Object.keys(body);
    if (keys.length === 0) return;
    throw new ValidationError(
      'This route takes no body',
      keys.map((key) => ({
        pointer: `#/${escapePointerToken(key)}`,
        detail: 'is not a known field: this route takes no body',
      })),
    );
  }
  throw new ValidationError('This route takes no body', [
    { pointer: '#', detail: 'must be empty or {}: this route takes no body' },
  ]);
}

/**
 * How request bodies and query strings are read, for every route in one place: a strict JSON
 * parser (json-body.ts), an empty body accepted under any content type, any other content type
 * refused (415), and routes that declare no body or no query string refusing what they do not
 * take instead of ignoring it.
 */
export function registerRequestInput(app: FastifyInstance): void {
  // The API takes JSON only: without Fastify's text/plain parser a text body is 415, not a
  // confusing 400 about the body's type.
  app.removeContentTypeParser(['application/json', 'text/plain']);
  // A path no route serves is 404 whatever its body: nothing is parsed for it.
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    try {
      if (request.is404) return done(null, undefined);
      if (body.length === 0) return done(null, emptyBody(request));
      // Broken UTF-8 would otherwise be replaced by U+FFFD and stored altered.
      if (!isUtf8(body)) throw new MalformedBodyError('The body is not valid UTF-8');
      done(null, parseJsonBody(body.toString('utf8')));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    try {
      if (request.is404) return done(null, undefined);
      if (body.length > 0) throw new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE();
      done(null, emptyBody(request));
    } catch (err) {
      done(err as Error, undefined);
    }
  });

  app.addHook('onRoute', (route: RouteOptions) => {
    const methods = [route.method].flat();
    if (methods.some((m) => BODY_METHODS.has(m)) && route.schema?.body === undefined) {
      route.preHandler = [...[route.preHandler ?? []].flat(), refuseBody];
    }
    if (route.url.startsWith('/api/') && route.schema?.querystring === undefined) {
      route.schema = { ...route.schema, querystring: NO_QUERY };
    }
  });
}

/**
 * Requests the router refuses before any route runs: a path that is not valid percent-encoded
 * UTF-8, or a parameter longer than MAX_PARAM_LENGTH.
 */
export function answerFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const detail =
    error.code === 'FST_ERR_BAD_URL'
      ? 'The path is not valid: a segment is not percent-encoded UTF-8'
      : error.code === 'FST_ERR_MAX_PARAM_LENGTH'
        ? `A path parameter is longer than ${MAX_PARAM_LENGTH} characters`
        : error.message;
  const status = error.code === 'FST_ERR_BAD_URL' || error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 400 : 500;
  if (status === 500) request.log.error({ err: error }, 'request failed');
  return sendProblem(reply, status, status === 400 ? 'bad_request' : 'internal', detail);
}

/**
 * Requests Node's HTTP parser refuses (a NUL or other forbidden byte in a header, headers too
 * large, a timeout): answered as problem details too, on the raw socket since no request exists.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const status =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : err.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
  const title = http.STATUS_CODES[status] ?? 'Bad Request';
  const detail =
    status === 408
      ? 'The request took too long to arrive'
      : status === 431
        ? 'The request headers are too large'
        : 'The request is not valid HTTP (for example a forbidden character in a header)';
  const kind = status === 408 ? 'request_timeout' : status === 431 ? 'headers_too_large' : 'bad_request';
  const body = JSON.stringify({ type: `urn:ledgerhook:problem:${kind}`, title, status, detail });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${title}\r\nContent-Type: ${PROBLEM_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}
