import { afterEach, describe, expect, test } from 'vitest';
import { type Receiver, type Reply, startReceiver } from '../../../test/helpers/receiver.js';
import { createHttpRiskProvider, parseScoresAnswer } from './http.js';
import { createRiskStats, enrichWithRisk, RiskCircuitOpenError, RiskTimeoutError } from './provider.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const json = (body: unknown, status = 200): Reply => ({
  status,
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(body),
});

async function service(reply: (addresses: string[]) => Reply): Promise<Receiver> {
  const receiver = await startReceiver((request) => reply(JSON.parse(request.body).addresses));
  closers.push(() => receiver.close());
  return receiver;
}

function provider(receiver: Receiver, options: Partial<Parameters<typeof createHttpRiskProvider>[0]> = {}) {
  const created = createHttpRiskProvider({
    url: receiver.url,
    timeoutMs: 1_000,
    cacheTtlMs: 60_000,
    ...options,
  });
  closers.push(() => created.close());
  return created;
}

const sent = (receiver: Receiver) => receiver.requests.map((r) => JSON.parse(r.body));

describe('the HTTP risk provider', () => {
  test('POSTs the network and addresses with the token, and reads the scores back', async () => {
    const receiver = await service(() => json({ scores: { A: 100, B: 0 } }));
    const p = provider(receiver, { token: 'sekrit' });
    const scores = await p.scores('SOL', ['A', 'B', 'C']);
    expect(Object.fromEntries(scores)).toEqual({ A: 100, B: 0 });
    expect(sent(receiver)).toEqual([{ network: 'SOL', addresses: ['A', 'B', 'C'] }]);
    expect(receiver.requests[0]!.method).toBe('POST');
    expect(receiver.requests[0]!.headers.authorization).toBe('Bearer sekrit');
    expect(receiver.requests[0]!.headers['content-type']).toBe('application/json');
  });

  test('the cache answers within its TTL and asks only for what it does not hold', async () => {
    let clock = 1_000_000;
    const receiver = await service((addresses) =>
      json({ scores: Object.fromEntries(addresses.map((a) => [a, a === 'A' ? 90 : 0])) }),
    );
    const p = provider(receiver, { cacheTtlMs: 10_000, now: () => clock });
    await p.scores('SOL', ['A', 'B']);
    expect(Object.fromEntries(await p.scores('SOL', ['A', 'B']))).toEqual({ A: 90 });
    expect(receiver.requests).toHaveLength(1);
    await p.scores('SOL', ['A', 'C']);
    await p.scores('ETH', ['A']);
    expect(sent(receiver).map((body) => [body.network, body.addresses])).toEqual([
      ['SOL', ['A', 'B']],
      ['SOL', ['C']],
      ['ETH', ['A']],
    ]);
    clock += 10_000;
    await p.scores('SOL', ['A']);
    expect(receiver.requests).toHaveLength(4);
  });

  test('a slow service: the notification gets no field, and on time', async () => {
    const receiver = await service(() => ({ hang: true }));
    const stats = createRiskStats();
    const p = provider(receiver, { timeoutMs: 100 });
    const started = performance.now();
    const result = await enrichWithRisk(p, 'SOL', ['A'], { deadlineMs: 100, stats });
    const elapsed = performance.now() - started;
    expect(result).toBeUndefined();
    expect(elapsed).toBeLessThan(100 + 200);
    expect(stats.status().failures).toEqual([
      { network: 'SOL', provider: 'http', reason: 'timeout', count: 1 },
    ]);
    // The provider's own timeout, when nobody else gives up first.
    await expect(p.scores('SOL', ['B'])).rejects.toBeInstanceOf(RiskTimeoutError);
  });

  test('failing calls open the circuit; after the cool-down one trial closes it or opens it again', async () => {
    let clock = 0;
    let status = 500;
    const receiver = await service(() => json({ scores: {} }, status));
    const p = provider(receiver, {
      failureThreshold: 2,
      cooldownMs: 30_000,
      cacheTtlMs: 0,
      now: () => clock,
    });
    await expect(p.scores('SOL', ['A'])).rejects.toThrow(/answered HTTP 500/);
    await expect(p.scores('SOL', ['A'])).rejects.toThrow(/answered HTTP 500/);
    expect(p.circuit()).toBe('open');
    await expect(p.scores('SOL', ['A'])).rejects.toBeInstanceOf(RiskCircuitOpenError);
    expect(receiver.requests).toHaveLength(2);

    clock += 30_000; // half-open: the trial fails, so it opens again for a whole cool-down
    await expect(p.scores('SOL', ['A'])).rejects.toThrow(/answered HTTP 500/);
    expect(p.circuit()).toBe('open');
    clock += 29_999;
    await expect(p.scores('SOL', ['A'])).rejects.toBeInstanceOf(RiskCircuitOpenError);
    expect(receiver.requests).toHaveLength(3);

    clock += 1;
    status = 200;
    const trial = p.scores('SOL', ['A']);
    // While the one trial is in flight, nobody else is let through.
    await expect(p.scores('SOL', ['B'])).rejects.toBeInstanceOf(RiskCircuitOpenError);
    await expect(trial).resolves.toEqual(new Map());
    expect(p.circuit()).toBe('closed');
    await p.scores('SOL', ['B']);
    expect(receiver.requests).toHaveLength(5);
  });

  test('an invalid answer is a failure', async () => {
    const receiver = await service(() => ({ status: 200, body: 'not json' }));
    await expect(provider(receiver).scores('SOL', ['A'])).rejects.toThrow();
    expect(() => parseScoresAnswer({ scores: { A: 101 } })).toThrow(/not a number from 0 to 100/);
    expect(() => parseScoresAnswer({ scores: { A: '5' } })).toThrow(/not a number from 0 to 100/);
    expect(() => parseScoresAnswer({ risk: {} })).toThrow(/without a "scores" object/);
    expect(() => parseScoresAnswer(null)).toThrow(/without a "scores" object/);
  });

  test('a refused connection is an error, counted, and the field left out', async () => {
    const receiver = await service(() => json({ scores: {} }));
    const url = receiver.url;
    await receiver.close();
    const stats = createRiskStats();
    const p = createHttpRiskProvider({ url, timeoutMs: 1_000, cacheTtlMs: 0 });
    closers.push(() => p.close());
    expect(await enrichWithRisk(p, 'SOL', ['A'], { deadlineMs: 1_000, stats })).toBeUndefined();
    expect(stats.status().failures).toEqual([
      { network: 'SOL', provider: 'http', reason: 'error', count: 1 },
    ]);
  });
});
