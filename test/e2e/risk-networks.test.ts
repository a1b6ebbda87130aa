/**
 * addressesRiskRatio on a network of another family, turned on by configuration: Bitcoin, through
 * the loopback node serving the btcd chain (test/fixtures/chains/bitcoin/README.md).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect, test } from 'vitest';
import { startTestApp } from '../helpers/app.js';
import { BTCD_MAIN, btcdBlock } from '../helpers/bitcoin-blocks.js';
import { startBitcoinNode } from '../helpers/bitcoin-node.js';
import { waitFor } from '../helpers/process.js';
import { startReceiver } from '../helpers/receiver.js';

const A10 = '1KXFNhNtrRMfgbdiQeuJqnfD7dR4PhniyJ';
const A40 = '1NiEGXeURREqqMjCvjCeZn6SwEBZ9AdVet';
const SINK = '1JyMKvPHkrCQd8jQrqTR1rBsAd1VpRhTiE';

test('LEDGERHOOK_RISK_NETWORKS=BTC: Bitcoin notifications carry the scores of the other side', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-risk-btc-'));
  const list = path.join(dir, 'btc.txt');
  fs.writeFileSync(list, `# one address a line: 100\n${A40}\n`);
  const node = await startBitcoinNode();
  node.setChain([btcdBlock('0')]);
  const receiver = await startReceiver();
  const t = await startTestApp('pglite', {
    LEDGERHOOK_ROLES: 'all',
    LEDGERHOOK_RPC_BTC: node.url,
    LEDGERHOOK_WATCH_POLL_INTERVAL: '50ms',
    LEDGERHOOK_RISK_NETWORKS: 'BTC',
    LEDGERHOOK_RISK_LISTS: `BTC=${list}`,
  });
  try {
    const res = await t.request('POST', '/api/v1/subscription', {
      body: {
        type: 'ADDRESS_TRANSACTION',
        attr: { chain: 'BTC', address: SINK, url: receiver.url },
        confirmations: 1,
      },
    });
    expect(res.status, res.text).toBe(201);
    await waitFor(async () => {
      const ready = (await (await fetch(`${t.app.url}/readyz`)).json()) as {
        networks: { network: string; height: number | null }[];
      };
      return ready.networks.find((n) => n.network === 'BTC')?.height === 0 ? true : undefined;
    }, 'BTC at 0');
    node.setChain(BTCD_MAIN.map(btcdBlock));
    // SINK is paid in block 3 by A40 (listed: 100) and by A10 (not listed: 0), and in block 4 by a
    // pay-to-pubkey output, which has no address to score.
    const requests = await receiver.waitForRequests(3, 30_000);
    const bodies = requests.map((r) => JSON.parse(r.body) as Record<string, unknown>);
    const byPayer = (payer: string) => bodies.find((b) => b.counterAddress === payer);
    expect(byPayer(A40)?.addressesRiskRatio).toEqual([{ [A40]: 100 }]);
    expect(byPayer(A10)?.addressesRiskRatio).toEqual([{ [A10]: 0 }]);
    expect(bodies.find((b) => b.blockNumber === 4)?.addressesRiskRatio).toEqual([]);
  } finally {
    await t.close();
    await receiver.close();
    await node.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
