import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { loadConfig } from '../config.js';
import { selectNetworks } from './doctor-networks.js';

const dataDir = path.join(os.tmpdir(), 'ledgerhook-doctor-selection');

describe("doctor's network selection", () => {
  test('a catalog network is checked only when a subscription uses it or its node is configured', () => {
    const config = loadConfig({
      LEDGERHOOK_DATA_DIR: dataDir,
      LEDGERHOOK_RPC_BSC: 'http://127.0.0.1:8545',
      LEDGERHOOK_TRACES_RPC_POL: 'http://127.0.0.1:8546',
    });
    const selection = selectNetworks(config, ['SOL']);
    expect(selection.checked.map(({ network, why }) => [network.name, why])).toEqual([
      ['BSC', 'node configured'],
      ['POL', 'node configured'],
      ['SOL', 'used by subscriptions'],
    ]);
    expect(selection.notChecked).toEqual([
      'ETH',
      'GLRM',
      'BASE',
      'ARB',
      'OP',
      'AVAX',
      'SEPOLIA',
      'ALGO',
      'BTC',
      'TRON',
      'NILE',
      'SHASTA',
    ]);
    expect(selection.unknownInUse).toEqual([]);
  });

  test('networks of the configuration file, the anchor network, and subscriptions on networks no longer configured', () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-doctor-')), 'config.json');
    fs.writeFileSync(
      file,
      JSON.stringify({
        networks: {
          LOCAL: { family: 'evm', chainId: 31337, symbol: 'ETH', rpc: ['http://127.0.0.1:8545'] },
          // Only the traces setting changes: the node is still the catalog's.
          POL: { traces: 'off' },
        },
      }),
    );
    const config = loadConfig({
      LEDGERHOOK_DATA_DIR: dataDir,
      LEDGERHOOK_CONFIG: file,
      LEDGERHOOK_ANCHOR_NETWORK: 'ETH',
      LEDGERHOOK_ANCHOR_KEY: `0x${'11'.repeat(32)}`,
    });
    const selection = selectNetworks(config, ['ETH', 'DEVNET']);
    expect(selection.checked.map(({ network, why }) => [network.name, why])).toEqual([
      ['ETH', 'used by subscriptions, anchor network'],
      ['LOCAL', 'node configured'],
    ]);
    expect(selection.notChecked).toContain('POL');
    expect(selection.unknownInUse).toEqual(['DEVNET']);
  });

  test('with the database unread, only configured nodes are checked', () => {
    const config = loadConfig({ LEDGERHOOK_DATA_DIR: dataDir });
    expect(selectNetworks(config, undefined).checked).toEqual([]);
  });
});
