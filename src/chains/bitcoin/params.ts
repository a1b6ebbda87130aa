import { type Network as BitcoinParams, networks as btcNetworks } from 'bitcoinjs-lib';

/** The Bitcoin chains whose address prefixes a network can use (signet shares testnet's). */
export const BITCOIN_CHAINS = ['mainnet', 'testnet', 'regtest'] as const;
export type BitcoinChain = (typeof BITCOIN_CHAINS)[number];

const PARAMS: Record<BitcoinChain, BitcoinParams> = {
  mainnet: btcNetworks.bitcoin,
  testnet: btcNetworks.testnet,
  regtest: btcNetworks.regtest,
};

/** bitcoinjs-lib's parameters (bech32 prefix, base58 versions) for a chain. */
export const bitcoinParams = (chain: BitcoinChain = 'mainnet'): BitcoinParams => PARAMS[chain];

/** How addresses of a chain are written, for error messages. */
export function bitcoinAddressFormat(chain: BitcoinChain = 'mainnet'): string {
  switch (chain) {
    case 'mainnet':
      return 'a mainnet bech32/bech32m (bc1…) or base58check (1…, 3…) address';
    case 'testnet':
      return 'a testnet bech32/bech32m (tb1…) or base58check (m…, n…, 2…) address';
    case 'regtest':
      return 'a regtest bech32/bech32m (bcrt1…) or base58check (m…, n…, 2…) address';
  }
}
