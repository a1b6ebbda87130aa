import pino from 'pino';
import { type Dispatcher, request as undiciRequest } from 'undici';
import { type RunningApp, type StartOptions, startApp } from '../../src/app.js';
import { toHeaders } from '../../src/chains/evm/rpc-transport.js';
import { loadConfig } from '../../src/config.js';
import { type Backend, createTestEnvironment, type TestEnvironment } from './env.js';

export interface TestApp {
  app: RunningApp;
  environment: TestEnvironment;
  /** The default account's token, as printed on first start. */
  token: string;
  /** Issues a token for another account (created if new). */
  tokenFor(account: string): Promise<string>;
  /** An HTTP request to the running service, over loopback. */
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  close(): Promise<void>;
}

export interface RequestOptions {
  token?: string | null;
  body?: unknown;
  /** Sent as is, for malformed payloads. */
  rawBody?: string;
  headers?: Record<string, string>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  body: unknown;
  text: string;
}

/**
 * How tests run the service: receivers live on loopback (allowlisted, as a developer would), and
 * retries come in milliseconds instead of minutes. SSRF tests override LEDGERHOOK_ALLOW_CIDRS.
 */
export const TEST_SERVICE_ENV: Record<string, string> = {
  PORT: '0',
  // No watcher unless a test watches a chain: the catalog's mainnets are unreachable here.
  LEDGERHOOK_ROLES: 'api,dispatcher',
  LOG_LEVEL: 'silent',
  LEDGERHOOK_ALLOW_CIDRS: '127.0.0.0/8,::1/128',
  LEDGERHOOK_RETRY_SCHEDULE: '100ms,200ms,300ms,400ms,500ms,600ms,700ms,800ms,900ms',
  LEDGERHOOK_POLL_INTERVAL: '50ms',
  LEDGERHOOK_DELIVERY_TIMEOUT: '3s',
};

/** The real service (composition root, HTTP on a loopback port) on isolated storage. */
export async function startTestApp(
  backend: Backend,
  /** Added to the environment; a function sees the test's storage first (e.g. to proxy its database). */
  extraEnv: Record<string, string> | ((environment: TestEnvironment) => Record<string, string>) = {},
  /** `logDestination` keeps the service's own log (createServiceLogger, at LOG_LEVEL), else it is silent. */
  startOptions: Pick<StartOptions, 'alwaysFollow' | 'logger' | 'logDestination'> = {},
): Promise<TestApp> {
  const environment = await createTestEnvironment(backend);
  const extra = typeof extraEnv === 'function' ? extraEnv(environment) : extraEnv;
  const config = loadConfig({ ...environment.env, ...TEST_SERVICE_ENV, ...extra });
  let token = '';
  const app = await startApp(config, {
    ...(startOptions.logDestination ? {} : { logger: pino({ level: 'silent' }) }),
    ...startOptions,
    announceToken: (issued) => {
      token = issued.token;
    },
  });
  const { createAccounts } = await import('../../src/accounts/service.js');
  const accounts = createAccounts({ db: app.store.db });

  async function request(method: string, path: string, options: RequestOptions = {}): Promise<TestResponse> {
    const headers: Record<string, string> = { ...options.headers };
    const bearer = options.token === undefined ? token : options.token;
    if (bearer !== null) headers.authorization = `Bearer ${bearer}`;
    let body: string | undefined = options.rawBody;
    if (options.body !== undefined) body = JSON.stringify(options.body);
    if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
      headers['content-type'] = 'application/json';
    }
    // undici's request, not fetch: the suite sends thousands of these, and fetch's Request, web
    // streams and abort signal cost several times the CPU (bench/README.md, "EVM calls on undici").
    const response = await undiciRequest(`${app.url}${path}`, {
      method: method as Dispatcher.HttpMethod,
      headers,
      body,
    });
    const text = await response.body.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON
    }
    return { status: response.statusCode, headers: toHeaders(response.headers), body: parsed, text };
  }

  return {
    app,
    environment,
    token,
    tokenFor: async (account) => (await accounts.issueToken(account)).token,
    request,
    async close() {
      await app.close();
      await environment.cleanup();
    },
  };
}
