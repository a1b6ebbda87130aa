import {
  encodeFunctionData,
  getAddress,
  getContractAddress,
  type Hex,
  keccak256,
  parseAbi,
  toRlp,
} from 'viem';
import { describe, expect, test } from 'vitest';
import { pendingTransfers } from './evm-mempool.js';

const abi = parseAbi([
  'function transfer(address to, uint256 value) returns (bool)',
  'function transferFrom(address from, address to, uint256 value) returns (bool)',
  'function approve(address spender, uint256 value) returns (bool)',
]);
const hash = `0x${'ab'.repeat(32)}` as Hex;
const sender = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8' as Hex;
const token = '0x5fbdb2315678afecb367f032d93f642f64180aa3' as Hex;
const owner = getAddress('0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc');
const recipient = getAddress('0x90f79bf6eb2c4f870365e785982e1f101e93b906');
const base = { txHash: hash, txIndex: 0, logIndex: null, batchIndex: 0, tokenId: null };

describe('pendingTransfers', () => {
  test('native value to its recipient, checksummed', () => {
    expect(
      pendingTransfers({
        hash,
        nonce: 0,
        from: sender,
        to: recipient.toLowerCase() as Hex,
        value: 5n,
        input: '0x',
      }),
    ).toEqual([
      {
        index: 0,
        transfer: {
          ...base,
          kind: 'native',
          token: null,
          from: getAddress(sender),
          to: recipient,
          value: 5n,
        },
      },
    ]);
  });

  test('transfer calldata: from the sender; transferFrom: from its first argument, whoever sends it', () => {
    const transfer = encodeFunctionData({ abi, functionName: 'transfer', args: [recipient, 12n] });
    const transferFrom = encodeFunctionData({
      abi,
      functionName: 'transferFrom',
      args: [owner, recipient, 7n],
    });
    const erc20 = { ...base, kind: 'erc20', token: getAddress(token), to: recipient };
    expect(pendingTransfers({ hash, nonce: 0, from: sender, to: token, value: 0n, input: transfer })).toEqual(
      [{ index: 1, transfer: { ...erc20, from: getAddress(sender), value: 12n } }],
    );
    expect(
      pendingTransfers({ hash, nonce: 0, from: sender, to: token, value: 0n, input: transferFrom }),
    ).toEqual([{ index: 1, transfer: { ...erc20, from: owner, value: 7n } }]);
    // Value and calldata in one transaction: two transfers, native first.
    expect(
      pendingTransfers({ hash, nonce: 0, from: sender, to: token, value: 1n, input: transfer }).map((t) => [
        t.index,
        t.transfer.kind,
      ]),
    ).toEqual([
      [0, 'native'],
      [1, 'erc20'],
    ]);
  });

  test('nothing for other calls, truncated calldata or zero value', () => {
    const approve = encodeFunctionData({ abi, functionName: 'approve', args: [recipient, 1n] });
    const transfer = encodeFunctionData({ abi, functionName: 'transfer', args: [recipient, 12n] });
    expect(pendingTransfers({ hash, nonce: 0, from: sender, to: token, value: 0n, input: approve })).toEqual(
      [],
    );
    expect(
      pendingTransfers({
        hash,
        nonce: 0,
        from: sender,
        to: token,
        value: 0n,
        input: transfer.slice(0, 40) as Hex,
      }),
    ).toEqual([]);
    expect(pendingTransfers({ hash, nonce: 0, from: sender, to: recipient, value: 0n, input: '0x' })).toEqual(
      [],
    );
  });

  test('a contract creation: its value to the address the contract will have, its init code no token call', () => {
    const transfer = encodeFunctionData({ abi, functionName: 'transfer', args: [recipient, 12n] });
    // Computed independently: RLP of [sender, nonce], hashed, low 20 bytes (CREATE).
    const created = getAddress(`0x${keccak256(toRlp([sender, '0x07'])).slice(-40)}`);
    expect(created).toBe(getContractAddress({ from: sender, nonce: 7n }));
    expect(pendingTransfers({ hash, nonce: 7, from: sender, to: null, value: 9n, input: transfer })).toEqual([
      {
        index: 0,
        transfer: { ...base, kind: 'native', token: null, from: getAddress(sender), to: created, value: 9n },
      },
    ]);
    // No value: nothing, whatever the init code.
    expect(pendingTransfers({ hash, nonce: 7, from: sender, to: null, value: 0n, input: transfer })).toEqual(
      [],
    );
  });
});
