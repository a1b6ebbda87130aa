import { describe, expect, test } from 'vitest';
import { createRiskStats, enrichWithRisk, RiskCircuitOpenError, type RiskProvider } from './provider.js';

const fixed = (name: string, scores: Record<string, number>): RiskProvider => ({
  name,
  scores: async (_network, addresses) =>
    new Map(addresses.filter((a) => a in scores).map((a) => [a, scores[a]!] as [string, number])),
});

const never = (name: string): RiskProvider => ({ name, scores: () => new Promise(() => {}) });

describe('enrichWithRisk', () => {
  test('one object per address in the given order, 0 where nothing is known', async () => {
    const result = await enrichWithRisk(fixed('lists', { b: 100, c: 40 }), 'SOL', ['c', 'a', 'b']);
    expect(result).toEqual([{ c: 40 }, { a: 0 }, { b: 100 }]);
  });

  test('several providers: the highest score of each address', async () => {
    const result = await enrichWithRisk(
      [fixed('lists', { a: 100, b: 10 }), fixed('http', { b: 70 })],
      'SOL',
      ['a', 'b'],
    );
    expect(result).toEqual([{ a: 100 }, { b: 70 }]);
  });

  test('a provider that never answers: undefined at the deadline, counted as a timeout', async () => {
    const stats = createRiskStats();
    const started = performance.now();
    const result = await enrichWithRisk([fixed('lists', { a: 100 }), never('http')], 'SOL', ['a'], {
      deadlineMs: 50,
      stats,
    });
    const elapsed = performance.now() - started;
    expect(result).toBeUndefined();
    expect(elapsed).toBeGreaterThanOrEqual(45);
    expect(elapsed).toBeLessThan(50 + 200);
    expect(stats.status()).toEqual({
      lookups: { SOL: 1 },
      failures: [{ network: 'SOL', provider: 'http', reason: 'timeout', count: 1 }],
    });
  });

  test('a provider that throws, synchronously or not, or whose circuit is open: undefined, never a throw', async () => {
    const stats = createRiskStats();
    const throwing: RiskProvider = {
      name: 'sync',
      scores: () => {
        throw new Error('boom');
      },
    };
    const rejecting: RiskProvider = { name: 'async', scores: async () => Promise.reject(new Error('down')) };
    const open: RiskProvider = {
      name: 'http',
      scores: async () => Promise.reject(new RiskCircuitOpenError()),
    };
    for (const provider of [throwing, rejecting, open]) {
      await expect(enrichWithRisk(provider, 'SOL', ['a'], { stats })).resolves.toBeUndefined();
    }
    expect(stats.status().failures.map((f) => [f.provider, f.reason])).toEqual([
      ['sync', 'error'],
      ['async', 'error'],
      ['http', 'circuit_open'],
    ]);
  });

  test('an address given twice is asked once and answered twice', async () => {
    const asked: string[][] = [];
    const provider: RiskProvider = {
      name: 'lists',
      scores: async (_n, addresses) => {
        asked.push(addresses);
        return new Map([['a', 5]]);
      },
    };
    expect(await enrichWithRisk(provider, 'SOL', ['a', 'b', 'a'])).toEqual([{ a: 5 }, { b: 0 }, { a: 5 }]);
    expect(asked).toEqual([['a', 'b']]);
  });
});
