/**
 * Watching Algorand end to end: the real service follows a loopback algod or indexer of our own
 * serving the recorded testnet round 24099447 and rounds assembled from it (labelled in
 * test/fixtures/chains/algorand/README.md), and delivers signed notifications to a real receiver.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { blockFromIndexer } from '../../src/chains/algorand/blocks.js';
import {
  type AlgorandNode,
  assembleRound,
  MAINNET,
  RECORDED_HASH,
  RECORDED_ROUND,
  recordedAlgodBlock,
  recordedIndexerBlock,
  startAlgorandNode,
  TESTNET,
} from '../helpers/algorand-node.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

type Body = Record<string, unknown>;
type Status = { network: string; height: number | null; healthy: boolean; lastError: string | null };

/** The sender of the round's four 1 µAlgo self-payments (W6SAFSKT, the application call, moves nothing). */
const BFO7 = 'BFO7NQTTXGYDPUEWJYLWPFZRUFQISHY4E2SKXARM7UROMAW36YYBGPSUYY';
const PAYMENTS = [
  'Q5T6IHV62WN5YRGGBZ5PTTOGD4UEEJ2IJVWVVQPDSRZ5JYLNY2LQ',
  'GX4OEJETJKWAFK4RK26SYSLBIAUHP7KQVK6N7CONESCS5UZOZSXQ',
  '5UJZEZJDYQZZC5DTUYYGMW2W65KFMETQLYC34JPFSMBCQXLX6T4Q',
  'ONXCSR5POM7B53L56LOVJUD5VUNQFPDXOSODIH6LOXMBTQALWB5A',
];

function configFile(nodeUrl: string, api: 'algod' | 'indexer'): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-algorand-'));
  const file = path.join(dir, 'config.json');
  fs.writeFileSync(
    file,
    JSON.stringify({
      networks: {
        TALGO: {
          family: 'algorand',
          symbol: 'ALGO',
          decimals: 6,
          rpc: nodeUrl,
          indexer: nodeUrl,
          api,
          ...TESTNET,
        },
      },
    }),
  );
  return file;
}

