/**
 * Headless Chromium for the page tests: Debian's `chromium` (CHROMIUM_PATH to use another) driven
 * by playwright-core, which downloads no browser of its own.
 */
import { type Browser, chromium } from 'playwright-core';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Launches the browser; it gives up after `timeoutMs`. Nothing it does reaches past loopback. */
export function launchChromium(timeoutMs: number): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    timeout: timeoutMs,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
      '--disable-sync',
    ],
  });
}
