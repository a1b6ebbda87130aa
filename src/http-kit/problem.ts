import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isNodeError } from '../chains/node-errors.js';
import {
  AppError,
  ConflictError,
  DatabaseUnavailableError,
  type FieldError,
  NotFoundError,
  RateLimitedError,
  ServerMisconfiguredError,
  UnauthorizedError,
  UpstreamUnavailableError,
  ValidationError,
} from '../errors.js';
import { isDatabaseUnavailable } from '../store/unavailable.js';
import { timedOutByServer } from './request-timeout.js';
import { fieldName, toFieldErrors } from './validation.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  errors?: FieldError[];
  /** Extension members, e.g. `existingId` of a conflict. */
  [extension: string]: unknown;
}

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  408: 'Request Timeout',
  409: 'Conflict',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/** Field errors a problem names at most; then one entry says how many more there are. */
export const MAX_LISTED_ERRORS = 100;

/**
 * The first MAX_LISTED_ERRORS errors and one saying how many were left out, as address lists
 * always named invalid addresses: a body of thousands of unknown fields is not answered in kind.
 */
function listedErrors(errors: FieldError[]): FieldError[] {
  if (errors.length <= MAX_LISTED_ERRORS + 1) return errors;
  const more = errors.length - MAX_LISTED_ERRORS;
  return [
    ...errors.slice(0, MAX_LISTED_ERRORS),
    { pointer: '#', detail: `and ${more} more errors (${errors.length} in all)` },
  ];
}

function problemType(kind: string): string {
  return `urn:ledgerhook:problem:${kind}`;
}

export function sendProblem(
  reply: FastifyReply,
  status: number,
  kind: string,
  detail: string,
  errors?: FieldError[],
  extensions: Record<string, string> = {},
) {
  const body: Problem = {
    ...extensions,
    type: problemType(kind),
    title: TITLES[status] ?? 'Error',
    status,
    detail,
  };
  if (errors && errors.length > 0) body.errors = listedErrors(errors);
  return reply.code(status).type(PROBLEM_CONTENT_TYPE).send(body);
}

function statusOf(error: AppError): number {
  if (error instanceof ValidationError) return 400;
  if (error instanceof UnauthorizedError) return 401;
  if (error instanceof NotFoundError) return 404;
  if (error instanceof ConflictError) return 409;
  if (error instanceof RateLimitedError) return 429;
  if (error instanceof UpstreamUnavailableError) return 503;
  if (error instanceof DatabaseUnavailableError) return 503;
  if (error instanceof ServerMisconfiguredError) return 500;
  return 500;
}

function validationDetail(errors: FieldError[]): string {
  const named = errors.slice(0, 5).map((e) => `${fieldName(e)} ${e.detail}`);
  const more = errors.length > 5 ? ` (and ${errors.length - 5} more)` : '';
  return `Invalid request: ${named.join('; ')}${more}`;
}

/**
 * True when the request's body never arrived whole because the client closed the connection
 * (Node's "aborted", ECONNRESET): a fact about the client, whatever error it surfaced as.
 */
function clientAborted(request: FastifyRequest): boolean {
  const raw = request.raw;
  return !raw.complete && (raw.aborted || raw.destroyed || raw.socket?.destroyed === true);
}

/**
 * What an error that is not ours is: a chain node's failure that no service put in its own
 * words (503, without the library's message, which may quote the node's URL), a database that
 * cannot be reached (503, an outage to wait out, not a bug), or left as it is.
 */
function classified(thrown: Error): Error {
  if (thrown instanceof AppError) return thrown;
  if (isNodeError(thrown)) {
    const error = new UpstreamUnavailableError('A chain node is unavailable; retry later');
    error.cause = thrown;
    return error;
  }
  if (isDatabaseUnavailable(thrown)) return new DatabaseUnavailableError(thrown);
  return thrown;
}

/** The one place where errors become HTTP responses (RFC 9457 problem details). */
export function registerProblemHandling(
  app: FastifyInstance,
  options: { allowedMethods?: (path: string) => string[] } = {},
): void {
  app.setErrorHandler(
    (thrown: FastifyError | AppError | Error, request: FastifyRequest, reply: FastifyReply) => {
      // The body never came whole. Either the server's request timeout cut it off (Node has sent
      // 408; http/server.ts logs it as a timeout), or the client hung up: its socket's reset is
      // not our outage. Nobody reads this answer. The metrics' onRequestAbort hook counts both.
      if (timedOutByServer(request.raw))
        return sendProblem(reply, 408, 'request_timeout', 'The request took too long to arrive');
      if (clientAborted(request)) {
        request.log.info(
          { reason: (thrown as { code?: unknown }).code ?? thrown.message },
          'client aborted the request',
        );
        return sendProblem(reply, 400, 'client_aborted', 'The request ended before its body was complete');
      }
      const error = classified(thrown);
      const validation = (error as FastifyError).validation;
      if (validation) {
        const errors = toFieldErrors(
          validation as never,
          (error as FastifyError).validationContext ?? 'body',
        );
        return sendProblem(reply, 400, 'validation', validationDetail(errors), errors);
      }
      if (error instanceof AppError) {
        const status = statusOf(error);
        if (error instanceof UnauthorizedError) reply.header('WWW-Authenticate', 'Bearer');
        if (
          error instanceof UpstreamUnavailableError ||
          error instanceof DatabaseUnavailableError ||
          error instanceof RateLimitedError
        )
          reply.header('Retry-After', String(error.retryAfterSeconds));
        // An upstream's own words (its host, say) are for the operator: they are kept in `cause`,
        // and the log blanks its URLs' secret parts (createServiceLogger).
        if (error instanceof UpstreamUnavailableError)
          request.log.warn({ err: error, cause: error.cause }, 'upstream unavailable');
        else if (error instanceof DatabaseUnavailableError)
          request.log.warn({ err: error.cause }, 'database unavailable');
        else if (status >= 500) request.log.error({ err: error }, 'request failed');
        const errors = error instanceof ValidationError ? error.errors : undefined;
        const detail =
          error instanceof ValidationError && errors && errors.length > 0
            ? validationDetail(errors)
            : error.message;
        const extensions = error instanceof ConflictError ? error.extensions : undefined;
        return sendProblem(reply, status, error.kind, detail, errors, extensions);
      }
      // Fastify's own client errors: malformed JSON, body too large, unsupported media type...
      const status = (error as FastifyError).statusCode;
      if (status !== undefined && status >= 400 && status < 500) {
        const kind =
          status === 413 ? 'body_too_large' : status === 415 ? 'unsupported_media_type' : 'bad_request';
        const errors = status === 400 ? [{ pointer: '#', detail: error.message }] : undefined;
        return sendProblem(reply, status, kind, error.message, errors);
      }
      request.log.error({ err: error }, 'request failed');
      return sendProblem(reply, 500, 'internal', 'An unexpected error occurred; it has been logged');
    },
  );

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    const allowed = options.allowedMethods?.(path) ?? [];
    if (allowed.length > 0) {
      reply.header('Allow', allowed.join(', '));
      return sendProblem(
        reply,
        405,
        'method_not_allowed',
        `${request.method} is not allowed on ${path}; use ${allowed.join(', ')}`,
      );
    }
    return sendProblem(reply, 404, 'not_found', `No route for ${request.method} ${path}`);
  });
}
