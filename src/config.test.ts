import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
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

describe('risk providers in the configuration', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-risk-config-'));
  fs.writeFileSync(path.join(dir, 'sol.csv'), 'A,10\n');
  fs.writeFileSync(path.join(dir, 'ofac.txt'), 'B\n');
  fs.writeFileSync(path.join(dir, 'eth.csv'), '0xab,50\n');
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  test('neither lists nor a URL: no provider', () => {
    expect(loadConfig({}).risk).toBeUndefined();
  });

  test('lists per network (relative paths from the working directory), a URL and the times', () => {
    const { risk } = loadConfig(
      {
        LEDGERHOOK_RISK_NETWORKS: 'sol,ethereum-mainnet',
        LEDGERHOOK_RISK_LISTS: 'SOL=sol.csv, ofac.txt; ETH=eth.csv',
        LEDGERHOOK_RISK_URL: 'http://risk.internal:8080/score',
        LEDGERHOOK_RISK_TOKEN: 't0ken',
        LEDGERHOOK_RISK_TIMEOUT: '400ms',
        LEDGERHOOK_RISK_CACHE_TTL: '1h',
      },
      dir,
    );
    expect(risk).toEqual({
      networks: ['SOL', 'ETH'],
      lists: {
        SOL: [path.join(dir, 'sol.csv'), path.join(dir, 'ofac.txt')],
        ETH: [path.join(dir, 'eth.csv')],
      },
      url: 'http://risk.internal:8080/score',
      token: 't0ken',
      timeoutMs: 400,
      cacheTtlMs: 3_600_000,
    });
  });

  test('defaults: Solana mainnet, 250 ms, 10 minutes of cache', () => {
    const { risk } = loadConfig({ LEDGERHOOK_RISK_URL: 'https://risk.example/v1' });
    expect(risk).toMatchObject({ networks: ['SOL'], lists: {}, timeoutMs: 250, cacheTtlMs: 600_000 });
  });

  test.each([
    ['LEDGERHOOK_RISK_LISTS', 'SOL=missing.csv', /names .*missing\.csv, which cannot be read \(ENOENT\)/],
    ['LEDGERHOOK_RISK_LISTS', 'SOL=.', /which is not a file/],
    ['LEDGERHOOK_RISK_LISTS', 'sol.csv', /use NETWORK=/],
    ['LEDGERHOOK_RISK_LISTS', 'NOPE=sol.csv', /"NOPE", which is not a configured network/],
    ['LEDGERHOOK_RISK_LISTS', 'ETH=eth.csv', /ETH, which is not in LEDGERHOOK_RISK_NETWORKS/],
    ['LEDGERHOOK_RISK_NETWORKS', 'SOL,XYZ', /"XYZ", which is not a configured network/],
    ['LEDGERHOOK_RISK_URL', 'ftp://risk', /must use http/],
    ['LEDGERHOOK_RISK_URL', 'not a url', /is not a valid URL/],
    ['LEDGERHOOK_RISK_TIMEOUT', '1ms', /at least 10 ms/],
    ['LEDGERHOOK_RISK_TIMEOUT', '1m', /at most 10000 ms/],
    ['LEDGERHOOK_RISK_CACHE_TTL', 'forever', /invalid duration/],
  ])('%s=%s is refused naming the variable', (variable, value, problem) => {
    const env = { LEDGERHOOK_RISK_URL: 'http://127.0.0.1:9/score', [variable]: value };
    expect(() => loadConfig(env, dir)).toThrow(ConfigError);
    expect(() => loadConfig(env, dir)).toThrow(new RegExp(`^${variable} `));
    expect(() => loadConfig(env, dir)).toThrow(problem);
  });
});

describe('the token and registry caches and the embedded database thread', () => {
  test('defaults: principals and registries kept for 1 s, PGlite on a worker thread', () => {
    const config = loadConfig({});
    expect([config.authCacheTtlMs, config.registryCacheTtlMs, config.pgliteWorker]).toEqual([
      1_000,
      1_000,
      true,
    ]);
  });

  test('read as given', () => {
    const config = loadConfig({
      LEDGERHOOK_AUTH_CACHE_TTL: '0s',
      LEDGERHOOK_REGISTRY_CACHE_TTL: '30s',
      LEDGERHOOK_PGLITE_WORKER: 'off',
    });
    expect([config.authCacheTtlMs, config.registryCacheTtlMs, config.pgliteWorker]).toEqual([
      0,
      30_000,
      false,
    ]);
  });

  test.each([
    ['LEDGERHOOK_AUTH_CACHE_TTL', '2m', /at most 60000 ms/],
    ['LEDGERHOOK_REGISTRY_CACHE_TTL', '-1s', /LEDGERHOOK_REGISTRY_CACHE_TTL/],
    ['LEDGERHOOK_PGLITE_WORKER', 'yes please', /must be on or off/],
  ])('%s=%s is refused naming the variable', (variable, value, problem) => {
    expect(() => loadConfig({ [variable]: value })).toThrow(new RegExp(`^${variable} `));
    expect(() => loadConfig({ [variable]: value })).toThrow(problem);
  });
});
