// The chains of the chaos run: two anvil nodes mining a block a second, a test ERC-20 on each, dev
// accounts sending native and token transfers to watched addresses several per block, and, at the
// end, every transfer read back from the chains with viem, independently of the service.
import {
  type Address,
  type Chain,
  createPublicClient,
  encodeFunctionData,
  getAddress,
  type Hex,
  http,
  keccak256,
  type PublicClient,
  parseAbi,
  toHex,
} from 'viem';
import { type Anvil, startAnvil } from '../../src/chains/evm/anvil.js';
import { anvilChain, anvilClients, deploy } from '../../test/helpers/anvil.js';
import { jsonRpc, jsonRpcBatch, onCleanup } from '../lib.js';
import { type ChainEvent, eventKey } from './keys.js';

const ERC20 = parseAbi([
  'function transfer(address to, uint256 value) returns (bool)',
  'function mint(address to, uint256 value) payable',
]);
const TRANSFER_TOPIC = keccak256(toHex('Transfer(address,address,uint256)'));
/** Dev accounts 1-8 send the load; 0 deploys; 9 sends the probes. */
const LOAD_SENDERS = [1, 2, 3, 4, 5, 6, 7, 8];
const PROBE_SENDER = 9;

/** A deterministic address that nobody holds a key for: `tag` and `i` hashed. */
export function addressOf(tag: string, i: number): Address {
  return getAddress(`0x${keccak256(toHex(`${tag}:${i}`)).slice(26)}`);
}

export class ChaosChain {
  readonly recipients: Address[];
  readonly probeAddress: Address;
  token: Address | undefined;
  /** Transfers accepted by the node, and batches it refused. */
  sent = 0;
  errors = 0;
  private readonly nonces = new Map<Address, number>();
  private next = 0;
  private readonly client: PublicClient;
  readonly chain: Chain;

  private constructor(
    readonly name: string,
    readonly anvil: Anvil,
    recipientCount: number,
  ) {
    this.recipients = Array.from({ length: recipientCount }, (_, i) => addressOf(`chaos-${name}`, i));
    this.probeAddress = addressOf(`chaos-probe-${name}`, 0);
    this.chain = anvilChain(anvil);
    this.client = createPublicClient({
      chain: this.chain,
      transport: http(anvil.rpcUrl, { timeout: 60_000 }),
    });
  }

  static async start(name: string, chainId: number, recipientCount: number): Promise<ChaosChain> {
    const anvil = await startAnvil({ chainId, blockTime: 1 });
    onCleanup(() => anvil.stop());
    return new ChaosChain(name, anvil, recipientCount);
  }

  /** Deploys the token and gives every load sender a supply; learns the senders' nonces. */
  async prepare(): Promise<void> {
    const { publicClient, wallets } = anvilClients(this.anvil);
    const { address } = await deploy(publicClient, wallets[0]!, 'TestToken');
    this.token = address;
    const hashes: Hex[] = [];
    for (const i of LOAD_SENDERS) {
      hashes.push(
        await wallets[0]!.writeContract({
          address,
          abi: ERC20,
          functionName: 'mint',
          args: [this.anvil.accounts[i]!.address, 10n ** 30n],
        }),
      );
    }
    for (const hash of hashes) await publicClient.waitForTransactionReceipt({ hash, timeout: 60_000 });
    await this.syncNonces();
  }

  private async syncNonces(): Promise<void> {
    for (const i of LOAD_SENDERS) {
      const address = this.anvil.accounts[i]!.address;
      const count = await jsonRpc<Hex>(this.anvil.rpcUrl, 'eth_getTransactionCount', [address, 'pending']);
      this.nonces.set(address, Number(count));
    }
  }

