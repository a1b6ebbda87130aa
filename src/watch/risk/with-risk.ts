import type { ChainBlock } from '../../chains/source.js';
import type { BlockMatch } from '../follower/follower.js';
import type { RiskLookup } from './enricher.js';

/**
 * Adds `addressesRiskRatio` (docs/watching-chains.md) to each notification of a block: the scores of the
 * addresses the watched address dealt with in that transaction, in their order (`[]` when there
 * is none). The block's lookups run at once, each bounded by the provider's deadline, so a slow or
 * failing provider delays a block by that deadline at most and leaves the field out rather than
 * hold anything up. Without a lookup (no provider, or not a risk network) the matcher is unchanged.
 * Contract events (an `eventType` of their own) moved no value between parties: they have none.
 */
export function withRiskScores<Activity, Match extends BlockMatch>(
  match: (block: ChainBlock<Activity>) => Promise<Match[]>,
  lookup: RiskLookup | undefined,
): (block: ChainBlock<Activity>) => Promise<Match[]> {
  if (!lookup) return match;
  return async (block) => {
    const matches = await match(block);
    const scores = await Promise.all(
      matches.map((m) =>
        m.eventType !== undefined
          ? Promise.resolve(undefined)
          : m.counterparties.length === 0
            ? Promise.resolve([])
            : lookup(m.counterparties),
      ),
    );
    return matches.map((m, i) => {
      const addressesRiskRatio = scores[i];
      if (addressesRiskRatio === undefined) return m;
      return { ...m, body: (id: string) => ({ ...m.body(id), addressesRiskRatio }) };
    });
  };
}
