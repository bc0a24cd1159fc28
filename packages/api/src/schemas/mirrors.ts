// This project's own kinds (operator.kyma-project.io/v1alpha1): ModuleConfig, the KCP mirror of one Module
// CR, and SyncResource, manifests a module manager wants applied to one SKR.
import { z } from 'zod';
import {
  conditionSchema,
  lastOperationSchema,
  objectMetaSchema,
  optional,
  resourceStateSchema,
  typedObject,
} from './common.js';

export const mirroredResourceSchema = z.object({
  apiVersion: z.string().min(1, 'is required'),
  kind: z.string().min(1, 'is required'),
  metadata: z.object({ name: z.string().min(1, 'is required'), namespace: optional(z.string()) }),
  spec: optional(z.record(z.string(), z.unknown())),
});
export type MirroredResource = z.infer<typeof mirroredResourceSchema>;

export const moduleConfigSpecSchema = z.object({
  kyma: z.string().min(1, 'is required'),
  module: z.string().min(1, 'is required'),
  resource: mirroredResourceSchema,
});
export type ModuleConfigSpec = z.infer<typeof moduleConfigSpecSchema>;

export const moduleConfigStatusSchema = z.object({
  state: optional(resourceStateSchema.catch('Processing')),
  conditions: optional(z.array(conditionSchema)),
  lastOperation: optional(lastOperationSchema),
  observedGeneration: optional(z.number()),
  /** resourceVersion of the Module CR in the SKR that this mirror was taken from. */
  sourceResourceVersion: optional(z.string()),
});
export type ModuleConfigStatus = z.infer<typeof moduleConfigStatusSchema>;

export const moduleConfigSchema = typedObject(
  moduleConfigSpecSchema,
  moduleConfigStatusSchema.optional().catch(undefined),
);
export type ModuleConfig = z.infer<typeof moduleConfigSchema>;

export const SYNC_STRATEGIES = ['CreateAndSync', 'CreateAndIgnore', 'Delete'] as const;
export type SyncStrategy = (typeof SYNC_STRATEGIES)[number];

/** One item; everything of its resource beyond identity is applied as written. */
export const syncItemSchema = z.object({
  name: z.string().min(1, 'is required'),
  strategy: z.enum(SYNC_STRATEGIES),
  resource: z.looseObject({
    apiVersion: z.string().min(1, 'is required'),
    kind: z.string().min(1, 'is required'),
    metadata: objectMetaSchema
      .partial()
      .extend({ name: z.string().min(1, 'is required') })
      .loose(),
  }),
});
export type SyncItem = z.infer<typeof syncItemSchema>;

/** Identity of what was applied, so that items dropped from the spec can be removed from the SKR. */
const appliedSchema = z.object({
  apiVersion: z.string(),
  kind: z.string(),
  name: z.string(),
  namespace: optional(z.string()),
});

export const syncItemStatusSchema = z.object({
  name: z.string(),
  state: resourceStateSchema.catch('Processing'),
  message: optional(z.string()),
  applied: optional(appliedSchema).catch(undefined),
});
export type SyncItemStatus = z.infer<typeof syncItemStatusSchema>;

export const syncResourceSpecSchema = z.object({
  kyma: z.string().min(1, 'is required'),
  items: z.array(syncItemSchema),
});
export type SyncResourceSpec = z.infer<typeof syncResourceSpecSchema>;

export const syncResourceStatusSchema = z.object({
  state: optional(resourceStateSchema),
  conditions: optional(z.array(conditionSchema)),
  lastOperation: optional(lastOperationSchema),
  observedGeneration: optional(z.number()),
  items: optional(z.array(syncItemStatusSchema)),
});
export type SyncResourceStatus = z.infer<typeof syncResourceStatusSchema>;
export const syncResourceSchema = typedObject(syncResourceSpecSchema, syncResourceStatusSchema);
export type SyncResource = z.infer<typeof syncResourceSchema>;

/**
 * A SyncResource whose items stay unparsed until each is handled: a bad item is reported on that item,
 * not on the whole SyncResource. Status items that cannot be read are skipped.
 */
export const rawSyncResourceSchema = typedObject(
  z.object({ kyma: z.string().min(1, 'is required'), items: z.array(z.unknown()) }),
  z
    .object({
      state: optional(resourceStateSchema).catch(undefined),
      observedGeneration: optional(z.number()).catch(undefined),
      items: optional(
        z.array(z.unknown()).transform((items) =>
          items.flatMap((item) => {
            const parsed = syncItemStatusSchema.safeParse(item);
            return parsed.success ? [parsed.data] : [];
          }),
        ),
      ),
    })
    .catch({}),
);
export type RawSyncResource = z.infer<typeof rawSyncResourceSchema>;
