/**
 * The public pass page as a person sees it: the real service, pages rendered by headless Chromium
 * (Debian's, driven by playwright-core). Screenshots go to the OS temp directory, overwritten by
 * each run, for a person to look at.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { putLeafInBatch } from '../helpers/anchoring.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { launchChromium } from '../helpers/browser.js';
import { backends } from '../helpers/env.js';
import { sampleRegistryBody } from '../helpers/registry-body.js';

// Kept after the run: the run's own temporary directory is removed at its end (test/global-setup.ts).
const SCREENSHOTS = path.join(
  process.env.LEDGERHOOK_TEST_KEEP_DIR ?? os.tmpdir(),
  'ledgerhook-pass-page-screenshots',
);
/** Every wait of the browser ends by this. */
const WAIT_MS = 15_000;

const HOSTILE_TITLE = 'Gala <script>window.__pwned = "title"; alert("title")</script> ticket';
const HOSTILE_VALUE = "<img src=x onerror=\"window.__pwned = 'metadata'; alert('metadata')\">";

/** What the page's window offers, for code run in it (the project's TypeScript has no DOM types). */
interface BrowserGlobals {
  getComputedStyle(element: unknown): { backgroundColor: string };
}

interface Visit {
  page: Page;
  status: number | undefined;
  dialogs: string[];
  /** Every URL the page asked for, itself included. */
  requests: string[];
}

