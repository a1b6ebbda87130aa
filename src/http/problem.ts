import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  AppError,
  ConflictError,
  type FieldError,
  NotFoundError,
  ServerMisconfiguredError,
  UnauthorizedError,
  UpstreamUnavailableError,
  ValidationError,
} from '../errors.js';
import { fieldName, toFieldErrors } from './validation.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  errors?: FieldError[];
}

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  409: 'Conflict',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

function problemType(kind: string): string {
  return `urn:ledgerhook:problem:${kind}`;
}

export function sendProblem(
  reply: FastifyReply,
  status: number,
  kind: string,
  detail: string,
  errors?: FieldError[],
) {
  const body: Problem = { type: problemType(kind), title: TITLES[status] ?? 'Error', status, detail };
  if (errors && errors.length > 0) body.errors = errors;
  return reply.code(status).type(PROBLEM_CONTENT_TYPE).send(body);
}

function statusOf(error: AppError): number {
  if (error instanceof ValidationError) return 400;
  if (error instanceof UnauthorizedError) return 401;
  if (error instanceof NotFoundError) return 404;
  if (error instanceof ConflictError) return 409;
  if (error instanceof UpstreamUnavailableError) return 503;
  if (error instanceof ServerMisconfiguredError) return 500;
  return 500;
}

function validationDetail(errors: FieldError[]): string {
  const named = errors.slice(0, 5).map((e) => `${fieldName(e)} ${e.detail}`);
  const more = errors.length > 5 ? ` (and ${errors.length - 5} more)` : '';
  return `Invalid request: ${named.join('; ')}${more}`;
}

/** The one place where errors become HTTP responses (RFC 9457 problem details). */
export function registerProblemHandling(app: FastifyInstance): void {
  app.setErrorHandler(
    (error: FastifyError | AppError | Error, request: FastifyRequest, reply: FastifyReply) => {
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
        if (error instanceof UpstreamUnavailableError)
          reply.header('Retry-After', String(error.retryAfterSeconds));
        if (status >= 500) request.log.error({ err: error }, 'request failed');
        const errors = error instanceof ValidationError ? error.errors : undefined;
        const detail =
          error instanceof ValidationError && errors && errors.length > 0
            ? validationDetail(errors)
            : error.message;
        return sendProblem(reply, status, error.kind, detail, errors);
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

  app.setNotFoundHandler((request, reply) =>
    sendProblem(reply, 404, 'not_found', `No route for ${request.method} ${request.url.split('?')[0]}`),
  );
}
