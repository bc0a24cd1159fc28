// The inventory of a set of objects the agent keeps in an SKR (a Manifest's or a SyncResource's
// `status.synced`), in upstream lifecycle-manager's shape: namespace "" for cluster-scoped objects, and the
// version is part of an object's identity (an object whose kind moved to another version is a different one).
import * as z from 'zod/mini';
import { readableEntries, requiredString } from './common.js';
import { crd } from './crd.js';

export const syncedObjectSchema = z.object({
  group: z.string(),
  version: requiredString(),
  kind: requiredString(),
  name: requiredString(),
  namespace: z.string(),
});
export type SyncedObject = z.infer<typeof syncedObjectSchema>;

/** `status.synced` as read back: entries that cannot be read are skipped (they name nothing to prune). */
export const syncedListSchema = z
  .catch(readableEntries(syncedObjectSchema), [])
  // The API server checks each entry's fields, as upstream's CRD does; the agent skips an entry it cannot read.
  .register(crd, {
    served: {
      type: 'array',
      'x-kubernetes-list-type': 'atomic',
      items: {
        type: 'object',
        required: ['group', 'version', 'kind', 'name', 'namespace'],
        properties: Object.fromEntries(
          ['group', 'version', 'kind', 'name', 'namespace'].map((key) => [key, { type: 'string' }]),
        ),
      },
    },
  });
