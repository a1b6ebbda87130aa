/**
 * Contract event subscriptions in the operator console, in headless Chromium against the real
 * service following a real anvil chain with the EventZoo contract deployed: an event subscription
 * created through the form (the API's messages, and the form's own about JSON that does not parse,
 * shown at the fields they name), listed with its event, contracts and filter beside an address
 * subscription and a bare-topic0 one on any contract; a Ping emitted on the devnet and its
 * `contract.log` delivery in the subscription's log with its event name and arguments; a
 * reorganisation taking it back (`contract.log.reorg`, marked withdrawn); the account's log showing
 * the undecoded topic0 subscription's deliveries. Screenshots go to test-artifacts/console/.
 *
 * One backend (PostgreSQL when the suite has it), as test/e2e/console.test.ts: the console reads
 * the API, which has suites of its own on both.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { encodeFunctionData, type Hex, numberToHex, toEventSelector } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { artifact } from '../helpers/anvil.js';
import { launchChromium } from '../helpers/browser.js';
import { type Body, type Devnet, startDevnet } from '../helpers/devnet.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const SCREENSHOTS = path.join(repoRoot, 'test-artifacts', 'console');
/** Every wait of the browser ends by this. */
const WAIT_MS = 15_000;
const backend = backends.at(-1)!;

const PING = 'event Ping(address indexed from, uint256 indexed n, string note)';
const PING_SIGNATURE = 'Ping(address,uint256,string)';
const PING_TOPIC0 = toEventSelector(PING_SIGNATURE);
/** EventZoo calls carry a gas limit: nothing is estimated against blocks being replaced. */
const GAS = 1_000_000n;

interface Problem {
  detail: string;
  errors?: { pointer?: string; detail: string }[];
}

/** A long hex value as the console shortens it: its two ends. */
const short = (text: string) => `${text.slice(0, 8)}…${text.slice(-6)}`;

