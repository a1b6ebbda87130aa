import { describe, expect, test } from 'vitest';
import { ConfigError, loadConfig } from './config.js';

describe('timeouts in the configuration', () => {
  test('defaults: 10 s for headers, 30 s for the whole request, 10 s per query, 5 s to connect, 2 s for readiness', () => {
    const config = loadConfig({});
    expect(config.headersTimeoutMs).toBe(10_000);
    expect(config.requestTimeoutMs).toBe(30_000);
    expect(config.dbQueryTimeoutMs).toBe(10_000);
    expect(config.dbConnectTimeoutMs).toBe(5_000);
    expect(config.readyTimeoutMs).toBe(2_000);
  });

  test('durations are read like the others', () => {
    const config = loadConfig({
      LEDGERHOOK_HEADERS_TIMEOUT: '2s',
      LEDGERHOOK_REQUEST_TIMEOUT: '1m',
      LEDGERHOOK_DB_QUERY_TIMEOUT: '1500ms',
      LEDGERHOOK_DB_CONNECT_TIMEOUT: '3s',
      LEDGERHOOK_READY_TIMEOUT: '750ms',
    });
    expect([
      config.headersTimeoutMs,
      config.requestTimeoutMs,
      config.dbQueryTimeoutMs,
      config.dbConnectTimeoutMs,
      config.readyTimeoutMs,
    ]).toEqual([2_000, 60_000, 1_500, 3_000, 750]);
  });

  test.each([
    ['LEDGERHOOK_HEADERS_TIMEOUT', 'soon', /invalid duration/],
    ['LEDGERHOOK_REQUEST_TIMEOUT', '10ms', /at least 100 ms/],
    ['LEDGERHOOK_REQUEST_TIMEOUT', '30d', /at most 86400000 ms/],
    ['LEDGERHOOK_DB_QUERY_TIMEOUT', '0s', /at least 100 ms/],
    ['LEDGERHOOK_DB_CONNECT_TIMEOUT', '30d', /at most 86400000 ms/],
    ['LEDGERHOOK_READY_TIMEOUT', '-1s', /invalid duration/],
  ])('%s=%s is refused naming the variable', (variable, value, problem) => {
    expect(() => loadConfig({ [variable]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [variable]: value })).toThrow(new RegExp(`^${variable} `));
    expect(() => loadConfig({ [variable]: value })).toThrow(problem);
  });

  test('a headers timeout longer than the whole request is refused', () => {
    expect(() =>
      loadConfig({ LEDGERHOOK_HEADERS_TIMEOUT: '40s', LEDGERHOOK_REQUEST_TIMEOUT: '30s' }),
    ).toThrow(/^LEDGERHOOK_HEADERS_TIMEOUT must not exceed LEDGERHOOK_REQUEST_TIMEOUT/);
  });
});
