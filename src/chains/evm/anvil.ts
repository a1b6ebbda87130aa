/**
 * A local anvil chain: the product's `--devnet`, and the chain the tests run against. The binary
 * comes from Foundry's npm package for this platform (an optional dependency), else from PATH.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { bytesToHex, type Hex } from 'viem';
import { mnemonicToAccount } from 'viem/accounts';

/** The mnemonic of anvil's (and Hardhat's) well-known dev accounts. Never use it for real funds. */
export const DEV_MNEMONIC = 'test test test test test test test test test test test junk';
/** How many dev accounts anvil funds, and with how many ether each. */
export const DEV_ACCOUNT_COUNT = 10;
export const DEV_ACCOUNT_BALANCE_ETH = 10_000;
export const ANVIL_DEFAULT_CHAIN_ID = 31337;

export interface AnvilOptions {
  /** Port on 127.0.0.1; by default one the system picks. */
  port?: number;
  /** Interval mining every this many seconds, instead of a block per transaction. */
  blockTime?: number;
  chainId?: number;
  /** No automatic mining at all: blocks only through `evm_mine`. */
  noMining?: boolean;
  /** How long to wait for the node to answer (ms). */
  startTimeoutMs?: number;
}

export interface DevAccount {
  address: Hex;
  privateKey: Hex;
}

export interface Anvil {
  rpcUrl: string;
  wsUrl: string;
  chainId: number;
  /** The node's process id (tests freeze and kill it to play a node that dies). */
  pid: number;
  /** The funded dev accounts, each with 10,000 ether at genesis. */
  accounts: DevAccount[];
  /** SIGTERM, then SIGKILL if it has not exited in time. Safe to call more than once. */
  stop(): Promise<void>;
}

// Deriving a key from the mnemonic costs tens of milliseconds: do it once per process.
const derived: DevAccount[] = [];

/** The dev accounts of {@link DEV_MNEMONIC}, as anvil derives them (m/44'/60'/0'/0/i). */
export function devAccounts(count = DEV_ACCOUNT_COUNT): DevAccount[] {
  for (let addressIndex = derived.length; addressIndex < count; addressIndex++) {
    const account = mnemonicToAccount(DEV_MNEMONIC, { addressIndex });
    const key = account.getHdKey().privateKey;
    if (!key) throw new Error(`no private key derived for dev account ${addressIndex}`);
    derived.push({ address: account.address, privateKey: bytesToHex(key) });
  }
  return derived.slice(0, count).map((account) => ({ ...account }));
}

// Foundry publishes one package per platform; node's names for them differ from Foundry's.
const ARCH: Partial<Record<string, string>> = { x64: 'amd64', arm64: 'arm64' };

/** The anvil binary: the platform package's, else the first `anvil` on PATH. */
export function resolveAnvilBinary(): string {
  const exe = process.platform === 'win32' ? 'anvil.exe' : 'anvil';
  const arch = ARCH[process.arch];
  const pkg = arch ? `@foundry-rs/anvil-${process.platform}-${arch}` : undefined;
  if (pkg) {
    try {
      const manifest = createRequire(import.meta.url).resolve(`${pkg}/package.json`);
      const binary = path.join(path.dirname(manifest), 'bin', exe);
      if (isExecutable(binary)) return binary;
    } catch {
      // not installed (optional dependency, absent on other platforms)
    }
  }
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const binary = path.join(dir, exe);
    if (isExecutable(binary)) return binary;
  }
  throw new Error(
    `anvil was not found: install the optional dependency ${pkg ?? '@foundry-rs/anvil-<platform>-<arch>'} ` +
      `(npm install) or put Foundry's anvil on PATH`,
  );
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

const LISTENING = /Listening on ([\d.]+):(\d+)/;
const TAIL_CHARS = 16_384;
const STOP_GRACE_MS = 5_000;

/** Starts anvil on 127.0.0.1 and resolves once it answers `eth_chainId`. */
export async function startAnvil(options: AnvilOptions = {}): Promise<Anvil> {
  if (options.noMining && options.blockTime !== undefined) {
    throw new Error('anvil: noMining and blockTime cannot be combined');
  }
  const binary = resolveAnvilBinary();
  const args = ['--host', '127.0.0.1', '--port', String(options.port ?? 0), '--mnemonic', DEV_MNEMONIC];
  args.push('--accounts', String(DEV_ACCOUNT_COUNT), '--balance', String(DEV_ACCOUNT_BALANCE_ETH));
  if (options.chainId !== undefined) args.push('--chain-id', String(options.chainId));
  if (options.blockTime !== undefined) args.push('--block-time', String(options.blockTime));
  if (options.noMining) args.push('--no-mining');

  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  // anvil logs every request: keep reading (a full pipe would stall it) but remember only the end.
  let output = '';
  let port: number | undefined;
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-TAIL_CHARS);
    if (port === undefined) {
      const match = LISTENING.exec(output);
      if (match) port = Number(match[2]);
    }
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let spawnError: Error | undefined;
  child.on('error', (err) => {
    spawnError = err;
  });
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  let done = false;
  void exited.then(() => {
    done = true;
  });
  // A test runner or the service exiting without stop() must not leave the node behind.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);

  const stop = async () => {
    process.removeListener('exit', killOnExit);
    if (!done) {
      child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), STOP_GRACE_MS);
      });
      if ((await Promise.race([exited, grace])) === 'late') {
        child.kill('SIGKILL');
        await exited;
      }
      clearTimeout(timer);
    }
  };

  const deadline = Date.now() + (options.startTimeoutMs ?? 30_000);
  try {
    for (;;) {
      if (spawnError) throw new Error(`anvil (${binary}) could not start: ${spawnError.message}`);
      if (done)
        throw new Error(`anvil exited before serving (${child.exitCode ?? child.signalCode}):\n${output}`);
      if (port !== undefined) {
        const chainId = await tryChainId(`http://127.0.0.1:${port}`);
        if (chainId !== undefined) {
          return {
            rpcUrl: `http://127.0.0.1:${port}`,
            wsUrl: `ws://127.0.0.1:${port}`,
            chainId,
            pid: child.pid!,
            accounts: devAccounts(),
            stop,
          };
        }
      }
      if (Date.now() > deadline) throw new Error(`anvil did not answer in time:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  } catch (err) {
    await stop();
    throw err;
  }
}

async function tryChainId(url: string): Promise<number | undefined> {
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
      signal: AbortSignal.timeout(1_000),
    });
    const body = (await response.json()) as { result?: string };
    return body.result ? Number(body.result) : undefined;
  } catch {
    return undefined;
  }
}
