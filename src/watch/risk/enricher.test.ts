import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, test } from 'vitest';
import { startReceiver } from '../../../test/helpers/receiver.js';
import { loadNetworks } from '../../chains/networks.js';
import { createMetrics } from '../../http/metrics.js';
import type { RiskConfig } from '../../risk-config.js';
import { createRiskEnricher } from './enricher.js';

const logger = pino({ level: 'silent' });
const networks = loadNetworks({});
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

function enricher(config: RiskConfig | undefined) {
  const created = createRiskEnricher(config, { logger, networks });
  closers.push(() => created.close());
  return created;
}

const base: RiskConfig = {
  networks: ['SOL'],
  lists: {},
  url: undefined,
  token: undefined,
  timeoutMs: 250,
  cacheTtlMs: 0,
};

describe('createRiskEnricher', () => {
  test('no configuration: no network carries the field', () => {
    expect(enricher(undefined).forNetwork('SOL')).toBeUndefined();
  });

  test('lists and HTTP combined by the highest score, for the configured networks only; EVM case ignored', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-risk-'));
    closers.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
    fs.writeFileSync(path.join(dir, 'sol.txt'), 'Sanctioned\n');
    fs.writeFileSync(path.join(dir, 'eth.csv'), '0xAbCd,40\n');
    const receiver = await startReceiver(() => ({
      status: 200,
      body: JSON.stringify({ scores: { Sanctioned: 20, Mixer: 65 } }),
    }));
    closers.push(() => receiver.close());
    const risk = enricher({
      ...base,
      networks: ['SOL', 'ETH'],
      lists: { SOL: [path.join(dir, 'sol.txt')], ETH: [path.join(dir, 'eth.csv')] },
      url: receiver.url,
    });
    expect(risk.forNetwork('BTC')).toBeUndefined();
    const sol = risk.forNetwork('solana-mainnet');
    expect(await sol?.(['Mixer', 'Sanctioned', 'Nobody'])).toEqual([
      { Mixer: 65 },
      { Sanctioned: 100 },
      { Nobody: 0 },
    ]);
    expect(await risk.forNetwork('ETH')?.(['0xabcd'])).toEqual([{ '0xabcd': 40 }]);
  });

  test('Tron lists are compared as base58: a hex 41… entry scores the base58 counterparty', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-risk-'));
    closers.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
    // USDT's contract, listed once in hex (as java-tron writes it) and once as a score of its own.
    fs.writeFileSync(
      path.join(dir, 'tron.csv'),
      '41a614f803b6fd780986a42c78ec9c7f77e6ded13c,70\nTL24LCps5FKwp3PoU1MvrYrwhi5LU1tHre,30\n',
    );
    const risk = enricher({ ...base, networks: ['TRON'], lists: { TRON: [path.join(dir, 'tron.csv')] } });
    expect(
      await risk.forNetwork('TRON')?.([
        'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
        'TL24LCps5FKwp3PoU1MvrYrwhi5LU1tHre',
        'T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb',
      ]),
    ).toEqual([
      { TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t: 70 },
      { TL24LCps5FKwp3PoU1MvrYrwhi5LU1tHre: 30 },
      { T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb: 0 },
    ]);
  });

  test('its failures reach /metrics', async () => {
    const receiver = await startReceiver(() => ({ status: 503 }));
    closers.push(() => receiver.close());
    const risk = enricher({ ...base, url: receiver.url });
    expect(await risk.forNetwork('SOL')?.(['A'])).toBeUndefined();
    const metrics = createMetrics();
    metrics.observe({ risk: () => risk.status() });
    const text = await metrics.registry.metrics();
    expect(text).toContain('ledgerhook_risk_failures_total{network="SOL",provider="http",reason="error"} 1');
    expect(text).toContain('ledgerhook_risk_lookups_total{network="SOL"} 1');
  });
});
