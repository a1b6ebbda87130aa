/**
 * Working with a real anvil chain in tests: viem clients for the dev accounts, the test contracts of
 * test/fixtures/contracts (compiled beforehand into artifacts.json), and a JSON-RPC proxy that can
 * answer chosen requests itself, to play a node that lacks a method or fails.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type Abi,
  type Account,
  type Chain,
  createPublicClient,
  createWalletClient,
  defineChain,
  type Hex,
  http as httpTransport,
  type PublicClient,
  type TransactionReceipt,
  type Transport,
  type WalletClient,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { Anvil } from '../../src/chains/evm/anvil.js';

export type ContractName =
  | 'TestToken'
  | 'TestNFT'
  | 'TestMulti'
  | 'Sink'
  | 'OddToken'
  | 'RawLogs'
  // Every ABI type in events (EventZoo.sol; test/e2e/contract-events.test.ts).
  | 'EventZoo'
  // Internal transfers (InternalTransfers.sol, MiniAccount.sol; test/e2e/anvil-traces.test.ts).
  | 'Forwarder'
  | 'BatchPayer'
  | 'RelayA'
  | 'RelayB'
  | 'RelayC'
  | 'Reverter'
  | 'Swallower'
  | 'ValueChild'
  | 'ChildFactory'
  | 'Doomed'
  | 'DoomedFactory'
  | 'DelegateImpl'
  | 'DelegateKeeper'
  | 'MiniAccount'
  | 'MiniEntryPoint'
  | 'Misfirer';

export interface Artifact {
  abi: Abi;
  bytecode: Hex;
}

const ARTIFACTS_FILE = new URL('../fixtures/contracts/artifacts.json', import.meta.url);
let artifacts: Record<ContractName, Artifact> | undefined;

/** The compiled test contracts (`npx tsx test/fixtures/contracts/build.ts` rebuilds them). */
export function artifact(name: ContractName): Artifact {
  artifacts ??= JSON.parse(fs.readFileSync(ARTIFACTS_FILE, 'utf8')) as Record<ContractName, Artifact>;
  return artifacts[name];
}

export type DevWallet = WalletClient<Transport, Chain, Account>;

export interface AnvilClients {
  chain: Chain;
  /** Polls every 50 ms, so waiting for a receipt takes milliseconds. */
  publicClient: PublicClient;
  /** One wallet per dev account, in anvil's order. */
  wallets: DevWallet[];
}

export function anvilChain(anvil: Anvil): Chain {
  return defineChain({
    id: anvil.chainId,
    name: 'anvil',
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [anvil.rpcUrl], webSocket: [anvil.wsUrl] } },
  });
}

/**
 * How long a wallet waits for anvil: its first blob transaction loads the KZG trusted setup, which
 * took over 10 s (viem's default) on a loaded two-core machine.
 */
export const WALLET_TIMEOUT_MS = 60_000;

export function anvilClients(anvil: Anvil, rpcUrl = anvil.rpcUrl): AnvilClients {
  const chain = anvilChain(anvil);
  const publicClient = createPublicClient({
    chain,
    transport: httpTransport(rpcUrl),
    pollingInterval: 50,
    cacheTime: 0,
  });
  const wallets = anvil.accounts.map((a) =>
    createWalletClient({
      account: privateKeyToAccount(a.privateKey),
      chain,
      transport: httpTransport(rpcUrl, { timeout: WALLET_TIMEOUT_MS }),
    }),
  );
  return { chain, publicClient, wallets };
}

/** The receipt of a sent transaction, once mined (whether it succeeded or reverted). */
export async function mined(
  publicClient: PublicClient,
  hash: Promise<Hex> | Hex,
): Promise<TransactionReceipt> {
  return publicClient.waitForTransactionReceipt({ hash: await hash, timeout: 15_000 });
}

/** Deploys a test contract and resolves with its address once mined. */
export async function deploy(
  publicClient: PublicClient,
  wallet: DevWallet,
  name: ContractName,
  options: { value?: bigint; args?: readonly unknown[] } = {},
): Promise<{ address: Hex; receipt: TransactionReceipt }> {
  const { abi, bytecode } = artifact(name);
  const receipt = await mined(
    publicClient,
    wallet.deployContract({ abi, bytecode, value: options.value, args: options.args }),
  );
  if (receipt.status !== 'success' || !receipt.contractAddress) throw new Error(`deploying ${name} failed`);
  return { address: receipt.contractAddress, receipt };
}

interface JsonRpcRequest {
  jsonrpc: '2.0';
  id: number | string | null;
  method: string;
  params?: unknown[];
}

/** What the proxy answers itself instead of asking the node. */
export type ProxyAnswer =
  | { result: unknown }
  | { error: { code: number; message: string; data?: unknown } }
  /** The whole HTTP request fails with this status. */
  | { httpStatus: number }
  /** The request is never answered (a node stuck on it), until the proxy closes. */
  | { hold: true };

export interface RpcProxy {
  url: string;
  /** The method of every request received, in order. */
  methods: string[];
  /** Decides, per request, to answer it here (an answer) or pass it on (undefined). */
  intercept(decide: (request: JsonRpcRequest) => ProxyAnswer | undefined): void;
  close(): Promise<void>;
}

/** A JSON-RPC proxy on loopback in front of `targetUrl`. */
export async function startRpcProxy(targetUrl: string): Promise<RpcProxy> {
  const methods: string[] = [];
  let decide: (request: JsonRpcRequest) => ProxyAnswer | undefined = () => undefined;

  const forward = async (request: JsonRpcRequest): Promise<unknown> => {
    const response = await fetch(targetUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(request),
    });
    return response.json();
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as JsonRpcRequest | JsonRpcRequest[];
        const requests = Array.isArray(body) ? body : [body];
        const answers = requests.map((request) => {
          methods.push(request.method);
          return decide(request);
        });
        if (answers.some((a) => a !== undefined && 'hold' in a)) return;
        const failure = answers.find((a) => a !== undefined && 'httpStatus' in a);
        if (failure && 'httpStatus' in failure) {
          res.writeHead(failure.httpStatus, { 'content-type': 'text/plain' }).end('unavailable');
          return;
        }
        const replies = await Promise.all(
          requests.map((request, i) => {
            const answer = answers[i];
            return answer && !('hold' in answer)
              ? { jsonrpc: '2.0', id: request.id, ...answer }
              : forward(request);
          }),
        );
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(Array.isArray(body) ? replies : replies[0]));
      } catch (err) {
        res.writeHead(502, { 'content-type': 'text/plain' }).end(String(err));
      }
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    methods,
    intercept(next) {
      decide = next;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}

/**
 * Writes a LEDGERHOOK_CONFIG file whose one network, DEVNET, is an anvil chain reached at `rpc`,
 * as `--devnet` configures it (parity traces: anvil's callTracer can hang while it mines).
 */
export function writeDevnetConfig(
  file: string,
  chainId: number,
  rpc: string,
  more: Record<string, unknown> = {},
): string {
  const devnet = { family: 'evm', chainId, symbol: 'ETH', rpc: [rpc], traces: 'parity', ...more };
  fs.writeFileSync(file, JSON.stringify({ networks: { DEVNET: devnet } }));
  return file;
}
