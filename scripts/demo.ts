/**
 * `npm run demo`: the whole loop on one machine, offline. Starts the real service with `serve
 * --devnet` on a fresh data directory, a receiver on loopback, subscribes a dev account on DEVNET,
 * sends a native, an ERC-20 and an NFT transfer with viem, prints each notification as it arrives
 * (signature verified with `standardwebhooks`), then stops everything and removes the directory.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Webhook } from 'standardwebhooks';
import {
  type Abi,
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  type Hex,
  http as httpTransport,
  parseEther,
  parseUnits,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const ARTIFACTS = new URL('../test/fixtures/contracts/artifacts.json', import.meta.url);

/** The fields of a notification (docs/watching-chains.md) in the order they are printed; the additions follow. */
const FIELD_ORDER = [
  'address',
  'txId',
  'type',
  'blockNumber',
  'asset',
  'amount',
  'tokenId',
  'mempool',
  'counterAddress',
  'addressesRiskRatio',
  'id',
  'subscriptionId',
  'chain',
  'watchedAddress',
  'confirmations',
  'reorg',
];

const STEP_DEADLINE_MS = 20_000;
const STOP_GRACE_MS = 15_000;

type Body = Record<string, unknown>;

interface Received {
  at: number;
  headers: http.IncomingHttpHeaders;
  body: Body;
  verified: boolean;
}

export interface DemoOptions {
  /** Where the demo's text goes; stdout by default. */
  write?: (text: string) => void;
  /** Aborting it (Ctrl-C) ends the demo early, still stopping the service and cleaning up. */
  signal?: AbortSignal;
}

export interface DemoResult {
  /** The included (not mempool) notification of each of the three transfers. */
  notifications: { native: Body; erc20: Body; nft: Body };
  /** Every notification received. */
  received: number;
}

/** Aligned, still valid JSON: the §6 fields first, in their order, values lined up. */
export function formatBody(body: Body, indent = '    '): string {
  const keys = [
    ...FIELD_ORDER.filter((k) => k in body),
    ...Object.keys(body).filter((k) => !FIELD_ORDER.includes(k)),
  ];
  const width = Math.max(...keys.map((k) => k.length + 3));
  const lines = keys.map(
    (k, i) =>
      `${indent}  ${`${JSON.stringify(k)}:`.padEnd(width)} ${JSON.stringify(body[k])}${i < keys.length - 1 ? ',' : ''}`,
  );
  return `${indent}{\n${lines.join('\n')}\n${indent}}`;
}

function short(hex: string): string {
  return hex.length > 14 ? `${hex.slice(0, 8)}…${hex.slice(-4)}` : hex;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** Polls `check` until it returns a value; throws at the deadline or once `signal` aborts. */
async function until<T>(
  check: () => T | undefined | Promise<T | undefined>,
  what: string,
  ms: number,
  signal?: AbortSignal,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (signal?.aborted) throw new Error(`interrupted while waiting for ${what}`);
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${seconds(ms)} waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** What `serve --devnet` printed: the API, its token, the devnet RPC and the funded keys. */
interface Started {
  child: ChildProcess;
  url: string;
  token: string;
  rpcUrl: string;
  keys: Hex[];
  output(): string;
  exited: Promise<number | null>;
}

function serviceEnv(dataDir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    // A fresh machine: none of the operator's Ledgerhook settings, no external database.
    if (name.startsWith('LEDGERHOOK_') || ['DATABASE_URL', 'PORT', 'HOST', 'LOG_LEVEL'].includes(name))
      continue;
    env[name] = value;
  }
  // The serving URL is logged at info; the log itself is never echoed.
  return { ...env, LEDGERHOOK_DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' };
}

async function startService(dataDir: string, signal?: AbortSignal): Promise<Started> {
  // Its own process group: a Ctrl-C reaches the demo, which stops the service (and so anvil) in order.
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve', '--devnet'], {
    cwd: repoRoot,
    env: serviceEnv(dataDir),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  child.stdout?.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr?.on('data', (c: Buffer) => {
    out += c.toString();
  });
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      exitCode = code;
      resolve(code);
    }),
  );
  let url: string;
  try {
    url = await until(
      () => {
        if (exitCode !== undefined)
          throw new Error(`the service exited (${exitCode}) before serving:\n${out}`);
        for (const line of out.split('\n')) {
          if (!line.includes('"ledgerhook is serving"')) continue;
          return (JSON.parse(line) as { url: string }).url;
        }
        return undefined;
      },
      'the service to serve',
      60_000,
      signal,
    );
  } catch (err) {
    // Not serving yet, so no SIGTERM handler: stop its whole process group (the service and anvil).
    await stopGroup(child, exited);
    throw err;
  }
  const token = /lh_[A-Za-z0-9_-]{32}/.exec(out)?.[0];
  const rpcUrl = /RPC (http:\/\/\S+)/.exec(out)?.[1];
  const keys = [...out.matchAll(/private key (0x[0-9a-fA-F]{64})/g)].map((m) => m[1] as Hex);
  if (!token || !rpcUrl || keys.length < 3) {
    await stopGroup(child, exited);
    throw new Error(`the service did not print a token, the devnet RPC and its keys:\n${out}`);
  }
  return { child, url, token, rpcUrl, keys, output: () => out, exited };
}