describe(`contract events in the console, in Chromium on ${backend}`, () => {
  let d: Devnet;
  let browser: Browser;
  let context: BrowserContext | undefined;
  /** What went wrong inside the page: uncaught errors and policy violations. */
  const pageErrors: string[] = [];

  beforeAll(async () => {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    [d, browser] = await Promise.all([startDevnet(backend), launchChromium(WAIT_MS)]);
  });
  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await d?.close();
  });

  async function openConsole(): Promise<Page> {
    context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT_MS);
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error' && /Content.Security.Policy|Refused to/i.test(message.text()))
        pageErrors.push(message.text());
    });
    await page.goto(`${d.t.app.url}/console`, { waitUntil: 'load' });
    await page.getByLabel('API token').fill(d.t.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    return page;
  }

  async function shoot(page: Page, name: string): Promise<void> {
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
  }

  /** The field errors of the API's answer to `attr` (a CONTRACT_LOG_EVENT on DEVNET), by pointer. */
  async function refusal(attr: Record<string, unknown>): Promise<Map<string | undefined, string>> {
    const res = await d.t.request('POST', '/api/v1/subscription', {
      body: { type: 'CONTRACT_LOG_EVENT', attr: { chain: 'DEVNET', url: d.receiver.url, ...attr } },
    });
    expect(res.status, res.text).toBe(400);
    return new Map(((res.body as Problem).errors ?? []).map((e) => [e.pointer, e.detail]));
  }

  /** The webhooks the receiver got for a subscription, each verified with its secret. */
  function deliveredTo(sub: { id: string; secret: string }): Body[] {
    return d.receiver.requests.flatMap((r) => {
      const body = JSON.parse(r.body) as Body;
      if (body.subscriptionId !== sub.id) return [];
      new Webhook(sub.secret).verify(r.body, {
        'webhook-id': r.headers['webhook-id'] as string,
        'webhook-timestamp': r.headers['webhook-timestamp'] as string,
        'webhook-signature': r.headers['webhook-signature'] as string,
      });
      return [body];
    });
  }
  const deliveredWhen = (sub: { id: string; secret: string }, which: (b: Body) => boolean, what: string) =>
    waitFor(() => deliveredTo(sub).find(which), what, WAIT_MS);

  test('an event subscription made through the form, listed, its deliveries and their withdrawal in the log', async () => {
    const zoo = await d.deploy('EventZoo');
    const [, alice, bob] = d.addresses as [Hex, Hex, Hex];
    // Beside it: an address subscription, and a Tatum-style one (a bare topic0, any contract).
    const transfers = await d.subscribe(alice);
    const topic0Res = await d.t.request('POST', '/api/v1/subscription', {
      body: {
        type: 'CONTRACT_LOG_EVENT',
        attr: { chain: 'DEVNET', url: d.receiver.url, event: PING_TOPIC0 },
      },
    });
    expect(topic0Res.status, topic0Res.text).toBe(201);
    const anyPing = topic0Res.body as { id: string; secret: string };

    const page = await openConsole();
    await page.getByRole('button', { name: 'New subscription' }).click();
    const form = page.getByRole('form', { name: 'New subscription' });
    await form.getByLabel('Type').selectOption('CONTRACT_LOG_EVENT');
    // Events come from mined blocks: the form asks nothing of the mempool for them.
    expect(await form.getByLabel('Mempool').count()).toBe(0);
    await form.getByLabel('Network').fill('DEVNET');
    await form.getByLabel('Callback URL').fill(d.receiver.url);
    await form.getByLabel('Contracts').fill(zoo);

    // An unparsable signature: the API's message at the Event field, and only there.
    const unparsable = 'event Ping(address indexed from, uint256 indexed n, string note';
    await form.getByLabel('Event').fill(unparsable);
    await form.getByRole('button', { name: 'Create subscription' }).click();
    const eventErrors = await refusal({ event: unparsable, contractAddress: zoo });
    expect([...eventErrors.keys()].every((p) => p?.startsWith('#/attr/event'))).toBe(true);
    const eventError = [...eventErrors.values()].join('; ');
    await form.locator('.field-error', { hasText: eventError }).waitFor();
    expect(await form.locator('.field-error').allInnerTexts()).toEqual([eventError]);

    // A filter on an argument the event does not have: the API names it, the form says where.
    await form.getByLabel('Event').fill(PING);
    await form.getByLabel('Filter').fill('{"to": "0x0000000000000000000000000000000000000001"}');
    await form.getByRole('button', { name: 'Create subscription' }).click();
    const filterErrors = await refusal({
      event: PING,
      contractAddress: zoo,
      filter: { to: '0x0000000000000000000000000000000000000001' },
    });
    expect([...filterErrors.keys()]).toEqual(['#/attr/filter/to']);
    const filterError = `to: ${filterErrors.get('#/attr/filter/to')}`;
    await form.locator('.field-error', { hasText: filterError }).waitFor();
    expect(await form.locator('.field-error').allInnerTexts()).toEqual([filterError]);

    // JSON that does not parse never leaves the page; the form says so at the field.
    const asked = d.t.app.url;
    const sent: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && r.url().startsWith(asked)) sent.push(r.url());
    });
    await form.getByLabel('Filter').fill('{n: 7}');
    await form.getByRole('button', { name: 'Create subscription' }).click();
    await form.locator('.field-error', { hasText: 'is not valid JSON' }).waitFor();
    expect(sent).toEqual([]);
    await shoot(page, 'event-subscription-form-error');

    // Created: filtered on two values of the indexed n.
    await form.getByLabel('Filter').fill('{"n": ["7", "9"]}');
    await form.getByLabel('Confirmations').fill('1');
    await form.getByRole('button', { name: 'Create subscription' }).click();
    const shownOnce = page.getByRole('region', { name: /^Subscription .* created$/ });
    await shownOnce.waitFor();
    const id = /Subscription (\S+) created/.exec(await shownOnce.getByRole('heading').innerText())![1]!;
    const [secret] = await shownOnce.locator('code.secret').allInnerTexts();
    expect(secret).toMatch(/^whsec_/);
    const pings = { id, secret: secret! };
    await shownOnce.getByRole('button', { name: 'I have stored it' }).click();
    const view = (await d.t.request('GET', `/api/v1/subscription/${id}`)).body as {
      type: string;
      attr: Record<string, unknown>;
    };
    expect(view).toMatchObject({
      type: 'CONTRACT_LOG_EVENT',
      attr: {
        signature: PING_SIGNATURE,
        topic0: PING_TOPIC0,
        contractAddress: zoo,
        filter: { n: ['7', '9'] },
      },
    });

    // Listed with its event, its contract and its filter; the topic0 one by its topic0, on any contract.
    const row = page.locator(`tr[data-subscription="${id}"]`);
    await row.getByRole('link', { name: PING_SIGNATURE }).waitFor();
    const cells = await row.locator('td').allInnerTexts();
    expect(cells.slice(0, 3).map((c) => c.replace(/\s+/g, ' ').trim())).toEqual([
      'DEVNET',
      'Contract event',
      `${PING_SIGNATURE} on ${short(zoo)} · where n = 7 | 9`,
    ]);
    const anyRow = page.locator(`tr[data-subscription="${anyPing.id}"]`);
    expect((await anyRow.locator('td').nth(2).innerText()).replace(/\s+/g, ' ').trim()).toBe(
      `topic0 ${short(PING_TOPIC0)} on any contract`,
    );
    expect(await page.locator(`tr[data-subscription="${transfers.id}"] td`).nth(1).innerText()).toBe(
      'Address transactions',
    );
    // The type filter narrows the list to event subscriptions.
    await page.locator('form.filters').getByLabel('Type').selectOption('CONTRACT_LOG_EVENT');
    await page.locator(`tr[data-subscription="${transfers.id}"]`).waitFor({ state: 'detached' });
    expect(await page.locator('tr[data-subscription]').count()).toBe(2);
    await shoot(page, 'event-subscriptions');

    // Its page: the event, its topic0, its contract, its filter, the ABI viem parsed.
    await row.getByRole('link', { name: PING_SIGNATURE }).click();
    await page.getByRole('heading', { name: `Subscription ${id}` }).waitFor();
    const facts = (await page.locator('dl.facts').innerText()).replace(/\s+/g, ' ');
    for (const shown of [
      'Contract event CONTRACT_LOG_EVENT',
      `EVENT ${PING_SIGNATURE}`,
      `TOPIC0 ${PING_TOPIC0}`,
      `CONTRACTS ${zoo}`,
      'FILTER {"n":["7","9"]}',
    ])
      expect(facts.toUpperCase()).toContain(shown.toUpperCase());
    expect(facts.toUpperCase()).not.toContain('MEMPOOL');

    // A Ping the filter refuses (n = 8), then one it takes (n = 7), each in a block of its own.
    await d.call(1, zoo, 'EventZoo', 'emitPing', [alice, 8n, 'not this one'], GAS);
    const note = 'héllo 🦊, a note longer than thirty-two characters';
    const emitted = await d.call(1, zoo, 'EventZoo', 'emitPing', [alice, 7n, note], GAS);
    expect(emitted.status).toBe('success');
    const delivered = await deliveredWhen(pings, (b) => b.txId === emitted.hash, 'the Ping delivered');
    expect(delivered).toMatchObject({
      contractAddress: zoo,
      event: 'Ping',
      signature: PING_SIGNATURE,
      args: { from: alice, n: '7', note },
      blockNumber: Number(emitted.block),
    });
    const logRow = page.locator(`tr[data-notification="${delivered.id as string}"]`);
    await logRow.locator('.badge', { hasText: 'delivered' }).waitFor();
    const logCells = await logRow.locator('td').allInnerTexts();
    expect(logCells[1]).toBe('contract.log');
    const summary = `Ping · contract ${short(zoo)} · from=${short(alice)}, n=7, note="${note.slice(0, 32)}…" · tx ${short(emitted.hash)} · block ${emitted.block} · log ${delivered.logIndex as number}`;
    expect(logCells[2]!.replace(/\s+/g, ' ').trim()).toBe(summary);
    expect(deliveredTo(pings).filter((b) => b.args && (b.args as Body).n === '8')).toEqual([]);
    // Its details hold the whole body, arguments decoded.
    await logRow.getByRole('button', { name: 'Details' }).click();
    const body = JSON.parse(await page.locator('tr.expanded pre.json').innerText()) as Body;
    expect(body).toEqual(delivered);
    await logRow.getByRole('button', { name: 'Hide' }).click();

    // The block is replaced by one holding another Ping (n = 9, from bob): the first is withdrawn.
    await d.processed(emitted.block);
    await d.chain.request({
      method: 'anvil_reorg' as never,
      params: [
        1,
        [
          [
            {
              from: bob,
              to: zoo,
              data: encodeFunctionData({
                abi: artifact('EventZoo').abi,
                functionName: 'emitPing',
                args: [bob, 9n, 'the new branch'],
              }),
              gas: numberToHex(GAS),
            },
            0,
          ],
        ],
      ] as never,
    });
    await d.mine();
    const withdrawal = await deliveredWhen(pings, (b) => b.reorg === true, 'the withdrawal');
    expect(withdrawal).toEqual({ ...delivered, id: withdrawal.id, reorg: true });
    const fresh = await deliveredWhen(
      pings,
      (b) => (b.args as Body | undefined)?.n === '9',
      'the new branch',
    );
    const withdrawnRow = page.locator(`tr[data-notification="${withdrawal.id as string}"]`);
    await withdrawnRow.locator('.badge', { hasText: 'delivered' }).waitFor();
    expect(await withdrawnRow.locator('td').nth(1).innerText()).toBe('contract.log.reorg');
    const withdrawnSummary = (await withdrawnRow.locator('td').nth(2).innerText())
      .replace(/\s+/g, ' ')
      .trim();
    expect(withdrawnSummary).toBe(`withdrawn (reorg) ${summary}`);
    expect(await withdrawnRow.locator('td.summary .badge').innerText()).toBe('withdrawn (reorg)');
    const freshRow = page.locator(`tr[data-notification="${fresh.id as string}"]`);
    await freshRow.locator('.badge', { hasText: 'delivered' }).waitFor();
    expect(await freshRow.locator('td').nth(2).innerText()).toContain(
      `Ping · contract ${short(zoo)} · from=${short(bob)}, n=9, note="the new branch"`,
    );
    expect(await freshRow.locator('td.summary .badge').count()).toBe(0);
    await shoot(page, 'event-subscription-log');

    // The account's log: the topic0 subscription's deliveries, undecoded, labelled by its topic0.
    const anyDelivered = await deliveredWhen(anyPing, (b) => b.txId === emitted.hash, 'the topic0 Ping');
    expect(anyDelivered.args).toBeUndefined();
    await page.getByRole('link', { name: 'Delivery log' }).click();
    await page.getByRole('heading', { name: 'Delivery log' }).waitFor();
    const anyRowInLog = page.locator(`tr[data-notification="${anyDelivered.id as string}"]`);
    await anyRowInLog.waitFor();
    const anyCells = (await anyRowInLog.locator('td').allInnerTexts()).map((c) =>
      c.replace(/\s+/g, ' ').trim(),
    );
    expect(anyCells[1]).toBe(`DEVNET topic0 ${short(PING_TOPIC0)} on any contract`);
    expect(anyCells[2]).toBe('contract.log');
    const dataBytes = ((anyDelivered.data as string).length - 2) / 2;
    expect(anyCells[3]).toBe(
      `topic0 ${short(PING_TOPIC0)} · contract ${short(zoo)} · 3 topics, ${dataBytes} bytes of data · tx ${short(emitted.hash)} · block ${emitted.block} · log ${anyDelivered.logIndex as number}`,
    );
    const labelled = page.locator(`tr[data-notification="${delivered.id as string}"]`).getByRole('link');
    expect(await labelled.innerText()).toBe(`DEVNET Ping on ${short(zoo)}`);
    await shoot(page, 'event-delivery-log');

    expect(pageErrors).toEqual([]);
  });
});
