/**
 * The console's one way to the API: openapi-fetch, typed by `openapi.d.ts` (generated from the
 * service's OpenAPI document; test/e2e/console.test.ts fails when the two differ), with the API
 * token of this browser tab.
 *
 * The token lives in sessionStorage only: it goes with the tab, never into a URL (no query, no
 * hash) and never into localStorage, where it would outlive the session.
 */
import createClient from 'openapi-fetch';
import type { components, operations, paths } from './openapi';

export type Problem = components['schemas']['Problem'];

/** What an operation answers on success (its JSON body). */
type Answer<Op extends keyof operations, Status extends number = 200> =
  operations[Op]['responses'] extends Record<Status, { content: { 'application/json': infer Body } }>
    ? Body
    : never;

export type Subscription = Answer<'getSubscription'>;
export type LoggedNotification = Answer<'listNotifications'>['data'][number];
export type Registry = Answer<'getRegistry'>['data'];
export type Receipt = Answer<'getRegistryProof'>['data'];
export type Folder = Answer<'listFolders'>['data'][number];
export type Follower = Answer<'getReadiness'>['networks'][number];

const TOKEN_KEY = 'ledgerhook.apiToken';

export const session = {
  token: (): string | null => sessionStorage.getItem(TOKEN_KEY),
  signIn: (token: string) => sessionStorage.setItem(TOKEN_KEY, token),
  signOut: () => sessionStorage.removeItem(TOKEN_KEY),
};

/** Told when the service refuses the token (revoked, or the database was replaced). */
let onRefused: () => void = () => {};
export function whenTokenRefused(callback: () => void): void {
  onRefused = callback;
}

/** A failed request as the API describes it (RFC 9457 problem details), or a network failure. */
export class ApiError extends Error {
  constructor(readonly problem: Problem) {
    super(problem.detail);
    this.name = 'ApiError';
  }
}

export const api = createClient<paths>({ baseUrl: location.origin });
api.use({
  onRequest({ request }) {
    const token = session.token();
    if (token) request.headers.set('authorization', `Bearer ${token}`);
    return request;
  },
  onResponse({ response, request }) {
    // /readyz needs no token; a 401 anywhere else means this one no longer opens the account.
    if (response.status === 401 && request.headers.has('authorization')) onRefused();
    return response;
  },
});

function asProblem(error: unknown, status: number): Problem {
  if (error && typeof error === 'object' && 'detail' in error && typeof error.detail === 'string')
    return error as Problem;
  return {
    type: 'about:blank',
    title: 'Error',
    status,
    detail: `The service answered HTTP ${status}`,
  };
}

/**
 * The data of an answer, or an ApiError carrying the problem the API sent (or one describing a
 * network failure), so views handle every failure one way.
 */
export async function must<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  let result: { data?: T; error?: unknown; response: Response };
  try {
    result = await call;
  } catch {
    throw new ApiError({
      type: 'about:blank',
      title: 'Network error',
      status: 0,
      detail: 'The service did not answer; is it running?',
    });
  }
  if (!result.response.ok) throw new ApiError(asProblem(result.error, result.response.status));
  return result.data as T;
}

/** The problem of a caught error, for showing it. */
export function problemOf(error: unknown): Problem {
  if (error instanceof ApiError) return error.problem;
  return { type: 'about:blank', title: 'Error', status: 0, detail: String(error) };
}