interface ReceiverServer {
  url: string;
  received: Received[];
  setSecret(secret: string, callbackToken: string): void;
  close(): Promise<void>;
}

/** The receiver: verifies, prints and acknowledges each notification. */
async function startReceiver(print: (r: Received, index: number) => void): Promise<ReceiverServer> {
  const received: Received[] = [];
  let webhook: Webhook | undefined;
  let bearer = '';
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let verified = false;
      try {
        webhook?.verify(raw, {
          'webhook-id': String(req.headers['webhook-id']),
          'webhook-timestamp': String(req.headers['webhook-timestamp']),
          'webhook-signature': String(req.headers['webhook-signature']),
        });
        verified = webhook !== undefined && req.headers.authorization === `Bearer ${bearer}`;
      } catch {
        verified = false;
      }
      let body: Body;
      try {
        body = JSON.parse(raw) as Body;
      } catch {
        body = { unparsable: raw.slice(0, 200) };
        verified = false;
      }
      const entry: Received = { at: Date.now(), headers: req.headers, body, verified };
      received.push(entry);
      print(entry, received.length);
      res.writeHead(verified ? 200 : 401, { 'content-type': 'application/json' });
      res.end(verified ? '{"status":"success"}' : '{"status":"bad signature"}');
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    setSecret(secret, callbackToken) {
      webhook = new Webhook(secret);
      bearer = callbackToken;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function rpcAnswers(rpcUrl: string): Promise<boolean> {
  try {
    const res = await fetch(rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
      signal: AbortSignal.timeout(1_000),
    });
    return res.ok;
  } catch {
    return false;
  }
}

export async function runDemo(options: DemoOptions = {}): Promise<DemoResult> {
  const write = options.write ?? ((text: string) => process.stdout.write(text));
  const bold = (s: string) =>
    options.write === undefined && process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s;
  const say = (line = '') => write(`${line}\n`);
  const heading = (title: string) => say(`\n${bold(`▶ ${title}`)}`);

  const artifacts = JSON.parse(fs.readFileSync(ARTIFACTS, 'utf8')) as Record<
    string,
    { abi: Abi; bytecode: Hex }
  >;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-demo-'));
  let service: Started | undefined;
  let receiver: ReceiverServer | undefined;
  let quiet = false;
  const killOnExit = () => service?.child.kill('SIGTERM');
  process.once('exit', killOnExit);

  try {
    say(bold('Ledgerhook demo: a local devnet, the real service, a receiver and three transfers'));

    heading('Starting the service: ledgerhook serve --devnet');
    say(`  data directory  ${dataDir} (fresh, removed at the end)`);
    const startedAt = Date.now();
    service = await startService(dataDir, options.signal);
    const { url, token, rpcUrl } = service;
    say(`  API             ${url}   (token ${token.slice(0, 7)}…, printed on first start)`);
    say(`  devnet RPC      ${rpcUrl}   chain DEVNET, id 31337`);
    say(`  ready in ${seconds(Date.now() - startedAt)}`);

    receiver = await startReceiver((r, index) => {
      if (quiet) return;
      const when = r.body.mempool === true ? ' (pending, in the mempool)' : '';
      say(`\n  ◀ notification #${index}${when}: POST ${receiver?.url ?? ''}`);
      say(`    webhook-id ${String(r.headers['webhook-id'])}`);
      say(
        r.verified
          ? '    signature ok (standardwebhooks), Authorization: Bearer <callbackToken> ok'
          : '    signature INVALID: answered 401',
      );
      say(formatBody(r.body));
    });
    say(`  receiver        ${receiver.url}`);

    const chain = defineChain({
      id: 31337,
      name: 'Ledgerhook devnet',
      nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
      rpcUrls: { default: { http: [rpcUrl] } },
    });
    const publicClient = createPublicClient({ chain, transport: httpTransport(rpcUrl), pollingInterval: 50 });
    const wallet = (key: Hex) =>
      createWalletClient({ account: privateKeyToAccount(key), chain, transport: httpTransport(rpcUrl) });
    // The keys --devnet printed: (0) deploys and sends tokens, (1) is watched, (2) receives ether.
    const [deployer, watched, other] = [0, 1, 2].map((i) => wallet(service!.keys[i]!)) as [
      ReturnType<typeof wallet>,
      ReturnType<typeof wallet>,
      ReturnType<typeof wallet>,
    ];
    const watchedAddress = getAddress(watched.account.address);
    const deployerAddress = getAddress(deployer.account.address);
    const otherAddress = getAddress(other.account.address);

    const api = async (method: string, route: string, body?: unknown) => {
      const res = await fetch(`${url}${route}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Body };
    };

    heading(`Subscribing to dev account (1) ${watchedAddress} on DEVNET`);
    const created = await api('POST', '/api/v1/subscription', {
      type: 'ADDRESS_TRANSACTION',
      attr: { address: watchedAddress, chain: 'DEVNET', url: receiver.url },
    });
    if (created.status !== 201) throw new Error(`creating the subscription: ${JSON.stringify(created)}`);
    const subscription = created.body as { id: string; secret: string; callbackToken: string };
    receiver.setSecret(subscription.secret, subscription.callbackToken);
    say(`  subscription ${subscription.id}, secret ${subscription.secret.slice(0, 10)}… (shown once)`);
    say(`  loopback callback allowed: --devnet permits 127.0.0.0/8 and ::1`);

    // The follower starts at the head: wait until it has, so the first transfer is not before it.
    const head = Number(await publicClient.getBlockNumber());
    await until(
      async () => {
        const ready = (await (await fetch(`${url}/readyz`)).json()) as {
          networks?: { network: string; height: number | null }[];
        };
        const devnet = ready.networks?.find((n) => n.network === 'DEVNET');
        return devnet?.height != null && devnet.height >= head ? true : undefined;
      },
      'the DEVNET follower',
      STEP_DEADLINE_MS,
      options.signal,
    );

    const included = async (txId: Hex, what: string, sentAt: number) => {
      const found = await until(
        () => receiver!.received.find((r) => r.body.txId === txId && r.body.mempool !== true),
        `the notification of the ${what}`,
        STEP_DEADLINE_MS,
        options.signal,
      );
      if (!found.verified) throw new Error(`the notification of the ${what} failed signature verification`);
      return { body: found.body, latencyMs: found.at - sentAt };
    };
    const mined = async (hash: Promise<Hex>) => {
      const receipt = await publicClient.waitForTransactionReceipt({
        hash: await hash,
        timeout: STEP_DEADLINE_MS,
      });
      if (receipt.status !== 'success') throw new Error(`transaction ${receipt.transactionHash} reverted`);
      return receipt;
    };

    heading(`1. Native transfer: 1.5 ETH from the watched address to dev account (2) ${short(otherAddress)}`);
    let sentAt = Date.now();
    const nativeTx = await mined(
      watched.sendTransaction({
        account: watched.account,
        chain,
        to: otherAddress,
        value: parseEther('1.5'),
      }),
    );
    say(`  → tx ${nativeTx.transactionHash} mined in block ${nativeTx.blockNumber}`);
    const native = await included(nativeTx.transactionHash, 'native transfer', sentAt);

    heading(
      '2. ERC-20: deploy TestToken (6 decimals), mint 1000 TST to account (0), send 25 TST to the watched address',
    );
    const { abi: tokenAbi, bytecode: tokenCode } = artifacts.TestToken!;
    const tokenDeploy = await mined(
      deployer.deployContract({ account: deployer.account, chain, abi: tokenAbi, bytecode: tokenCode }),
    );
    const token20 = getAddress(tokenDeploy.contractAddress!);
    say(`  → TestToken at ${token20}`);
    await mined(
      deployer.writeContract({
        account: deployer.account,
        chain,
        address: token20,
        abi: tokenAbi,
        functionName: 'mint',
        args: [deployerAddress, parseUnits('1000', 6)],
      }),
    );
    sentAt = Date.now();
    const erc20Tx = await mined(
      deployer.writeContract({
        account: deployer.account,
        chain,
        address: token20,
        abi: tokenAbi,
        functionName: 'transfer',
        args: [watchedAddress, parseUnits('25', 6)],
      }),
    );
    say(`  → tx ${erc20Tx.transactionHash} mined in block ${erc20Tx.blockNumber}`);
    const erc20 = await included(erc20Tx.transactionHash, 'ERC-20 transfer', sentAt);

    heading(
      '3. NFT: deploy TestNFT (ERC-721), mint token #1 to account (0), transfer it to the watched address',
    );
    const { abi: nftAbi, bytecode: nftCode } = artifacts.TestNFT!;
    const nftDeploy = await mined(
      deployer.deployContract({ account: deployer.account, chain, abi: nftAbi, bytecode: nftCode }),
    );
    const nftAddress = getAddress(nftDeploy.contractAddress!);
    say(`  → TestNFT at ${nftAddress}`);
    await mined(
      deployer.writeContract({
        account: deployer.account,
        chain,
        address: nftAddress,
        abi: nftAbi,
        functionName: 'mint',
        args: [deployerAddress, 1n],
      }),
    );
    sentAt = Date.now();
    const nftTx = await mined(
      deployer.writeContract({
        account: deployer.account,
        chain,
        address: nftAddress,
        abi: nftAbi,
        functionName: 'transferFrom',
        args: [deployerAddress, watchedAddress, 1n],
      }),
    );
    say(`  → tx ${nftTx.transactionHash} mined in block ${nftTx.blockNumber}`);
    const nft = await included(nftTx.transactionHash, 'NFT transfer', sentAt);
    quiet = true;

    heading('Summary');
    const row = (label: string, n: { body: Body; latencyMs: number }, detail: string) =>
      say(
        `  ✓ ${label.padEnd(16)} ${detail.padEnd(44)} block ${String(n.body.blockNumber).padEnd(4)} notified ${seconds(n.latencyMs)} after sending`,
      );
    row('native transfer', native, `${native.body.amount} ETH, watched address → ${short(otherAddress)}`);
    row('ERC-20 transfer', erc20, `${erc20.body.amount} TST, ${short(deployerAddress)} → watched address`);
    row('NFT transfer', nft, `token #${nft.body.tokenId}, ${short(deployerAddress)} → watched address`);
    const all = receiver.received.length;
    const pending = receiver.received.filter((r) => r.body.mempool === true).length;
    say(
      `  ${all} notification${all === 1 ? '' : 's'} received${pending ? ` (${pending} from the mempool)` : ''}, ` +
        `${receiver.received.every((r) => r.verified) ? 'every signature verified' : 'SOME SIGNATURES FAILED'}.`,
    );
    say('  amount is signed from the sender\'s side ("address"); counterAddress is the recipient.');
    say(`  Delivery log: GET ${url}/api/v1/subscription/${subscription.id}/notifications`);
    return { notifications: { native: native.body, erc20: erc20.body, nft: nft.body }, received: all };
  } catch (err) {
    if (service && !options.signal?.aborted) {
      say('\nThe service printed:');
      say(service.output().trimEnd().split('\n').slice(-40).join('\n'));
    }
    throw err;
  } finally {
    quiet = true;
    heading('Shutting down');
    if (service) {
      const code = await stopService(service);
      const anvilGone = !(await rpcAnswers(service.rpcUrl));
      say(`  service stopped on SIGTERM (exit ${code}); devnet ${anvilGone ? 'stopped' : 'STILL ANSWERING'}`);
    }
    await receiver?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    process.removeListener('exit', killOnExit);
    say(`  receiver closed; removed ${dataDir}`);
  }
}

async function stopGroup(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  const signalGroup = (signal: NodeJS.Signals) => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, signal);
    } catch {
      // already gone
    }
  };
  signalGroup('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), STOP_GRACE_MS);
  });
  if ((await Promise.race([exited, late])) === 'late') signalGroup('SIGKILL');
  clearTimeout(timer);
}

async function stopService(service: Started): Promise<number | null> {
  if (service.child.exitCode === null && service.child.signalCode === null) service.child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), STOP_GRACE_MS);
  });
  const outcome = await Promise.race([service.exited, late]);
  clearTimeout(timer);
  if (outcome !== 'late') return outcome;
  service.child.kill('SIGKILL');
  return service.exited;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const interrupt = new AbortController();
  const onSignal = () => {
    if (interrupt.signal.aborted) process.exit(130); // a second Ctrl-C: leave at once
    process.stdout.write('\nInterrupted: stopping…\n');
    interrupt.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const started = Date.now();
  runDemo({ signal: interrupt.signal }).then(
    () => {
      process.stdout.write(`\nDone in ${seconds(Date.now() - started)}.\n`);
      process.exit(0);
    },
    (err: unknown) => {
      process.stderr.write(`\ndemo failed: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(interrupt.signal.aborted ? 130 : 1);
    },
  );
}
