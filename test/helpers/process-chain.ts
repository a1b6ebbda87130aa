/**
 * For tests that run the service as a process (or several, one after another): an anvil chain of
 * the test's own, named DEVNET in a config file, that outlives the services; and their environment.
 */
import path from 'node:path';
import { createPublicClient, createWalletClient, http, type PublicClient, type WalletClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { type Anvil, startAnvil } from '../../src/chains/evm/anvil.js';
import { writeDevnetConfig } from './anvil.js';
import { TEST_SERVICE_ENV } from './app.js';

export interface ProcessChain {
  anvil: Anvil;
  /** Reads the head uncached (viem caches it for the polling interval otherwise). */
  client: PublicClient;
  /** Dev account 0. */
  wallet: WalletClient;
  configFile: string;
}

/** Starts anvil, writes its DEVNET config into `configDir`; `onCleanup` is given its stop. */
export async function startProcessChain(
  configDir: string,
  onCleanup: (cleanup: () => Promise<void>) => void,
): Promise<ProcessChain> {
  const anvil = await startAnvil();
  onCleanup(() => anvil.stop());
  return {
    anvil,
    configFile: writeDevnetConfig(path.join(configDir, 'ledgerhook.json'), anvil.chainId, anvil.rpcUrl),
    client: createPublicClient({ transport: http(anvil.rpcUrl), pollingInterval: 50, cacheTime: 0 }),
    wallet: createWalletClient({
      account: privateKeyToAccount(anvil.accounts[0]!.privateKey),
      transport: http(anvil.rpcUrl),
    }),
  };
}

/**
 * A service process's environment on `chain`: the tests' delivery settings (without their PORT,
 * so each process picks one, and their LOG_LEVEL: the log is read), every role, quick polling.
 */
export function processServiceEnv(
  base: Record<string, string>,
  chain: Pick<ProcessChain, 'configFile'>,
  extra: Record<string, string> = {},
): Record<string, string> {
  const { PORT: _port, LOG_LEVEL: _level, ...delivery } = TEST_SERVICE_ENV;
  return {
    ...base,
    ...delivery,
    LOG_LEVEL: 'info',
    LEDGERHOOK_CONFIG: chain.configFile,
    LEDGERHOOK_WATCH_POLL_INTERVAL: '50ms',
    LEDGERHOOK_ROLES: 'all',
    ...extra,
  };
}
