import { createRegistryContext, type RegistryDeps } from './context.js';
import { createRegistryCreation } from './create.js';
import { createRegistryListing } from './listing.js';
import { createRegistryReads } from './reads.js';
import { createRegistryRevocation } from './revocation.js';

export type { RegistryDeps } from './context.js';
export { CREATE_SCOPE } from './create.js';
export { PASS_NOT_FOUND } from './revocation.js';
export type {
  CreatedRegistry,
  CreateRegistryInput,
  FolderView,
  PassView,
  RegistryCallbacks,
  RegistryView,
  Template,
} from './types.js';

/**
 * The registries, composed of their parts, each built once over one shared context (context.ts):
 * creation with its batches and idempotency (create.ts), reads by id with the row cache and proofs
 * (reads.ts), listing of registries and folders (listing.ts), revocation and the PASS page's read
 * (revocation.ts).
 */
export function createRegistries(deps: RegistryDeps) {
  const ctx = createRegistryContext(deps);
  const creation = createRegistryCreation(ctx);
  const reads = createRegistryReads(ctx);
  const listing = createRegistryListing(ctx);
  const revocation = createRegistryRevocation(ctx, reads.rows);

  return {
    revoke: revocation.revoke,
    pass: revocation.pass,
    create: creation.create,
    get: reads.get,
    onRegistryChanged: reads.onRegistryChanged,
    proof: reads.proof,
    list: listing.list,
    listFolders: listing.listFolders,
  };
}

export type Registries = ReturnType<typeof createRegistries>;