describe.each(backends)('the public pass page in Chromium on %s', (backend) => {
  let t: TestApp;
  let browser: Browser;
  const visits: Visit[] = [];

  beforeAll(async () => {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    [t, browser] = await Promise.all([
      startTestApp(backend, { LEDGERHOOK_PASS_RATE_LIMIT: 'off' }),
      launchChromium(WAIT_MS),
    ]);
  });
  afterAll(async () => {
    for (const v of visits) await v.page.close();
    await browser?.close();
    await t?.close();
  });

  async function createPass(body: Record<string, unknown>, token?: string): Promise<string> {
    const r = await t.request('POST', '/api/v1/registry/create', {
      token,
      body: sampleRegistryBody({ template: 'PASS', folder_id: 'passes', ...body }),
    });
    expect(r.status, r.text).toBe(201);
    return (r.body as { data: { id: string } }).data.id;
  }

  async function visit(id: string, screenshot: string): Promise<Visit> {
    const page = await browser.newPage({ viewport: { width: 820, height: 900 } });
    page.setDefaultTimeout(WAIT_MS);
    page.setDefaultNavigationTimeout(WAIT_MS);
    const v: Visit = { page, status: undefined, dialogs: [], requests: [] };
    visits.push(v);
    page.on('dialog', (dialog) => {
      v.dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    page.on('request', (request) => v.requests.push(request.url()));
    // 'load': inline scripts have run and images failed (their onerror fired) by then.
    const response = await page.goto(`${t.app.url}/pass/${id}`, { waitUntil: 'load', timeout: WAIT_MS });
    v.status = response?.status();
    await page.screenshot({ path: path.join(SCREENSHOTS, `${backend}-${screenshot}.png`), fullPage: true });
    return v;
  }

  /** Nothing the page holds ran, and it loaded nothing but itself. */
  async function expectInert(v: Visit, id: string): Promise<void> {
    expect(v.dialogs).toEqual([]);
    expect(await v.page.evaluate(() => (globalThis as { __pwned?: string }).__pwned)).toBeUndefined();
    expect(await v.page.locator('script, img, iframe, object, embed').count()).toBe(0);
    expect(v.requests).toEqual([`${t.app.url}/pass/${id}`]);
  }

  function expectScreenshot(name: string): void {
    const png = fs.readFileSync(path.join(SCREENSHOTS, `${backend}-${name}.png`));
    expect(png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
    expect(png.length).toBeGreaterThan(5_000);
  }

  test('a valid pass: title, issuer, status and metadata, and a script in them is only text', async () => {
    const token = await t.tokenFor('city-opera');
    const id = await createPass(
      {
        title: HOSTILE_TITLE,
        description: 'Opening night, balcony',
        metadata: [
          { type: 'TEXT', key: 'holder', value: 'Ada Lovelace', title: 'Holder' },
          { type: 'DATE', key: 'date', value: '2026-12-31', title: 'Date' },
          { type: 'TEXT', key: 'note', value: HOSTILE_VALUE },
          { type: 'URL', key: 'venue', value: 'https://example.com/opera', title: 'Venue' },
          { type: 'FILE', key: 'seat-map', file: 'data:text/html,<script>alert("file")</script>' },
        ],
      },
      token,
    );
    const txId = `0x${'5e'.repeat(32)}`;
    await putLeafInBatch(t.app.store.db, id, {
      state: 'anchored',
      network: 'ETH',
      txId,
      blockNumber: 21_000_000,
      anchoredAt: new Date('2026-11-22T08:00:00.000Z'),
    });
    const v = await visit(id, 'valid');
    expect(v.status).toBe(200);
    await expectInert(v, id);
    const { page } = v;
    expect(await page.locator('#title').textContent()).toBe(HOSTILE_TITLE);
    expect(await page.title()).toBe(`${HOSTILE_TITLE} · pass valid`);
    expect(await page.locator('#issuer').textContent()).toBe('city-opera');
    expect((await page.locator('#status').textContent())?.trim()).toBe('Valid');
    expect(await page.locator('#description').textContent()).toBe('Opening night, balcony');
    const anchor = (await page.locator('#anchor').innerText()).replace(/\s+/g, ' ');
    expect(anchor).toContain('Anchored on ETH at 2026-11-22 08:00:00 UTC');
    expect(anchor).toContain(`transaction ${txId}`);
    expect(anchor).toContain('block 21000000');
    const details = (await page.locator('#details').innerText()).replace(/\s+/g, ' ');
    for (const shown of ['Holder', 'Ada Lovelace', '2026-12-31', HOSTILE_VALUE, 'https://example.com/opera'])
      expect(details).toContain(shown);
    expect(details).toContain('embedded file (text/html');
    // One live link, to the http(s) URL; the data: URI is not one.
    const links = await page
      .locator('a')
      .evaluateAll((as) => as.map((a) => (a as unknown as { href: string }).href));
    expect(links).toEqual(['https://example.com/opera']);
    // The page's own style applied (allowed by its hash), so the policy blocks only what it should.
    const badge = await page
      .locator('#status')
      .evaluate(
        (el) => (globalThis as unknown as BrowserGlobals).getComputedStyle(el).backgroundColor,
        undefined,
        { timeout: WAIT_MS },
      );
    expect(badge).not.toBe('rgba(0, 0, 0, 0)');
    expectScreenshot('valid');
  });

  test('a revoked pass says Revoked with the date', async () => {
    const id = await createPass({ title: 'Annual membership 2026' });
    const revoked = await t.request('POST', `/api/v1/registry/${id}/revoke`);
    expect(revoked.status).toBe(200);
    const revokedAt = (revoked.body as { data: { revoked_at: string } }).data.revoked_at;
    const v = await visit(id, 'revoked');
    expect(v.status).toBe(200);
    await expectInert(v, id);
    const status = v.page.locator('#status');
    expect(await status.textContent()).toBe(`Revoked on ${revokedAt.slice(0, 19).replace('T', ' ')} UTC`);
    expect(await status.getAttribute('class')).toContain('revoked');
    expect(await v.page.locator('#title').textContent()).toBe('Annual membership 2026');
    expect(await v.page.locator('#issuer').textContent()).toBe('default');
    expect(await v.page.locator('body').innerText()).not.toMatch(/\bValid\b/);
    expectScreenshot('revoked');
  });

  test('an encrypted pass shows who issued it and whether it holds, but not its details', async () => {
    const id = await createPass({
      title: 'Sealed certificate',
      data_encrypted: true,
      description: 'grade A, confidential',
    });
    const v = await visit(id, 'encrypted');
    expect(v.status).toBe(200);
    await expectInert(v, id);
    expect(await v.page.locator('#title').textContent()).toBe('Sealed certificate');
    expect(await v.page.locator('#issuer').textContent()).toBe('default');
    expect((await v.page.locator('#status').textContent())?.trim()).toBe('Valid');
    expect(await v.page.locator('#description').count()).toBe(0);
    const text = await v.page.locator('body').innerText();
    expect(text).toContain('encrypted; only its issuer can read them');
    for (const secret of ['Ada Lovelace', 'grade A', 'ada@example.com', 'pallets', 'Owner'])
      expect(text).not.toContain(secret);
    expectScreenshot('encrypted');
  });

  test('an id that is not a pass gets the not-found page', async () => {
    const v = await visit('00000000-0000-4000-8000-000000000000', 'not-found');
    expect(v.status).toBe(404);
    expect(await v.page.locator('h1').textContent()).toBe('Pass not found');
    expect(v.dialogs).toEqual([]);
  });
});
