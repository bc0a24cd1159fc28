// Manifest (operator.kyma-project.io/v1beta2): one installed module of one Kyma, in upstream lifecycle-manager's
// shape (notes/module-installation.md §1), so Manifests upstream wrote are read and adopted as they are.
// manifests/crds/manifests.yaml is the server-side description of the same fields.
import { z } from 'zod';
import { CUSTOM_RESOURCE_POLICIES } from './kyma.js';
import {
  conditionSchema,
  labelSelectorSchema,
  lastOperationSchema,
  objectMetaSchema,
  optional,
  typedObject,
} from './common.js';

/** Upstream's ImageSpec.type; `oci-dir` (a tar) is written into the unvalidated install.source only. */
export const IMAGE_SPEC_TYPES = ['helm-chart', 'oci-ref', 'oci-dir', 'kustomize', ''] as const;

/** Where the raw manifest of a module version lies: `<repo>/component-descriptors/<name>@<ref>`. */
export const imageSpecSchema = z.object({
  repo: optional(z.string()),
  name: optional(z.string()),
  ref: optional(z.string()),
  type: optional(z.string()),
  /** Deprecated upstream (registry credentials come from a flag); accepted, not used. */
  credSecretSelector: optional(labelSelectorSchema),
});
export type ImageSpec = z.infer<typeof imageSpecSchema>;

export const manifestManagerSchema = z.object({
  group: z.string(),
  version: z.string(),
  kind: z.string(),
  name: z.string(),
  namespace: optional(z.string()),
});

/** The default Module CR; any object with apiVersion, kind and metadata. */
export const manifestResourceSchema = z.looseObject({
  apiVersion: z.string().min(1, 'is required'),
  kind: z.string().min(1, 'is required'),
  metadata: optional(z.looseObject({ name: optional(z.string()), namespace: optional(z.string()) })),
});
export type ManifestResource = z.infer<typeof manifestResourceSchema>;

export const manifestSpecSchema = z.object({
  customResourcePolicy: optional(z.enum(CUSTOM_RESOURCE_POLICIES)),
  /** Deprecated and non-functional upstream (always false); required by its CRD. */
  remote: optional(z.boolean()),
  version: optional(z.string()),
  /** Deprecated upstream; only the raw manifest is rendered. */
  config: optional(imageSpecSchema),
  install: z.object({ name: z.string(), source: imageSpecSchema }),
  resource: optional(manifestResourceSchema),
  localizedImages: optional(z.array(z.string())),
  manager: optional(manifestManagerSchema),
});
export type ManifestSpec = z.infer<typeof manifestSpecSchema>;

/** One object of the applied set; namespace is "" for cluster-scoped objects (upstream's shared.Resource). */
export const syncedResourceSchema = z.object({
  group: z.string(),
  version: z.string(),
  kind: z.string(),
  name: z.string(),
  namespace: z.string(),
});
export type SyncedResource = z.infer<typeof syncedResourceSchema>;

/** Upstream's shared.State, with its empty state (a Manifest nobody reconciled yet). */
export const MANIFEST_STATES = [
  'Processing',
  'Deleting',
  'Ready',
  'Error',
  '',
  'Warning',
  'Unmanaged',
] as const;

export const manifestStatusSchema = z.object({
  state: optional(z.enum(MANIFEST_STATES)),
  lastOperation: optional(lastOperationSchema),
  conditions: optional(z.array(conditionSchema)),
  synced: optional(z.array(syncedResourceSchema)),
});
export type ManifestStatus = z.infer<typeof manifestStatusSchema>;

/** The owner reference upstream sets: the Kyma, as controller. */
export const ownerReferenceSchema = z.object({
  apiVersion: z.string(),
  kind: z.string(),
  name: z.string(),
  uid: z.string(),
  controller: optional(z.boolean()),
  blockOwnerDeletion: optional(z.boolean()),
});

/** A status the agent cannot read counts as none and is replaced, as for the Kyma. */
export const manifestSchema = typedObject(
  manifestSpecSchema,
  manifestStatusSchema.optional().catch(undefined),
).extend({
  metadata: objectMetaSchema.extend({ ownerReferences: optional(z.array(ownerReferenceSchema)) }),
});
export type Manifest = z.infer<typeof manifestSchema>;
