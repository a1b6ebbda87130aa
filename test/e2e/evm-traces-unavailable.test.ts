/**
 * Where a network has no traces, everything else goes on: a node that refuses both trace methods
 * (as most public endpoints do), and a network whose `traces` setting is off. /readyz, the metric
 * and one warning in the log say that internal transfers are not notified, and why.
 */
import pino from 'pino';
import { getAddress, parseEther } from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Devnet, startDevnet } from '../helpers/devnet.js';
import { backends } from '../helpers/env.js';

const TRACE_METHODS = ['debug_traceBlockByNumber', 'trace_block'];

describe.each(backends)('internal transfers without traces, on %s', (backend) => {
  const cases = [
    {
      name: 'a node that refuses both trace methods',
      traces: 'auto',
      reason: /the node refuses debug_traceBlockByNumber and trace_block/,
      neverAsked: false,
    },
    {
      name: 'a network with traces: off',
      traces: 'off',
      reason: /traces are off for this network/,
      neverAsked: true,
    },
  ];
  describe.each(cases)('$name', ({ traces, reason, neverAsked }) => {
    let d: Devnet;
    const lines: { level: number; msg: string; reason?: string }[] = [];
    beforeAll(async () => {
      d = await startDevnet(backend, {
        proxy: true,
        traces,
        logger: pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) }),
      });
      d.proxy!.intercept((request) =>
        TRACE_METHODS.includes(request.method)
          ? {
              error: {
                code: -32601,
                message: `the method ${request.method} does not exist/is not available`,
              },
            }
          : undefined,
      );
    });
    afterAll(async () => {
      await d?.close();
    });

    test('other notifications go on; /readyz, the metric and the log say internal transfers are off', async () => {
      const forwarder = await d.deploy('Forwarder');
      const deposit = getAddress(privateKeyToAddress(generatePrivateKey()));
      const sender = d.addresses[1]!;
      d.subs.set(sender, await d.subscribe(sender, { mempool: false }));
      d.subs.set(deposit, await d.subscribe(deposit, { mempool: false }));
      const sent = await d.call(1, forwarder, 'Forwarder', 'forward', [deposit], undefined, parseEther('1'));
      const plain = await d.send(2, sender, 5n);
      // Blocks after the forward are processed: its top-level transfer is notified, the internal one is not.
      const [top] = await d.receivedAtLeast(sent.hash, 1);
      await d.receivedAtLeast(plain.hash, 1);
      expect(top).toMatchObject({ address: sender, counterAddress: forwarder, amount: '-1', type: 'native' });
      expect(d.received(sent.hash)).toHaveLength(1);
      expect(await d.chain.getBalance({ address: deposit })).toBe(parseEther('1'));

      const ready = await d.t.request('GET', '/readyz', { token: null });
      const devnet = (ready.body as { networks: Record<string, unknown>[] }).networks.find(
        (n) => n.network === 'DEVNET',
      )!;
      expect(devnet).toMatchObject({ healthy: true, internalTransfers: false });
      expect(devnet.internalTransfersReason).toMatch(reason);
      const metrics = await d.t.request('GET', '/metrics', { token: null });
      expect(metrics.text).toMatch(/^ledgerhook_internal_transfers_available\{network="DEVNET"\} 0$/m);
      const warnings = lines.filter((l) => l.msg === 'internal transfers are not notified on this network');
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.reason).toMatch(reason);
      // Off: the node is never asked; refused: asked at the start, not again at every block.
      const asked = () => d.proxy!.methods.filter((m) => TRACE_METHODS.includes(m)).length;
      const before = asked();
      expect(before === 0).toBe(neverAsked);
      const later = await d.send(2, sender, 6n);
      await d.mine();
      await d.processed(later.block + 1n);
      expect(asked()).toBe(before);
    });
  });
});
