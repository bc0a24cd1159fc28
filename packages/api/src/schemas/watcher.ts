// Watcher (operator.kyma-project.io/v1beta2): what the SKR webhook watches and which KCP component its
// events wake. Upstream has no `spec.manager` (its manager is the `managed-by` label); this project's older
// Watchers carry one, so both are read.
import { z } from 'zod';
import { labelSelectorSchema, optional, stringMap, typedObject } from './common.js';

export const watcherSpecSchema = z.object({
  manager: optional(z.string()),
  labelsToWatch: optional(stringMap),
  resourceToWatch: z.object({ group: z.string(), version: z.string().min(1), resource: z.string().min(1) }),
  field: z.enum(['spec', 'status']),
  serviceInfo: optional(z.object({ name: z.string(), port: z.number(), namespace: z.string() })),
  gateway: optional(z.object({ selector: optional(labelSelectorSchema) })),
});
export type WatcherSpec = z.infer<typeof watcherSpecSchema>;

export const watcherSchema = typedObject(watcherSpecSchema, z.unknown());
export type Watcher = z.infer<typeof watcherSchema>;