  /** `n` transfers in one JSON-RPC batch: native (70%) and token (30%), to random watched addresses. */
  async sendBatch(n: number): Promise<void> {
    const calls = [];
    for (let k = 0; k < n; k++) {
      const from = this.anvil.accounts[LOAD_SENDERS[this.next++ % LOAD_SENDERS.length]!]!.address;
      const nonce = this.nonces.get(from)!;
      this.nonces.set(from, nonce + 1);
      const to = this.recipients[Math.floor(Math.random() * this.recipients.length)]!;
      const amount = BigInt(1 + Math.floor(Math.random() * 1_000_000));
      const tx =
        Math.random() < 0.7
          ? { from, to, value: toHex(amount * 10n ** 9n), gas: toHex(21_000) }
          : {
              from,
              to: this.token,
              data: encodeFunctionData({ abi: ERC20, functionName: 'transfer', args: [to, amount] }),
              gas: toHex(100_000),
            };
      calls.push({ method: 'eth_sendTransaction', params: [{ ...tx, nonce: toHex(nonce) }] });
    }
    try {
      await jsonRpcBatch(this.anvil.rpcUrl, calls);
      this.sent += n;
    } catch {
      this.errors++;
      await this.syncNonces();
    }
  }

  /** A native transfer from the probe sender to the probe address; its hash. */
  async sendProbe(): Promise<Hex> {
    return jsonRpc<Hex>(this.anvil.rpcUrl, 'eth_sendTransaction', [
      {
        from: this.anvil.accounts[PROBE_SENDER]!.address,
        to: this.probeAddress,
        value: toHex(10n ** 12n),
        gas: toHex(21_000),
      },
    ]);
  }

  /** Waits until the node's pool is empty (everything sent is in a block); the head then. */
  async settle(timeoutMs = 60_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const status = await jsonRpc<{ pending: Hex; queued: Hex }>(this.anvil.rpcUrl, 'txpool_status');
      if (Number(status.pending) === 0 && Number(status.queued) === 0)
        return Number(await this.client.getBlockNumber());
      if (Date.now() > deadline)
        throw new Error(`${this.name}: transactions still pending after ${timeoutMs / 1000} s`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /**
   * Every successful transfer to or from an address in `watched` (address → subscription ids) in
   * blocks 1…`head`, as the events each subscription must be notified of: native value of
   * top-level transactions, and the token's Transfer logs, read from each block and its receipts.
   */
  async expectedEvents(
    watched: Map<string, string[]>,
    head: number,
    symbol: string,
  ): Promise<Map<string, ChainEvent>> {
    const expected = new Map<string, ChainEvent>();
    const add = (transfer: Omit<ChainEvent, 'subscriptionId' | 'chain'>) => {
      const subs = new Set([
        ...(watched.get(transfer.from.toLowerCase()) ?? []),
        ...(watched.get(transfer.to.toLowerCase()) ?? []),
      ]);
      for (const subscriptionId of subs) {
        const event = { ...transfer, subscriptionId, chain: this.name };
        expected.set(eventKey(event), event);
      }
    };
    for (let height = 1; height <= head; height++) {
      const block = await this.client.getBlock({ blockNumber: BigInt(height), includeTransactions: true });
      const receipts = (await this.client.request({
        method: 'eth_getBlockReceipts' as 'eth_getBlockByNumber',
        params: [toHex(height)] as never,
      })) as unknown as Array<{
        transactionHash: Hex;
        status: Hex;
        logs: Array<{ address: Hex; topics: Hex[] }>;
      }>;
      const byHash = new Map(receipts.map((r) => [r.transactionHash, r]));
      for (const tx of block.transactions) {
        const receipt = byHash.get(tx.hash);
        if (receipt?.status !== '0x1') continue;
        if (tx.value > 0n && tx.to)
          add({ txId: tx.hash, type: 'native', asset: symbol, from: tx.from, to: tx.to });
        for (const log of receipt.logs) {
          if (log.topics[0] !== TRANSFER_TOPIC || log.topics.length !== 3) continue;
          const from = getAddress(`0x${log.topics[1]!.slice(26)}`);
          const to = getAddress(`0x${log.topics[2]!.slice(26)}`);
          add({ txId: tx.hash, type: 'token', asset: log.address, from, to });
        }
      }
    }
    return expected;
  }
}
