import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { CONFIG_FILE_LIMITS } from './chains/networks.js';
import { ConfigError, loadConfig } from './config.js';
import { RISK_LIST_LIMITS } from './risk-config.js';

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
    ['LEDGERHOOK_RISK_LISTS', 'SOL=.', /which is not a regular file but a directory/],
    ['LEDGERHOOK_RISK_LISTS', 'SOL=/dev/zero', /which is not a regular file but a character device/],
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

describe('the bounds of LEDGERHOOK_CONFIG', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-config-file-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  let files = 0;
  const write = (content: string) => {
    const file = path.join(dir, `config-${files++}.json`);
    fs.writeFileSync(file, content);
    return file;
  };
  /** `count` EVM networks, each with `urls` RPC URLs. */
  const networks = (count: number, urls = 1) =>
    Object.fromEntries(
      Array.from({ length: count }, (_, i) => [
        `NET${i}`,
        {
          family: 'evm',
          chainId: 100_000 + i,
          symbol: 'ETH',
          rpc: Array.from({ length: urls }, (_, j) => `http://127.0.0.1:${9000 + j}`),
        },
      ]),
    );
  const load = (file: string) => loadConfig({ LEDGERHOOK_CONFIG: file });

  test('1 MiB, 1,000 networks and 2,000 node URLs are accepted', () => {
    const json = JSON.stringify({ networks: networks(1_000, 2) });
    const file = write(json.padEnd(CONFIG_FILE_LIMITS.bytes, ' '));
    expect(fs.statSync(file).size).toBe(1024 * 1024);
    expect(load(file).networks.find('NET999')?.rpcUrls).toHaveLength(2);
  });

  test.each([
    [
      'a byte over 1 MiB',
      () => write(' '.repeat(CONFIG_FILE_LIMITS.bytes + 1)),
      /which is 1,048,577 bytes, over the limit of 1 MiB$/,
    ],
    [
      '1,001 networks',
      () => write(JSON.stringify({ networks: networks(1_001) })),
      /which has 1001 networks, over the limit of 1000$/,
    ],
    [
      '2,001 node URLs',
      () =>
        write(
          JSON.stringify({
            networks: {
              ...networks(250, 8),
              EXTRA: { family: 'evm', chainId: 7, symbol: 'E', rpc: 'http://a' },
            },
          }),
        ),
      /whose networks have 2001 node URLs, over the limit of 2000$/,
    ],
    [
      'a FIFO',
      () => {
        const fifo = path.join(dir, 'config.fifo');
        execFileSync('mkfifo', [fifo]);
        return fifo;
      },
      /which is not a regular file but a FIFO \(named pipe\)$/,
    ],
    ['a directory', () => dir, /which is not a regular file but a directory$/],
    ['a missing file', () => path.join(dir, 'missing.json'), /which cannot be read \(ENOENT\)$/],
  ])('%s: refused in one line naming the file and the limit', (_, make, problem) => {
    const file = make();
    expect(() => load(file)).toThrow(ConfigError);
    expect(() => load(file)).toThrow(new RegExp(`^LEDGERHOOK_CONFIG names ${file}, `));
    expect(() => load(file)).toThrow(problem);
  });

  test.each([
    [
      'aliases',
      { aliases: Array.from({ length: 17 }, (_, i) => `ALIAS${i}`) },
      /has 17 names, over the limit of 16$/,
    ],
    [
      'rpc',
      { rpc: Array.from({ length: 9 }, (_, i) => `http://127.0.0.1:${9000 + i}`) },
      /has 9 URLs, over the limit of 8$/,
    ],
    [
      'ws',
      { ws: Array.from({ length: 9 }, () => 'ws://127.0.0.1:8546').join(',') },
      /has 9 URLs, over the limit of 8$/,
    ],
  ])("a network's %s list over its limit names the field", (field, spec, problem) => {
    const file = write(
      JSON.stringify({
        networks: { NET: { family: 'evm', chainId: 7, symbol: 'E', rpc: 'http://a', ...spec } },
      }),
    );
    expect(() => load(file)).toThrow(new RegExp(`^LEDGERHOOK_CONFIG networks\\.NET\\.${field} `));
    expect(() => load(file)).toThrow(problem);
  });

  test('a file that is not JSON is still refused as such', () => {
    expect(() => load(write('{ "networks": '))).toThrow(/^LEDGERHOOK_CONFIG cannot be read as JSON/);
  });
});

describe('the bounds of LEDGERHOOK_RISK_LISTS', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-risk-bounds-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  const env = (lists: string) => ({ LEDGERHOOK_RISK_LISTS: lists });

  test('the lists together may be 64 MiB: one byte more is refused, naming the file that crossed it', () => {
    const half = path.join(dir, 'half.csv');
    const rest = path.join(dir, 'rest.csv');
    // Sparse: only their sizes are looked at here.
    fs.writeFileSync(half, '');
    fs.truncateSync(half, RISK_LIST_LIMITS.bytes / 2);
    fs.writeFileSync(rest, '');
    fs.truncateSync(rest, RISK_LIST_LIMITS.bytes / 2);
    expect(loadConfig(env(`SOL=${half},${rest}`), dir).risk?.lists.SOL).toEqual([half, rest]);
    fs.truncateSync(rest, RISK_LIST_LIMITS.bytes / 2 + 1);
    expect(() => loadConfig(env(`SOL=${half},${rest}`), dir)).toThrow(
      new RegExp(
        `^LEDGERHOOK_RISK_LISTS names ${rest}, which brings the lists to 67,108,865 bytes, over the limit of 64 MiB for all of them`,
      ),
    );
  });

  test('at most 64 list files (the same file named again counts again)', () => {
    const file = path.join(dir, 'small.csv');
    fs.writeFileSync(file, 'A,10\n');
    const named = (n: number) => `SOL=${Array.from({ length: n }, () => file).join(',')}`;
    expect(loadConfig(env(named(RISK_LIST_LIMITS.files)), dir).risk?.lists.SOL).toHaveLength(64);
    expect(() => loadConfig(env(named(RISK_LIST_LIMITS.files + 1)), dir)).toThrow(
      /^LEDGERHOOK_RISK_LISTS names more than 64 files, the limit$/,
    );
  });
});

describe('LEDGERHOOK_TRACE_WAIT', () => {
  test('60 s by default; a duration; 0 (or 0s) for waiting for ever', () => {
    expect(loadConfig({}).traceWaitMs).toBe(60_000);
    expect(loadConfig({ LEDGERHOOK_TRACE_WAIT: '5m' }).traceWaitMs).toBe(300_000);
    expect(loadConfig({ LEDGERHOOK_TRACE_WAIT: '0' }).traceWaitMs).toBe(0);
    expect(loadConfig({ LEDGERHOOK_TRACE_WAIT: '0s' }).traceWaitMs).toBe(0);
  });

  test('anything else is refused naming it', () => {
    for (const bad of ['soon', '-1s', '2d'])
      expect(() => loadConfig({ LEDGERHOOK_TRACE_WAIT: bad })).toThrow(/^LEDGERHOOK_TRACE_WAIT /);
  });
});
