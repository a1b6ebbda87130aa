import crypto from 'node:crypto';
import { getAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../../test/helpers/app.js';
import { backends } from '../../test/helpers/env.js';
import { sampleRegistryBody } from '../../test/helpers/registry-body.js';

const API = '/api/v1/subscription';
const URL_ = 'http://127.0.0.1:9/hook';
const randomEvm = () => `0x${crypto.randomBytes(20).toString('hex')}`;
const BTC = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';

interface Problem {
  status: number;
  title: string;
  detail: string;
  errors?: { pointer?: string; parameter?: string; detail: string }[];
}

describe.each(backends)('address lists through the API on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(backend);
  });
  afterAll(async () => {
    await t?.close();
  });

  async function createList(addresses: string[], chain = 'ETH', token?: string): Promise<string> {
    const res = await t.request('POST', API, {
      body: { type: 'ADDRESS_TRANSACTION', attr: { addresses, chain, url: URL_ } },
      token,
    });
    expect(res.status, res.text).toBe(201);
    return (res.body as { id: string }).id;
  }

  async function allAddresses(id: string): Promise<string[]> {
    const out: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await t.request(
        'GET',
        `${API}/${id}/addresses?limit=100${cursor ? `&cursor=${cursor}` : ''}`,
      );
      expect(res.status, res.text).toBe(200);
      const page = res.body as { data: { address: string }[]; next_cursor: string | null };
      out.push(...page.data.map((d) => d.address));
      cursor = page.next_cursor;
    } while (cursor);
    return out;
  }

  const change = (id: string, body: unknown, token?: string) =>
    t.request('POST', `${API}/${id}/addresses`, { body, token });

  test('a list is created, shown by its size, paged in order, grown and shrunk idempotently', async () => {
    const addresses = Array.from({ length: 250 }, randomEvm);
    // Two spellings of one address are one.
    addresses.push(addresses[0]!.toUpperCase().replace('0X', '0x'));
    const id = await createList(addresses);
    const view = await t.request('GET', `${API}/${id}`);
    expect((view.body as { attr: unknown }).attr).toEqual({ chain: 'ETH', url: URL_, addressCount: 250 });
    const stored = await allAddresses(id);
    expect(stored).toEqual(
      addresses
        .slice(0, 250)
        .map((a) => getAddress(a))
        .sort(),
    );

    const [a, b] = [randomEvm(), randomEvm()];
    let res = await change(id, { add: [a, a, b, addresses[1]], remove: [addresses[2], randomEvm()] });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ added: 2, removed: 1, addressCount: 251 });
    // The same again changes nothing.
    res = await change(id, { add: [a, b], remove: [addresses[2]] });
    expect(res.body).toEqual({ added: 0, removed: 0, addressCount: 251 });

    const got = await t.request('GET', `${API}/${id}/addresses/${a.toUpperCase().replace('0X', '0x')}`);
    expect(got.status, got.text).toBe(200);
    expect(got.body).toEqual({ address: getAddress(a), createdAt: expect.any(String) });
    const absent = await t.request('GET', `${API}/${id}/addresses/${addresses[2]}`);
    expect(absent.status).toBe(404);
    expect((absent.body as Problem).detail).toContain('does not watch');
    const bad = await t.request('GET', `${API}/${id}/addresses/0x1234`);
    expect(bad.status).toBe(400);
    expect((bad.body as Problem).errors?.[0]?.parameter).toBe('address');
  });

  test('one invalid address among many: all named by pointer, nothing applied', async () => {
    const id = await createList([randomEvm()]);
    const add = Array.from({ length: 1_000 }, randomEvm);
    add[3] = '0x1234';
    add[500] = BTC;
    // A fixed address with several capitals: a random one may have none or one, and lowering
    // its only capital leaves a valid all-lowercase address (1 run in ~2,000 failed so).
    const badChecksum = '0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045'.replace('A', 'a');
    const remove = [randomEvm(), badChecksum];
    const res = await change(id, { add, remove });
    expect(res.status, res.text).toBe(400);
    const problem = res.body as Problem;
    expect(problem.errors!.map((e) => e.pointer)).toEqual(['#/add/3', '#/add/500', '#/remove/1']);
    expect(await allAddresses(id)).toHaveLength(1);

    // Past 100 bad ones, the first 100 are named and the count says how many.
    const many = Array.from({ length: 300 }, (_, i) => `0x${i}`);
    const capped = await change(id, { add: many });
    expect(capped.status).toBe(400);
    const named = (capped.body as Problem).errors!;
    expect(named).toHaveLength(101);
    expect(named[99]!.pointer).toBe('#/add/99');
    expect(named[100]!.detail).toBe('and 200 more invalid addresses (300 of 300); nothing was changed');

    // An address both added and removed is ambiguous.
    const both = randomEvm();
    const ambiguous = await change(id, { add: [both], remove: [both.toUpperCase().replace('0X', '0x')] });
    expect(ambiguous.status).toBe(400);
    expect((ambiguous.body as Problem).errors![0]!.pointer).toBe('#/remove/0');
    expect(await allAddresses(id)).toHaveLength(1);

    // The same for a create: nothing is created.
    const before = await t.request('GET', `${API}?limit=100`);
    const created = await t.request('POST', API, {
      body: {
        type: 'ADDRESS_TRANSACTION',
        attr: { addresses: [randomEvm(), 'nope'], chain: 'ETH', url: URL_ },
      },
    });
    expect(created.status).toBe(400);
    expect((created.body as Problem).errors!.map((e) => e.pointer)).toEqual(['#/attr/addresses/1']);
    const after = await t.request('GET', `${API}?limit=100`);
    expect((after.body as { data: unknown[] }).data).toHaveLength(
      (before.body as { data: unknown[] }).data.length,
    );
  });

  test('wrong shapes, NUL bytes, lone surrogates and more than 100,000 are 400 naming the field', async () => {
    const id = await createList([]);
    const cases: [unknown, string][] = [
      [{ add: 'x' }, '#/add'],
      [{ add: [1] }, '#/add/0'],
      [{ add: [randomEvm()], extra: true }, '#/extra'],
      [{ add: [`${randomEvm()}\u0000`] }, '#/add/0'],
      [{ remove: [randomEvm(), '\ud800'] }, '#/remove/1'],
      [{ add: null }, '#/add'],
    ];
    for (const [body, pointer] of cases) {
      const res = await change(id, body);
      expect(res.status, `${JSON.stringify(body)}: ${res.text}`).toBe(400);
      expect((res.body as Problem).errors!.map((e) => e.pointer)).toContain(pointer);
    }
    // Raw text: a lone surrogate escape cannot be sent through JSON.stringify.
    const raw = await t.request('POST', `${API}/${id}/addresses`, { rawBody: '{"add":["\\udc00"]}' });
    expect(raw.status).toBe(400);

    const tooMany = Array.from({ length: 60_001 }, randomEvm);
    const res = await change(id, { add: tooMany, remove: tooMany.slice(0, 40_000) });
    expect(res.status, res.text.slice(0, 300)).toBe(400);
    expect((res.body as Problem).detail).toContain('holds 100001 addresses');
    const over = await change(id, { add: Array.from({ length: 100_001 }, randomEvm) });
    expect(over.status).toBe(400);
    expect((over.body as Problem).errors![0]!.pointer).toBe('#/add');
    expect(await allAddresses(id)).toEqual([]);

    // Both and neither of attr.address and attr.addresses.
    const both = await t.request('POST', API, {
      body: {
        type: 'ADDRESS_TRANSACTION',
        attr: { address: randomEvm(), addresses: [], chain: 'ETH', url: URL_ },
      },
    });
    expect(both.status).toBe(400);
    expect((both.body as Problem).errors![0]!.pointer).toBe('#/attr/addresses');
    const neither = await t.request('POST', API, {
      body: { type: 'ADDRESS_TRANSACTION', attr: { chain: 'ETH', url: URL_ } },
    });
    expect(neither.status).toBe(400);
    expect((neither.body as Problem).errors![0]!.pointer).toBe('#/attr/address');
  });

  test("another account's list is 404; a REGISTRY_EVENTS or deleted subscription is 409", async () => {
    const id = await createList([randomEvm()]);
    const other = await t.tokenFor('list-stranger');
    for (const res of [
      await change(id, { add: [randomEvm()] }, other),
      await t.request('GET', `${API}/${id}/addresses`, { token: other }),
      await t.request('GET', `${API}/${id}/addresses/${randomEvm()}`, { token: other }),
    ])
      expect(res.status).toBe(404);

    const registry = await t.request('POST', '/api/v1/registry/create', {
      body: sampleRegistryBody({ callback_url: URL_ }),
    });
    expect(registry.status, registry.text).toBe(201);
    const endpoints = await t.request('GET', `${API}?type=REGISTRY_EVENTS&limit=1`);
    const endpoint = (endpoints.body as { data: { id: string }[] }).data[0]!.id;
    const onRegistry = await change(endpoint, { add: [randomEvm()] });
    expect(onRegistry.status).toBe(409);
    expect((onRegistry.body as Problem).detail).toContain('REGISTRY_EVENTS');

    expect((await t.request('DELETE', `${API}/${id}`)).status).toBe(204);
    const deleted = await change(id, { add: [randomEvm()] });
    expect(deleted.status).toBe(409);
    // Its list stays readable, as the subscription does.
    expect(await allAddresses(id)).toHaveLength(1);
  });

  test('a one-address subscription becomes a list at its first change; lists are not duplicates', async () => {
    const first = randomEvm();
    const res = await t.request('POST', API, {
      body: { type: 'ADDRESS_TRANSACTION', attr: { address: first, chain: 'BTC', url: URL_ } },
    });
    expect(res.status).toBe(400); // an EVM address on Bitcoin
    const one = await t.request('POST', API, {
      body: { type: 'ADDRESS_TRANSACTION', attr: { address: BTC, chain: 'BTC', url: URL_ } },
    });
    expect(one.status, one.text).toBe(201);
    const id = (one.body as { id: string }).id;
    expect(((await t.request('GET', `${API}/${id}`)).body as { attr: unknown }).attr).toEqual({
      address: BTC,
      chain: 'BTC',
      url: URL_,
    });
    expect(await allAddresses(id)).toEqual([BTC]);
    // A call that changes nothing leaves it a one-address subscription.
    expect((await change(id, { add: [BTC] })).body).toEqual({ added: 0, removed: 0, addressCount: 1 });
    expect(
      ((await t.request('GET', `${API}/${id}`)).body as { attr: { address?: string } }).attr.address,
    ).toBe(BTC);
    const grown = await change(id, { add: ['1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa'] });
    expect(grown.body).toEqual({ added: 1, removed: 0, addressCount: 2 });
    expect(((await t.request('GET', `${API}/${id}`)).body as { attr: unknown }).attr).toEqual({
      chain: 'BTC',
      url: URL_,
      addressCount: 2,
    });
    // Two lists of the same addresses and URL are two subscriptions (each may differ otherwise).
    await createList([BTC], 'BTC');
    await createList([BTC], 'BTC');
  });
});
