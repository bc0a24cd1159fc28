// Watcher (operator.kyma-project.io/v1beta2): what the SKR webhook watches and which KCP component its
// events wake. Upstream has no `spec.manager` (its manager is the `managed-by` label); this project's older
// Watchers carry one, so both are read. manifests/crds/watchers.yaml is generated from this file (`npm run generate`).
import * as z from 'zod/mini';
import { KINDS } from '../constants.js';
import {
  conditionsSchema,
  labelSelectorSchema,
  optional,
  resourceStateSchema,
  stringMap,
  typedObject,
} from './common.js';
import { crd, customResource, int64 } from './crd.js';

export const watcherSpecSchema = z.object({
  manager: optional(
    z.string().register(crd, {
      pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$',
      maxLength: 63,
      description:
        "This project's addition; the component in the callback path (default the managed-by label).",
    }),
  ),
  labelsToWatch: optional(stringMap),
  resourceToWatch: z.object({
    group: z.string(),
    version: z.string().check(z.minLength(1)),
    resource: z.string().check(z.minLength(1)),
  }),
  field: z.enum(['spec', 'status']),
  serviceInfo: optional(z.object({ name: z.string(), port: int64(), namespace: z.string() })),
  // The agent never reads it: one it cannot parse (an operator the API server let through) reads as absent.
  gateway: z.catch(
    optional(
      z.object({ selector: optional(labelSelectorSchema) }).register(crd, {
        // Upstream requires the selector.
        required: ['selector'],
        description: 'Selects the Istio Gateway upstream routes the callbacks through; kept, not used.',
      }),
    ),
    undefined,
  ),
});
export type WatcherSpec = z.infer<typeof watcherSpecSchema>;

/** Upstream's Watcher status, as the API server checks it; the agent never reads a Watcher's status. */
const watcherStatusSchema = z.object({
  state: optional(z.union([resourceStateSchema, z.literal('')])),
  observedGeneration: optional(int64()),
  conditions: optional(conditionsSchema),
});

export const watcherSchema = typedObject(watcherSpecSchema, z.unknown());
export type Watcher = z.infer<typeof watcherSchema>;

export const watcherCrd = customResource(KINDS.watcher, {
  source: 'packages/api/src/schemas/watcher.ts',
  comment: `Watcher, operator.kyma-project.io/v1beta2: what the SKR webhook watches and which KCP component its events
wake. Accepts every field upstream lifecycle-manager's v1beta2 accepts. spec.manager is this project's
addition; without it the manager is the operator.kyma-project.io/managed-by label, as upstream reads it.
serviceInfo, labelsToWatch and gateway, which upstream requires, stay optional here (docs/decisions/009).`,
  description: 'What the SKR webhook watches and which KCP component its events wake.',
  spec: watcherSpecSchema,
  status: watcherStatusSchema,
});
