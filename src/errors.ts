/**
 * The domain's error hierarchy. Services throw these; `http/problem.ts` is the one place that
 * turns them into HTTP status codes and RFC 9457 problem details.
 */

/** One invalid input, located by a JSON pointer into the body or by a parameter or header name. */
export interface FieldError {
  detail: string;
  pointer?: string;
  parameter?: string;
  header?: string;
}

/**
 * The base of every error the service defines: its `name` is its class's, set here once, so logs
 * and one-line messages say what failed without each class repeating it.
 */
export class LedgerhookError extends Error {
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

export abstract class AppError extends LedgerhookError {
  abstract readonly kind: string;
  /** Whether the same request may succeed later without change. */
  readonly retryable: boolean = false;
}

export class ValidationError extends AppError {
  readonly kind = 'validation';
  constructor(
    message: string,
    readonly errors: FieldError[] = [],
  ) {
    super(message);
  }
}

export class UnauthorizedError extends AppError {
  readonly kind = 'unauthorized';
  constructor(message = 'A valid API token is required: send Authorization: Bearer <token>') {
    super(message);
  }
}

export class NotFoundError extends AppError {
  readonly kind = 'not_found';
}

export class ConflictError extends AppError {
  readonly kind = 'conflict';
  constructor(
    message: string,
    /** Extra members of the problem details, e.g. the id of the resource it conflicts with. */
    readonly extensions: Record<string, string> = {},
  ) {
    super(message);
  }
}

export class UpstreamUnavailableError extends AppError {
  readonly kind = 'upstream_unavailable';
  override readonly retryable = true;
  constructor(
    message: string,
    readonly retryAfterSeconds = 5,
  ) {
    super(message);
  }
}

/** The account sent more requests than its rate limit allows; it may retry after a while. */
export class RateLimitedError extends AppError {
  readonly kind = 'rate_limited';
  override readonly retryable = true;
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message);
  }
}

/**
 * The database cannot be reached right now: refused, reset, timed out, shutting down, out of
 * connections (see isDatabaseUnavailable in store/). The same request may succeed later.
 */
export class DatabaseUnavailableError extends AppError {
  readonly kind = 'database_unavailable';
  override readonly retryable = true;
  constructor(
    cause: unknown,
    readonly retryAfterSeconds = 5,
  ) {
    super('The database is unavailable; retry later', { cause });
  }
}

/** A server-side misconfiguration the client cannot fix (for example a wrong master key). */
export class ServerMisconfiguredError extends AppError {
  readonly kind = 'misconfigured';
}

/** A configuration problem, reported as one line naming the variable. */
export class ConfigError extends LedgerhookError {
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`${variable} ${problem}`);
  }
}
