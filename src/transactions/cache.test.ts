import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { loadNetworks } from '../chains/networks.js';
import { openStore, type Store } from '../store/db.js';
import { boundedCache, createTransactions } from './service.js';
import { TRANSACTION_FIELDS, type TransactionView } from './types.js';

const TX = `0x${'ab'.repeat(32)}`;
const OTHER_TX = `0x${'cd'.repeat(32)}`;

function view(id: string): TransactionView {
  const empty = Object.fromEntries(TRANSACTION_FIELDS.map((f) => [f, null])) as unknown as TransactionView;
  return { ...empty, id, fee: 2n ** 60n + 1n, confirmedRound: 7n, txType: 'transfer' };
}

describe('final transactions in memory', () => {
  const dirs: string[] = [];
  const stores: Store[] = [];
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close();
    for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
  });

  async function setUp(final: boolean) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-txcache-'));
    dirs.push(dir);
    const store = await openStore({ pgliteDir: dir });
    stores.push(store);
    await store.migrate();
    const asked: string[] = [];
    const deps = {
      db: store.db,
      networks: loadNetworks({}),
      lookupFor: () => async (txId: string) => {
        asked.push(txId);
        return { view: view(txId), final };
      },
    };
    return { store, asked, deps, transactions: createTransactions(deps) };
  }

  test('asked again, a final transaction is answered from memory, even with the database gone', async () => {
    const { store, asked, transactions } = await setUp(true);
    const first = await transactions.get('ETH', TX);
    expect(first).toContain(`"fee":${2n ** 60n + 1n}`);
    await store.close();
    expect(await transactions.get('ETH', TX.toUpperCase().replace('0X', '0x'))).toBe(first);
    expect(asked).toEqual([TX]);
    // Anything not in memory needs the database, which is closed: the memory answered above.
    await expect(transactions.get('ETH', OTHER_TX)).rejects.toThrow();
  });

  test('a transaction another process cached is read from the database, not the node', async () => {
    const { asked, deps, transactions } = await setUp(true);
    const first = await transactions.get('ETH', TX);
    const otherProcess = createTransactions(deps);
    expect(await otherProcess.get('ETH', TX)).toBe(first);
    expect(asked).toEqual([TX]);
  });

  test('a transaction not yet final is asked of the node every time', async () => {
    const { asked, transactions } = await setUp(false);
    await transactions.get('ETH', TX);
    await transactions.get('ETH', TX);
    expect(asked).toEqual([TX, TX]);
  });
});

describe('boundedCache', () => {
  test('drops the least recently used entries once keys and values pass the bound', () => {
    const cache = boundedCache(12); // three entries of 1 + 3 characters
    cache.set('a', 'aaa');
    cache.set('b', 'bbb');
    cache.set('c', 'ccc');
    expect(cache.get('a')).toBe('aaa'); // now the most recently used
    cache.set('d', 'ddd');
    expect(cache.get('b')).toBeUndefined();
    expect([cache.get('a'), cache.get('c'), cache.get('d')]).toEqual(['aaa', 'ccc', 'ddd']);
    expect(cache.size).toBe(3);
  });

  test('a value larger than the bound is not kept, and replacing a value frees the old one', () => {
    const cache = boundedCache(9);
    cache.set('big', 'x'.repeat(8));
    expect(cache.get('big')).toBeUndefined();
    cache.set('k', 'v1');
    cache.set('k', 'value2');
    cache.set('j', 'y');
    expect([cache.get('k'), cache.get('j')]).toEqual(['value2', 'y']);
  });
});
