import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type Network as btcNetwork, networks as btcNetworks, payments } from 'bitcoinjs-lib';
import { afterAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../config.js';
import { ConfigError } from '../errors.js';
import { normalizeAddress } from './addresses.js';
import { loadNetworks } from './networks.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-networks-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

let files = 0;
/** Writes a config file of its own and returns its path. */
function configFile(content: unknown): string {
  const file = path.join(dir, `config-${files++}.json`);
  fs.writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
}

/** The ConfigError `fn` throws; fails the test when it throws nothing or something else. */
function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('the built-in catalog', () => {
  const catalog = loadNetworks({});

  test('lists ETH, BSC, POL, GLRM, BASE, ARB, OP, AVAX, SEPOLIA, ALGO, BTC, SOL, TRON, NILE and SHASTA', () => {
    expect(catalog.names()).toEqual([
      'ETH',
      'BSC',
      'POL',
      'GLRM',
      'BASE',
      'ARB',
      'OP',
      'AVAX',
      'SEPOLIA',
      'ALGO',
      'BTC',
      'SOL',
      'TRON',
      'NILE',
      'SHASTA',
    ]);
    expect(catalog.list().map((n) => n.name)).toEqual(catalog.names());
  });

  test.each([
    ['ETH', 'evm', 1, 'ETH', 18],
    ['BSC', 'evm', 56, 'BNB', 18],
    ['POL', 'evm', 137, 'POL', 18],
    ['GLRM', 'evm', 1284, 'GLMR', 18],
    ['BASE', 'evm', 8453, 'ETH', 18],
    ['ARB', 'evm', 42161, 'ETH', 18],
    ['OP', 'evm', 10, 'ETH', 18],
    ['AVAX', 'evm', 43114, 'AVAX', 18],
    ['SEPOLIA', 'evm', 11155111, 'ETH', 18],
    ['ALGO', 'algorand', undefined, 'ALGO', 6],
    ['BTC', 'bitcoin', undefined, 'BTC', 8],
    ['SOL', 'solana', undefined, 'SOL', 9],
    ['TRON', 'tron', undefined, 'TRX', 6],
    ['NILE', 'tron', undefined, 'TRX', 6],
    ['SHASTA', 'tron', undefined, 'TRX', 6],
  ] as const)(
    '%s: family %s, chain id %s, native %s with %i decimals',
    (name, family, chainId, symbol, decimals) => {
      const n = catalog.find(name)!;
      expect(n).toBeDefined();
      expect(n).toMatchObject({ name, family, symbol, decimals });
      expect(n.chainId).toBe(chainId);
      expect(n.rpcUrls.length).toBeGreaterThan(0);
      for (const url of [...n.rpcUrls, ...n.wsUrls, ...n.indexerUrls])
        expect(() => new URL(url)).not.toThrow();
      expect(n.addressFormat).not.toBe('');
      expect(n.defaultConfirmations).toBe(family === 'bitcoin' ? 2 : 1);
    },
  );

  test('EVM networks have WebSocket endpoints and ALGO an indexer', () => {
    for (const name of ['ETH', 'BSC', 'POL', 'GLRM', 'BASE', 'ARB', 'OP', 'AVAX', 'SEPOLIA']) {
      expect(catalog.find(name)!.wsUrls.every((u) => /^wss?:/.test(u))).toBe(true);
      expect(catalog.find(name)!.wsUrls.length).toBeGreaterThan(0);
    }
    expect(catalog.find('ALGO')!.indexerUrls.length).toBeGreaterThan(0);
  });

  test('GLMR is an alias of GLRM; names are case-insensitive; unknown names are undefined', () => {
    expect(catalog.find('GLMR')).toBe(catalog.find('GLRM'));
    expect(catalog.find('GLRM')!.aliases).toContain('GLMR');
    expect(catalog.find('glmr')!.name).toBe('GLRM');
    expect(catalog.find(' eth ')!.name).toBe('ETH');
    expect(catalog.find('DOGE')).toBeUndefined();
    expect(catalog.find('')).toBeUndefined();
    // An alias is not a network of its own.
    expect(catalog.names()).not.toContain('GLMR');
  });

  test.each([
    ['ethereum-mainnet', 'ETH'],
    ['bsc-mainnet', 'BSC'],
    ['polygon-mainnet', 'POL'],
    ['moonbeam-mainnet', 'GLRM'],
    ['base-mainnet', 'BASE'],
    ['arb-one-mainnet', 'ARB'],
    ['arbitrum-one-mainnet', 'ARB'],
    ['optimism-mainnet', 'OP'],
    ['avax-mainnet', 'AVAX'],
    ['avalanche-c-mainnet', 'AVAX'],
    ['ethereum-sepolia', 'SEPOLIA'],
    ['bitcoin-mainnet', 'BTC'],
    ['solana-mainnet', 'SOL'],
    ['algorand-mainnet', 'ALGO'],
    ['algorand-mainnet-algod', 'ALGO'],
    ['Ethereum-Mainnet', 'ETH'],
  ])("Tatum's v4 chain name %s is network %s", (tatum, name) => {
    expect(catalog.find(tatum)?.name).toBe(name);
    expect(catalog.names()).not.toContain(tatum.toUpperCase());
  });

  test('Tatum testnet names are not taken for mainnets', () => {
    for (const name of ['bitcoin-testnet', 'solana-devnet', 'algorand-testnet'])
      expect(catalog.find(name)).toBeUndefined();
    // ethereum-sepolia is the Sepolia testnet, never Ethereum mainnet.
    expect(catalog.find('ethereum-sepolia')).toBe(catalog.find('SEPOLIA'));
    expect(catalog.find('ethereum-sepolia')!.chainId).toBe(11155111);
    expect(catalog.find('ETH')!.aliases).not.toContain('ETHEREUM-SEPOLIA');
  });

  describe.each([
    ['BASE', 8453, 'ETH', ['BASE-MAINNET'], 'base-rpc.publicnode.com'],
    [
      'ARB',
      42161,
      'ETH',
      ['ARB-ONE-MAINNET', 'ARBITRUM-ONE-MAINNET', 'ARBITRUM'],
      'arbitrum-one-rpc.publicnode.com',
    ],
    ['OP', 10, 'ETH', ['OPTIMISM', 'OPTIMISM-MAINNET'], 'optimism-rpc.publicnode.com'],
    ['AVAX', 43114, 'AVAX', ['AVAX-MAINNET', 'AVALANCHE-C-MAINNET'], 'avalanche-c-chain-rpc.publicnode.com'],
    ['SEPOLIA', 11155111, 'ETH', ['ETHEREUM-SEPOLIA'], 'ethereum-sepolia-rpc.publicnode.com'],
  ] as const)('%s (chain id %i, native %s)', (name, chainId, symbol, aliases, host) => {
    const n = catalog.find(name)!;

    test('is a built-in EVM network with its chain id, native asset and confirmations', () => {
      expect(n).toMatchObject({
        name,
        family: 'evm',
        chainId,
        symbol,
        decimals: 18,
        defaultConfirmations: 1,
      });
      expect(n.addressFormat).toBe(catalog.find('ETH')!.addressFormat);
      expect(n.indexerUrls).toEqual([]);
    });

    test('resolves from each of its aliases, in any case, and the aliases are not networks', () => {
      expect(n.aliases).toEqual([...aliases]);
      for (const alias of aliases) {
        expect(catalog.find(alias)).toBe(n);
        expect(catalog.find(alias.toLowerCase())).toBe(n);
        expect(catalog.names()).not.toContain(alias);
      }
      expect(catalog.find(name.toLowerCase())).toBe(n);
    });

    test('defaults to the public publicnode.com endpoints over https and wss (never contacted here)', () => {
      expect(n.rpcUrls).toEqual([`https://${host}`]);
      expect(n.wsUrls).toEqual([`wss://${host}`]);
    });

    test('its endpoints are overridable by LEDGERHOOK_RPC_ and LEDGERHOOK_WS_', () => {
      const own = loadNetworks({
        [`LEDGERHOOK_RPC_${name}`]: 'http://127.0.0.1:8545',
        [`LEDGERHOOK_WS_${name}`]: 'ws://127.0.0.1:8546',
      }).find(name)!;
      expect(own.rpcUrls).toEqual(['http://127.0.0.1:8545']);
      expect(own.wsUrls).toEqual(['ws://127.0.0.1:8546']);
    });
  });

  test('every EVM network has its own chain id', () => {
    const ids = catalog.list().flatMap((n) => (n.family === 'evm' ? [n.chainId] : []));
    expect(new Set(ids).size).toBe(ids.length);
  });

  test('the catalog is a fresh copy per load: changing one does not change another', () => {
    const a = loadNetworks({});
    a.find('ETH')!.rpcUrls.push('http://mutated.example');
    expect(loadNetworks({}).find('ETH')!.rpcUrls).not.toContain('http://mutated.example');
  });
});

describe('environment overrides', () => {
  test('LEDGERHOOK_RPC_ETH and LEDGERHOOK_WS_ETH replace the endpoints, comma-separated, in order', () => {
    const catalog = loadNetworks({
      LEDGERHOOK_RPC_ETH: 'http://10.1.1.1:8545, https://eth.example.com/rpc',
      LEDGERHOOK_WS_ETH: 'ws://10.1.1.1:8546',
    });
    expect(catalog.find('ETH')!.rpcUrls).toEqual(['http://10.1.1.1:8545', 'https://eth.example.com/rpc']);
    expect(catalog.find('ETH')!.wsUrls).toEqual(['ws://10.1.1.1:8546']);
    // Other networks keep their defaults.
    expect(catalog.find('BSC')!.rpcUrls).toEqual(loadNetworks({}).find('BSC')!.rpcUrls);
  });

  test('LEDGERHOOK_INDEXER_ALGO replaces the Algorand indexer', () => {
    const catalog = loadNetworks({ LEDGERHOOK_INDEXER_ALGO: 'http://127.0.0.1:8980' });
    expect(catalog.find('ALGO')!.indexerUrls).toEqual(['http://127.0.0.1:8980']);
  });

  test('empty variables keep the defaults', () => {
    const catalog = loadNetworks({ LEDGERHOOK_RPC_ETH: '', LEDGERHOOK_WS_ETH: '  ' });
    expect(catalog.find('ETH')!.rpcUrls).toEqual(loadNetworks({}).find('ETH')!.rpcUrls);
    expect(catalog.find('ETH')!.wsUrls).toEqual(loadNetworks({}).find('ETH')!.wsUrls);
  });

  test.each([
    ['LEDGERHOOK_RPC_ETH', 'not a url'],
    ['LEDGERHOOK_RPC_BTC', 'ftp://node.example.com'],
    ['LEDGERHOOK_WS_ETH', 'wss://ok.example.com,::nope'],
    ['LEDGERHOOK_INDEXER_ALGO', 'file:///etc/passwd'],
  ])('an invalid URL in %s is a ConfigError naming the variable', (variable, value) => {
    const err = configError(() => loadNetworks({ [variable]: value }));
    expect(err.variable).toBe(variable);
    expect(err.message).toContain(variable);
  });

  test('loadConfig carries the catalog and its errors', () => {
    const config = loadConfig({ LEDGERHOOK_RPC_POL: 'http://127.0.0.1:1234' }, dir);
    expect(config.networks.find('POL')!.rpcUrls).toEqual(['http://127.0.0.1:1234']);
    expect(configError(() => loadConfig({ LEDGERHOOK_RPC_POL: 'nope' }, dir)).variable).toBe(
      'LEDGERHOOK_RPC_POL',
    );
  });
});

describe('the config file (LEDGERHOOK_CONFIG)', () => {
  test('adds an EVM network by configuration alone and overrides a built-in one', () => {
    const file = configFile({
      networks: {
        L2DEV: {
          family: 'evm',
          chainId: 901,
          symbol: 'ETH',
          rpc: ['http://127.0.0.1:9545'],
          ws: 'ws://127.0.0.1:9546',
          aliases: ['l2_devnet'],
        },
        BSC: { rpc: 'https://bsc.internal.example:8545' },
      },
    });
    const catalog = loadNetworks({ LEDGERHOOK_CONFIG: file });
    expect(catalog.names()).toEqual([...loadNetworks({}).names(), 'L2DEV']);
    expect(catalog.find('L2DEV')).toEqual({
      name: 'L2DEV',
      aliases: ['L2_DEVNET'],
      family: 'evm',
      chainId: 901,
      symbol: 'ETH',
      decimals: 18,
      rpcUrls: ['http://127.0.0.1:9545'],
      wsUrls: ['ws://127.0.0.1:9546'],
      indexerUrls: [],
      addressFormat: catalog.find('ETH')!.addressFormat,
      defaultConfirmations: 1,
    });
    expect(catalog.find('l2_devnet')).toBe(catalog.find('L2DEV'));
    // Its addresses are validated like every EVM network's.
    const lower = '0xd8da6bf26964af9d7eed9e03e53415d37aa96045';
    expect(normalizeAddress(catalog.find('L2DEV')!.family, lower)).toEqual({
      ok: true,
      address: '0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045',
    });

    // BSC: only the rpc changes; everything else stays built in.
    const bsc = catalog.find('BSC')!;
    const builtIn = loadNetworks({}).find('BSC')!;
    expect(bsc).toEqual({ ...builtIn, rpcUrls: ['https://bsc.internal.example:8545'] });
  });

  test('environment variables win over the config file', () => {
    const file = configFile({ networks: { BSC: { rpc: 'https://from-file.example' } } });
    const catalog = loadNetworks({ LEDGERHOOK_CONFIG: file, LEDGERHOOK_RPC_BSC: 'https://from-env.example' });
    expect(catalog.find('BSC')!.rpcUrls).toEqual(['https://from-env.example']);
  });

  test('a network added by file takes its environment overrides too', () => {
    const file = configFile({
      networks: { L2DEV: { family: 'evm', chainId: 901, symbol: 'ETH', rpc: 'https://a.example' } },
    });
    const catalog = loadNetworks({ LEDGERHOOK_CONFIG: file, LEDGERHOOK_RPC_L2DEV: 'http://127.0.0.1:9999' });
    expect(catalog.find('L2DEV')!.rpcUrls).toEqual(['http://127.0.0.1:9999']);
  });

  test('a built-in rollup can be pointed at a node of its own by the file, keeping the rest', () => {
    const file = configFile({ networks: { ARB: { rpc: 'http://10.0.0.5:8547', ws: 'ws://10.0.0.5:8548' } } });
    const arb = loadNetworks({ LEDGERHOOK_CONFIG: file }).find('arbitrum-one-mainnet')!;
    expect(arb).toEqual({
      ...loadNetworks({}).find('ARB')!,
      rpcUrls: ['http://10.0.0.5:8547'],
      wsUrls: ['ws://10.0.0.5:8548'],
    });
  });

  test('custom confirmations and decimals are kept', () => {
    const file = configFile({
      networks: {
        LTC: { family: 'bitcoin', symbol: 'LTC', decimals: 8, rpc: 'https://ltc.example', confirmations: 6 },
      },
    });
    const ltc = loadNetworks({ LEDGERHOOK_CONFIG: file }).find('LTC')!;
    expect(ltc).toMatchObject({ family: 'bitcoin', symbol: 'LTC', decimals: 8, defaultConfirmations: 6 });
    expect(ltc.chainId).toBeUndefined();
  });

  test.each([
    ['no family', { NEWNET: { chainId: 10, symbol: 'ETH', rpc: 'https://x.example' } }, /family/],
    [
      'an unknown family',
      { NEWNET: { family: 'cosmos', symbol: 'ATOM', rpc: 'https://x.example' } },
      /family/,
    ],
    ['no chainId (EVM)', { NEWNET: { family: 'evm', symbol: 'ETH', rpc: 'https://x.example' } }, /chainId/],
    [
      'a chainId that is not a positive integer',
      { NEWNET: { family: 'evm', chainId: -3, symbol: 'ETH', rpc: 'https://x.example' } },
      /chainId/,
    ],
    ['no rpc', { NEWNET: { family: 'evm', chainId: 10, symbol: 'ETH' } }, /rpc/],
    ['an empty rpc list', { NEWNET: { family: 'evm', chainId: 10, symbol: 'ETH', rpc: [] } }, /rpc/],
    ['no symbol', { NEWNET: { family: 'evm', chainId: 10, rpc: 'https://x.example' } }, /symbol/],
    [
      'an invalid name',
      { 'bad name!': { family: 'evm', chainId: 10, symbol: 'ETH', rpc: 'https://x.example' } },
      /named/,
    ],
  ])(
    'a new network with %s is a ConfigError naming LEDGERHOOK_CONFIG and the network',
    (_, networks, problem) => {
      const file = configFile({ networks });
      const err = configError(() => loadNetworks({ LEDGERHOOK_CONFIG: file }));
      expect(err.variable).toMatch(/^LEDGERHOOK_CONFIG networks\./);
      expect(err.variable).toContain(Object.keys(networks)[0]!);
      expect(err.message).toMatch(problem);
    },
  );

  test.each([
    ['rpc', { rpc: 'not-a-url' }],
    ['ws', { ws: ['wss://ok.example', 'no'] }],
    ['rpc', { rpc: 'gopher://old.example' }],
    ['rpc', { rpc: 42 }],
  ])('an invalid %s URL is a ConfigError naming the field', (field, spec) => {
    const file = configFile({ networks: { ETH: spec } });
    const err = configError(() => loadNetworks({ LEDGERHOOK_CONFIG: file }));
    expect(err.variable).toBe(`LEDGERHOOK_CONFIG networks.ETH.${field}`);
  });

  test('an unreadable file is a ConfigError naming LEDGERHOOK_CONFIG', () => {
    const err = configError(() => loadNetworks({ LEDGERHOOK_CONFIG: path.join(dir, 'missing.json') }));
    expect(err.variable).toBe('LEDGERHOOK_CONFIG');
    expect(err.message).toMatch(/^LEDGERHOOK_CONFIG /);
    // A directory cannot be read as a file either.
    expect(configError(() => loadNetworks({ LEDGERHOOK_CONFIG: dir })).variable).toBe('LEDGERHOOK_CONFIG');
  });

  test('a file that is not JSON is a ConfigError naming LEDGERHOOK_CONFIG', () => {
    const file = configFile('{ "networks": ');
    expect(configError(() => loadNetworks({ LEDGERHOOK_CONFIG: file })).variable).toBe('LEDGERHOOK_CONFIG');
  });

  test.each([
    ['null', 'LEDGERHOOK_CONFIG'],
    ['[1, 2]', 'LEDGERHOOK_CONFIG'],
    ['{"networks": ["ARB"]}', 'LEDGERHOOK_CONFIG networks'],
    ['{"networks": {"ARB": null}}', 'LEDGERHOOK_CONFIG networks.ARB'],
    ['{"networks": {"ARB": "evm"}}', 'LEDGERHOOK_CONFIG networks.ARB'],
    ['{"networks": {"ETH": {"aliases": "ETHER"}}}', 'LEDGERHOOK_CONFIG networks.ETH.aliases'],
    ['{"networks": {"ETH": {"aliases": [7]}}}', 'LEDGERHOOK_CONFIG networks.ETH.aliases'],
    ['{"networks": {"ETH": {"symbol": 5}}}', 'LEDGERHOOK_CONFIG networks.ETH.symbol'],
    ['{"networks": {"ETH": {"decimals": "18"}}}', 'LEDGERHOOK_CONFIG networks.ETH.decimals'],
    ['{"networks": {"ETH": {"confirmations": 0}}}', 'LEDGERHOOK_CONFIG networks.ETH.confirmations'],
    ['{"networks": {"ETH": {"confirmations": 1.5}}}', 'LEDGERHOOK_CONFIG networks.ETH.confirmations'],
  ])('a malformed file %s is a ConfigError naming %s, never a TypeError', (content, variable) => {
    const file = configFile(content);
    expect(configError(() => loadNetworks({ LEDGERHOOK_CONFIG: file })).variable).toBe(variable);
  });

  test('networks from the file carry no stray fields', () => {
    const file = configFile({ networks: { ETH: { confirmations: 3 } } });
    const eth = loadNetworks({ LEDGERHOOK_CONFIG: file }).find('ETH')!;
    expect(eth.defaultConfirmations).toBe(3);
    expect(Object.keys(eth).sort()).toEqual(Object.keys(loadNetworks({}).find('ETH')!).sort());
  });

  test('a file without networks leaves the built-in catalog', () => {
    const file = configFile({});
    expect(loadNetworks({ LEDGERHOOK_CONFIG: file }).list()).toEqual(loadNetworks({}).list());
  });
});

describe('the node API of a Bitcoin network', () => {
  test('is Esplora unless LEDGERHOOK_API_BTC chooses bitcoind', () => {
    expect(loadNetworks({}).find('BTC')?.api).toBeUndefined();
    expect(loadNetworks({ LEDGERHOOK_API_BTC: 'bitcoind' }).find('BTC')?.api).toBe('bitcoind');
  });

  test('an unknown API, or one on another family, is a configuration error naming the variable', () => {
    expect(() => loadNetworks({ LEDGERHOOK_API_BTC: 'electrum' })).toThrow(ConfigError);
    expect(() => loadNetworks({ LEDGERHOOK_API_BTC: 'electrum' })).toThrow(/LEDGERHOOK_API_BTC/);
    expect(() => loadNetworks({ LEDGERHOOK_API_ETH: 'esplora' })).toThrow(/LEDGERHOOK_API_ETH/);
  });

  test('an Algorand network is followed through algod or its indexer, nothing else', () => {
    expect(loadNetworks({ LEDGERHOOK_API_ALGO: 'indexer' }).find('ALGO')?.api).toBe('indexer');
    expect(() => loadNetworks({ LEDGERHOOK_API_ALGO: 'esplora' })).toThrow(
      /LEDGERHOOK_API_ALGO.*algod or indexer/,
    );
    expect(() => loadNetworks({ LEDGERHOOK_API_BTC: 'algod' })).toThrow(
      /LEDGERHOOK_API_BTC.*esplora or bitcoind/,
    );
  });
});

describe('Bitcoin test chains (bitcoinChain)', () => {
  // One key's addresses on each chain, made with bitcoinjs-lib from the same 20-byte hash.
  const hash = Buffer.alloc(20, 7);
  const addressesOf = (params: btcNetwork) => ({
    p2pkh: payments.p2pkh({ hash, network: params }).address!,
    p2sh: payments.p2sh({ hash, network: params }).address!,
    p2wpkh: payments.p2wpkh({ hash, network: params }).address!,
  });
  const mainnet = addressesOf(btcNetworks.bitcoin);
  const testnet = addressesOf(btcNetworks.testnet);
  const regtest = addressesOf(btcNetworks.regtest);

  test('a regtest and a testnet network take their own prefixes and refuse the others', () => {
    const catalog = loadNetworks({
      LEDGERHOOK_CONFIG: configFile({
        networks: {
          BTCREG: {
            family: 'bitcoin',
            bitcoinChain: 'regtest',
            symbol: 'BTC',
            decimals: 8,
            rpc: 'http://127.0.0.1:18443',
          },
          TBTC: {
            family: 'bitcoin',
            bitcoinChain: 'testnet',
            symbol: 'tBTC',
            decimals: 8,
            rpc: 'http://127.0.0.1:18332',
          },
        },
      }),
    });
    const reg = catalog.find('BTCREG')!;
    const test3 = catalog.find('TBTC')!;
    expect(reg.bitcoinChain).toBe('regtest');
    expect(reg.addressFormat).toMatch(/bcrt1/);
    expect(catalog.find('BTC')!.bitcoinChain).toBeUndefined();
    for (const address of Object.values(regtest)) {
      expect(normalizeAddress('bitcoin', address, reg.bitcoinChain)).toEqual({ ok: true, address });
    }
    for (const address of Object.values(testnet)) {
      expect(normalizeAddress('bitcoin', address, test3.bitcoinChain)).toEqual({ ok: true, address });
    }
    // Base58 versions are shared by testnet and regtest; bech32 prefixes are not.
    expect(normalizeAddress('bitcoin', testnet.p2wpkh, 'regtest').ok).toBe(false);
    expect(normalizeAddress('bitcoin', regtest.p2wpkh, 'testnet').ok).toBe(false);
    for (const address of Object.values(mainnet)) {
      expect(normalizeAddress('bitcoin', address, 'regtest').ok).toBe(false);
      expect(normalizeAddress('bitcoin', address).ok).toBe(true);
    }
    for (const address of Object.values(testnet)) expect(normalizeAddress('bitcoin', address).ok).toBe(false);
    expect(normalizeAddress('bitcoin', regtest.p2wpkh.toUpperCase(), 'regtest')).toEqual({
      ok: true,
      address: regtest.p2wpkh,
    });
  });

  test('an unknown chain, or bitcoinChain on another family, is a configuration error naming the field', () => {
    const unknown = configError(() =>
      loadNetworks({
        LEDGERHOOK_CONFIG: configFile({
          networks: {
            BTCX: { family: 'bitcoin', bitcoinChain: 'signet3', symbol: 'BTC', rpc: 'http://127.0.0.1:1' },
          },
        }),
      }),
    );
    expect(unknown.message).toMatch(/networks\.BTCX\.bitcoinChain/);
    const onEvm = configError(() =>
      loadNetworks({
        LEDGERHOOK_CONFIG: configFile({ networks: { ETH: { bitcoinChain: 'testnet' } } }),
      }),
    );
    expect(onEvm.message).toMatch(/networks\.ETH\.bitcoinChain/);
  });
});

describe('the genesis of an Algorand network', () => {
  test('ALGO is mainnet-v1.0 with its hash; a configured network carries its own', () => {
    const catalog = loadNetworks({
      LEDGERHOOK_CONFIG: configFile({
        networks: {
          ALGOTEST: {
            family: 'algorand',
            symbol: 'ALGO',
            decimals: 6,
            rpc: 'http://127.0.0.1:4001',
            genesisId: 'testnet-v1.0',
            genesisHash: 'SGO1GKSzyE7IEPItTxCByw9x8FmnrCDexi9/cOUJOiI=',
          },
        },
      }),
    });
    expect(catalog.find('ALGO')).toMatchObject({
      genesisId: 'mainnet-v1.0',
      genesisHash: 'wGHE2Pwdvd7S12BL5FaOP20EGYesN73ktiC1qzkkit8=',
    });
    expect(catalog.find('ALGOTEST')).toMatchObject({
      genesisId: 'testnet-v1.0',
      genesisHash: 'SGO1GKSzyE7IEPItTxCByw9x8FmnrCDexi9/cOUJOiI=',
    });
    expect(catalog.find('BTC')!.genesisId).toBeUndefined();
  });

  test('a genesis on another family, or a hash that is not base64 of 32 bytes, is a configuration error naming the field', () => {
    const onBitcoin = configError(() =>
      loadNetworks({ LEDGERHOOK_CONFIG: configFile({ networks: { BTC: { genesisId: 'mainnet-v1.0' } } }) }),
    );
    expect(onBitcoin.message).toMatch(/networks\.BTC\.genesisId/);
    const badHash = configError(() =>
      loadNetworks({ LEDGERHOOK_CONFIG: configFile({ networks: { ALGO: { genesisHash: 'not-a-hash' } } }) }),
    );
    expect(badHash.message).toMatch(/networks\.ALGO\.genesisHash/);
  });
});

describe('the commitment of a Solana network', () => {
  test('is confirmed unless the file says finalized, on a built-in or a new Solana network', () => {
    expect(loadNetworks({}).find('SOL')?.commitment).toBeUndefined();
    const file = configFile({
      networks: {
        SOL: { commitment: 'finalized' },
        TSOL: {
          family: 'solana',
          symbol: 'SOL',
          decimals: 9,
          rpc: 'http://127.0.0.1:8899',
          commitment: 'confirmed',
        },
      },
    });
    const networks = loadNetworks({ LEDGERHOOK_CONFIG: file });
    expect(networks.find('SOL')?.commitment).toBe('finalized');
    expect(networks.find('TSOL')?.commitment).toBe('confirmed');
  });

  test('another value, or a commitment on another family, is a configuration error naming the field', () => {
    const processed = configFile({ networks: { SOL: { commitment: 'processed' } } });
    expect(() => loadNetworks({ LEDGERHOOK_CONFIG: processed })).toThrow(ConfigError);
    expect(() => loadNetworks({ LEDGERHOOK_CONFIG: processed })).toThrow(
      /networks\.SOL\.commitment.*confirmed or finalized/,
    );
    const onEth = configFile({ networks: { ETH: { commitment: 'finalized' } } });
    expect(() => loadNetworks({ LEDGERHOOK_CONFIG: onEth })).toThrow(/networks\.ETH\.commitment/);
  });
});

describe('the traces setting of an EVM network', () => {
  test('auto unless set, in the config file or by LEDGERHOOK_TRACES_<NAME> (which wins)', () => {
    expect(loadNetworks({}).find('ETH')?.traces).toBeUndefined();
    const file = configFile({ networks: { ETH: { traces: 'parity' }, BSC: { traces: 'off' } } });
    const networks = loadNetworks({ LEDGERHOOK_CONFIG: file, LEDGERHOOK_TRACES_BSC: 'debug' });
    expect(networks.find('ETH')?.traces).toBe('parity');
    expect(networks.find('BSC')?.traces).toBe('debug');
  });

  test('an unknown value, or traces on another family, is a configuration error naming it', () => {
    const unknown = configFile({ networks: { ETH: { traces: 'geth' } } });
    expect(() => loadNetworks({ LEDGERHOOK_CONFIG: unknown })).toThrow(ConfigError);
    expect(() => loadNetworks({ LEDGERHOOK_CONFIG: unknown })).toThrow(
      /networks\.ETH\.traces must be one of auto, debug, parity, off/,
    );
    expect(() => loadNetworks({ LEDGERHOOK_TRACES_ETH: 'yes' })).toThrow(
      /^LEDGERHOOK_TRACES_ETH must be one of/,
    );
    expect(() => loadNetworks({ LEDGERHOOK_TRACES_BTC: 'auto' })).toThrow(
      /LEDGERHOOK_TRACES_BTC.*EVM network/,
    );
    const onSol = configFile({ networks: { SOL: { traces: 'auto' } } });
    expect(() => loadNetworks({ LEDGERHOOK_CONFIG: onSol })).toThrow(/networks\.SOL\.traces/);
  });
});

describe('the tracing node of an EVM network (tracesRpc)', () => {
  test('none unless named, in the config file or by LEDGERHOOK_TRACES_RPC_<NAME> (which wins)', () => {
    expect(loadNetworks({}).find('ETH')?.tracesRpcUrls).toBeUndefined();
    const file = configFile({
      networks: {
        ETH: { tracesRpc: 'http://archive:8545' },
        BSC: { tracesRpc: ['http://a:1', 'https://b/x'] },
      },
    });
    const networks = loadNetworks({ LEDGERHOOK_CONFIG: file, LEDGERHOOK_TRACES_RPC_BSC: 'http://c:2' });
    expect(networks.find('ETH')?.tracesRpcUrls).toEqual(['http://archive:8545']);
    expect(networks.find('BSC')?.tracesRpcUrls).toEqual(['http://c:2']);
    // Blocks and receipts still come from the network's own rpc.
    expect(networks.find('ETH')?.rpcUrls).toEqual(loadNetworks({}).find('ETH')?.rpcUrls);
  });

  test('a URL that is not http(s), an empty list, or another family, is a configuration error naming it', () => {
    expect(() => loadNetworks({ LEDGERHOOK_TRACES_RPC_ETH: 'ws://node:8546' })).toThrow(
      /^LEDGERHOOK_TRACES_RPC_ETH has "ws:\/\/node:8546", not an http\(s\) JSON-RPC URL/,
    );
    expect(() => loadNetworks({ LEDGERHOOK_TRACES_RPC_ETH: 'not a url' })).toThrow(
      /^LEDGERHOOK_TRACES_RPC_ETH has an invalid URL/,
    );
    expect(() => loadNetworks({ LEDGERHOOK_TRACES_RPC_BTC: 'http://node:8332' })).toThrow(
      /^LEDGERHOOK_TRACES_RPC_BTC is for EVM networks only/,
    );
    const empty = configFile({ networks: { ETH: { tracesRpc: [] } } });
    expect(() => loadNetworks({ LEDGERHOOK_CONFIG: empty })).toThrow(
      /networks\.ETH\.tracesRpc must name at least one URL/,
    );
  });
});

describe('Tron networks and their request headers', () => {
  test('TronGrid by default; Tatum’s names; headers from the file or LEDGERHOOK_HEADERS_<NAME>', () => {
    const catalog = loadNetworks({});
    expect(catalog.find('tron-mainnet')!.name).toBe('TRON');
    expect(catalog.find('tron-testnet')!.name).toBe('SHASTA');
    expect(catalog.find('TRON')!.rpcUrls).toEqual(['https://api.trongrid.io']);
    expect(catalog.find('TRON')!.headers).toBeUndefined();
    const file = configFile({ networks: { TRON: { headers: { 'TRON-PRO-API-KEY': 'from-file' } } } });
    expect(loadNetworks({ LEDGERHOOK_CONFIG: file }).find('TRON')!.headers).toEqual({
      'TRON-PRO-API-KEY': 'from-file',
    });
    const env = loadNetworks({
      LEDGERHOOK_CONFIG: file,
      LEDGERHOOK_HEADERS_NILE: '{"TRON-PRO-API-KEY":"nile"}',
    });
    expect(env.find('NILE')!.headers).toEqual({ 'TRON-PRO-API-KEY': 'nile' });
  });

  test.each([
    [{ LEDGERHOOK_HEADERS_TRON: 'not json' }, 'LEDGERHOOK_HEADERS_TRON', /JSON object/],
    [{ LEDGERHOOK_HEADERS_TRON: '["a"]' }, 'LEDGERHOOK_HEADERS_TRON', /object of header names/],
    [{ LEDGERHOOK_HEADERS_TRON: '{"bad name":"x"}' }, 'LEDGERHOOK_HEADERS_TRON', /not a header name/],
    [{ LEDGERHOOK_HEADERS_TRON: '{"x":"a\\r\\nInjected: 1"}' }, 'LEDGERHOOK_HEADERS_TRON.x', /line breaks/],
    [{ LEDGERHOOK_HEADERS_TRON: '{"x":1}' }, 'LEDGERHOOK_HEADERS_TRON.x', /a string/],
    [{ LEDGERHOOK_HEADERS_ETH: '{"x":"y"}' }, 'LEDGERHOOK_HEADERS_ETH', /Tron networks only/],
  ])('%j is refused, naming %s', (env, field, detail) => {
    const error = configError(() => loadNetworks(env));
    expect(error.variable).toBe(field);
    expect(error.message).toMatch(detail);
  });

  test('more than 16 headers, or a value past 4,096 characters, is refused', () => {
    const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`x-h${i}`, 'v']));
    expect(
      configError(() => loadNetworks({ LEDGERHOOK_HEADERS_TRON: JSON.stringify(many) })).message,
    ).toMatch(/17 headers/);
    const long = JSON.stringify({ x: 'v'.repeat(4097) });
    expect(configError(() => loadNetworks({ LEDGERHOOK_HEADERS_TRON: long })).message).toMatch(
      /4096 characters/,
    );
  });
});