describe.each(
  backends.flatMap((backend) => (['algod', 'indexer'] as const).map((api) => [backend, api] as const)),
)('watching Algorand on %s through %s', (backend, api) => {
  let node: AlgorandNode;
  let t: TestApp;
  let receiver: Receiver;
  let secret = '';
  let subscriptionId = '';
  /** The hash of the last round added, which the next one links to. */
  let lastHash = RECORDED_HASH;

  const status = async (): Promise<Status | undefined> => {
    const ready = (await (await fetch(`${t.app.url}/readyz`)).json()) as { networks: Status[] };
    return ready.networks.find((n) => n.network === 'TALGO');
  };
  const bodies = (): Body[] =>
    receiver.requests.map((r) => {
      new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
      return JSON.parse(r.body) as Body;
    });

  beforeAll(async () => {
    node = await startAlgorandNode();
    node.setRounds([{ algod: recordedAlgodBlock(), indexer: recordedIndexerBlock() }]);
    receiver = await startReceiver();
    t = await startTestApp(backend, {
      LEDGERHOOK_ROLES: 'all',
      LEDGERHOOK_CONFIG: configFile(node.url, api),
      // algod's long poll must be what wakes the follower: its own polling is all but off. The
      // indexer has no long poll, so it is polled.
      LEDGERHOOK_WATCH_POLL_INTERVAL: api === 'algod' ? '600s' : '50ms',
    });
    const res = await t.request('POST', '/api/v1/subscription', {
      body: { type: 'ADDRESS_TRANSACTION', attr: { chain: 'TALGO', address: BFO7, url: receiver.url } },
    });
    expect(res.status, res.text).toBe(201);
    ({ id: subscriptionId, secret } = res.body as { id: string; secret: string });
    await waitFor(
      async () => ((await status())?.height === RECORDED_ROUND ? true : undefined),
      'the first round',
    );
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
    await node?.close();
  });

  test('a new round: each self-payment notifies its net, the fee (−0.001 ALGO); the application call nothing', async () => {
    const added = Date.now();
    const next = assembleRound({ round: RECORDED_ROUND + 1, parentHash: RECORDED_HASH });
    node.addRound(next);
    lastHash = blockFromIndexer(next.indexer).hash;
    await receiver.waitForRequests(PAYMENTS.length, 10_000);
    // Within the 25 ms the wait polls at.
    const notifiedMs = Date.now() - added;
    const got = bodies();
    expect(got.map((b) => b.txId).sort()).toEqual([...PAYMENTS].sort());
    expect(got.every((b) => b.blockNumber === RECORDED_ROUND + 1)).toBe(true);
    for (const body of got) {
      // Worked out by hand from the recorded round: BFO7 pays itself 1 µAlgo with a 1000 µAlgo fee.
      expect(body).toEqual({
        address: BFO7,
        txId: body.txId,
        type: 'native',
        blockNumber: RECORDED_ROUND + 1,
        asset: 'ALGO',
        amount: '-0.001',
        id: body.id,
        subscriptionId,
        chain: 'TALGO',
        watchedAddress: BFO7,
        confirmations: 1,
      });
    }
    if (api === 'algod') {
      // With polling every 600 s, only the long poll can have woken the follower.
      expect(notifiedMs).toBeLessThan(10_000);
      console.info(
        `algod long poll: round added → ${PAYMENTS.length} notifications received in ${notifiedMs} ms`,
      );
    }
  });

  test('an unreachable node, then 5xx answers: retried and shown in /readyz; the next round is notified, none skipped', async () => {
    await node.stop();
    const down = await waitFor(
      async () => {
        const s = await status();
        return s?.lastError ? s : undefined;
      },
      'the unreachable node in /readyz',
      30_000,
    );
    expect(down.lastError).toContain(new URL(node.url).host);
    expect(down.healthy).toBe(false);
    node.failNext(3, 503);
    await node.start();
    const next = assembleRound({ round: RECORDED_ROUND + 2, parentHash: lastHash });
    node.addRound(next);
    // The long poll is retried a second after a failure; the follower's own rounds back off.
    await receiver.waitForRequests(PAYMENTS.length * 2, 60_000);
    const second = bodies().filter((b) => b.blockNumber === RECORDED_ROUND + 2);
    expect(second.map((b) => b.txId).sort()).toEqual([...PAYMENTS].sort());
    lastHash = blockFromIndexer(next.indexer).hash;
    await waitFor(async () => ((await status())?.healthy ? true : undefined), 'healthy again');
  });

  test('a round that does not link to the last one: nothing notified, the follower stops with a clear error', async () => {
    const before = receiver.requests.length;
    node.addRound(assembleRound({ round: RECORDED_ROUND + 3, parentHash: RECORDED_HASH }));
    const stopped = await waitFor(async () => {
      const s = await status();
      return s?.lastError?.includes('another chain') ? s : undefined;
    }, 'the mismatch in /readyz');
    expect(stopped).toMatchObject({ healthy: false, height: RECORDED_ROUND + 2 });
    const metrics = await (await fetch(`${t.app.url}/metrics`)).text();
    expect(metrics).toMatch(/ledgerhook_follower_healthy\{network="TALGO"\} 0/);
    expect(receiver.requests.length).toBe(before);
  });
});

describe.each(backends)('an Algorand node on another network, on %s', (backend) => {
  test('is refused before anything is read or notified, naming both genesis ids', async () => {
    const node = await startAlgorandNode();
    node.setRounds([{ algod: recordedAlgodBlock(), indexer: recordedIndexerBlock() }]);
    node.setGenesis(MAINNET);
    const receiver = await startReceiver();
    const t = await startTestApp(backend, {
      LEDGERHOOK_ROLES: 'all',
      LEDGERHOOK_CONFIG: configFile(node.url, 'algod'),
      LEDGERHOOK_WATCH_POLL_INTERVAL: '50ms',
    });
    try {
      const res = await t.request('POST', '/api/v1/subscription', {
        body: { type: 'ADDRESS_TRANSACTION', attr: { chain: 'TALGO', address: BFO7, url: receiver.url } },
      });
      expect(res.status, res.text).toBe(201);
      const refused = await waitFor(async () => {
        const ready = (await (await fetch(`${t.app.url}/readyz`)).json()) as { networks: Status[] };
        const s = ready.networks.find((n) => n.network === 'TALGO');
        return s?.lastError ? s : undefined;
      }, 'the genesis mismatch in /readyz');
      expect(refused.lastError).toContain('mainnet-v1.0');
      expect(refused.lastError).toContain('testnet-v1.0');
      expect(refused).toMatchObject({ healthy: false, height: null });
      expect(node.requests.some((r) => r.path.startsWith('/v2/blocks/'))).toBe(false);
      expect(receiver.requests).toEqual([]);
    } finally {
      await t.close();
      await receiver.close();
      await node.close();
    }
  });
});
