// This project's own kinds (operator.kyma-project.io/v1alpha1): ModuleConfig, the KCP mirror of one Module
// CR, and SyncResource, manifests a module manager wants applied to one SKR. manifests/crds/moduleconfigs.yaml and
// syncresources.yaml are generated from this file (`npm run generate`).
import * as z from 'zod/mini';
import { KINDS } from '../constants.js';
import {
  conditionsSchema,
  lastOperationSchema,
  objectMetaSchema,
  optional,
  readableEntries,
  requiredString,
  resourceStateSchema,
  typedObject,
} from './common.js';
import { crd, customResource, embeddedResource, int64 } from './crd.js';
import { syncedListSchema } from './synced.js';

const REQUIRED = { minLength: 1 };

export const mirroredResourceSchema = z.object({
  apiVersion: requiredString(),
  kind: requiredString(),
  metadata: z.object({ name: requiredString(), namespace: optional(z.string()) }),
  spec: optional(z.record(z.string(), z.unknown())),
});
export type MirroredResource = z.infer<typeof mirroredResourceSchema>;

export const moduleConfigSpecSchema = z.object({
  kyma: requiredString().register(crd, REQUIRED),
  module: requiredString().register(crd, REQUIRED),
  resource: mirroredResourceSchema,
});
export type ModuleConfigSpec = z.infer<typeof moduleConfigSpecSchema>;

/** Module managers may add their own status fields; the API server keeps them, the agent reads these. */
export const moduleConfigStatusSchema = z
  .object({
    state: optional(z.catch(resourceStateSchema, 'Processing')),
    conditions: optional(conditionsSchema),
    lastOperation: optional(lastOperationSchema),
    observedGeneration: optional(int64()),
    /** resourceVersion of the Module CR in the SKR that this mirror was taken from. */
    sourceResourceVersion: optional(z.string()),
  })
  .register(crd, { 'x-kubernetes-preserve-unknown-fields': true });
export type ModuleConfigStatus = z.infer<typeof moduleConfigStatusSchema>;

export const moduleConfigSchema = typedObject(
  moduleConfigSpecSchema,
  z.catch(z.optional(moduleConfigStatusSchema), undefined),
);
export type ModuleConfig = z.infer<typeof moduleConfigSchema>;

export const SYNC_STRATEGIES = ['CreateAndSync', 'CreateAndIgnore', 'Delete'] as const;
export type SyncStrategy = (typeof SYNC_STRATEGIES)[number];

/** One item; everything of its resource beyond identity is applied as written. */
export const syncItemSchema = z.object({
  name: requiredString().register(crd, { minLength: 1, maxLength: 253 }),
  strategy: z.enum(SYNC_STRATEGIES),
  // The API server checks only that it is an object (a bad one fails its item, not the SyncResource: index.ts).
  resource: z
    .looseObject({
      apiVersion: requiredString(),
      kind: requiredString(),
      metadata: z.catchall(z.extend(z.partial(objectMetaSchema), { name: requiredString() }), z.unknown()),
    })
    .register(crd, embeddedResource()),
});
export type SyncItem = z.infer<typeof syncItemSchema>;

/** Identity of what was applied, so that items dropped from the spec can be removed from the SKR. */
const appliedSchema = z.object({
  apiVersion: z.string(),
  kind: z.string(),
  name: z.string(),
  namespace: optional(z.string()),
});

export const syncItemStatusSchema = z
  .object({
    name: z.string(),
    // Any string to the API server; the agent reads one it does not know as Processing.
    state: z.catch(resourceStateSchema, 'Processing').register(crd, { served: { type: 'string' } }),
    message: optional(z.string()),
    applied: z.catch(optional(appliedSchema), undefined),
  })
  .register(crd, { 'x-kubernetes-preserve-unknown-fields': true });
export type SyncItemStatus = z.infer<typeof syncItemStatusSchema>;

export const syncResourceSpecSchema = z.object({
  kyma: requiredString().register(crd, REQUIRED),
  items: z
    .array(syncItemSchema)
    .register(crd, { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['name'] }),
});
export type SyncResourceSpec = z.infer<typeof syncResourceSpecSchema>;

export const syncResourceStatusSchema = z
  .object({
    state: optional(resourceStateSchema),
    conditions: optional(conditionsSchema),
    lastOperation: optional(lastOperationSchema),
    observedGeneration: optional(int64()),
    items: optional(z.array(syncItemStatusSchema)),
  })
  .register(crd, { 'x-kubernetes-preserve-unknown-fields': true });
export type SyncResourceStatus = z.infer<typeof syncResourceStatusSchema>;
export const syncResourceSchema = typedObject(syncResourceSpecSchema, syncResourceStatusSchema);
export type SyncResource = z.infer<typeof syncResourceSchema>;

/**
 * A SyncResource whose items stay unparsed until each is handled: a bad item is reported on that item,
 * not on the whole SyncResource. Status items that cannot be read are skipped.
 */
export const rawSyncResourceSchema = typedObject(
  z.object({ kyma: requiredString(), items: z.array(z.unknown()) }),
  z.catch(
    z.object({
      state: z.catch(optional(resourceStateSchema), undefined),
      observedGeneration: z.catch(optional(z.number()), undefined),
      items: optional(readableEntries(syncItemStatusSchema)),
      synced: optional(syncedListSchema),
    }),
    {},
  ),
);
export type RawSyncResource = z.infer<typeof rawSyncResourceSchema>;

export const moduleConfigCrd = customResource(KINDS.moduleConfig, {
  source: 'packages/api/src/schemas/mirrors.ts',
  comment: `ModuleConfig, operator.kyma-project.io/v1alpha1 (this project's kind): the mirror in KCP of one Module CR of
one SKR, written by the agent, read by module managers.`,
  description: 'Mirror in KCP of one Module CR of one SKR, for module managers to read.',
  printerColumns: [
    { name: 'Kyma', type: 'string', jsonPath: '.spec.kyma' },
    { name: 'Module', type: 'string', jsonPath: '.spec.module' },
    { name: 'State', type: 'string', jsonPath: '.status.state' },
  ],
  spec: moduleConfigSpecSchema,
  status: moduleConfigStatusSchema,
});

export const syncResourceCrd = customResource(KINDS.syncResource, {
  source: 'packages/api/src/schemas/mirrors.ts',
  comment: `SyncResource, operator.kyma-project.io/v1alpha1 (this project's kind): manifests a module manager wants
applied to one SKR; the agent applies them and reports each item in the status.`,
  description: 'Manifests a module manager wants applied to one SKR.',
  printerColumns: [
    { name: 'Kyma', type: 'string', jsonPath: '.spec.kyma' },
    { name: 'State', type: 'string', jsonPath: '.status.state' },
  ],
  spec: syncResourceSpecSchema,
  status: syncResourceStatusSchema,
});
