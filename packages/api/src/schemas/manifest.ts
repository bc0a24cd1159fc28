// Manifest (operator.kyma-project.io/v1beta2): one installed module of one Kyma, in upstream lifecycle-manager's
// shape, so Manifests upstream wrote are read and adopted as they are.
// manifests/crds/manifests.yaml is generated from this file (`npm run generate`).
import * as z from 'zod/mini';
import { KINDS } from '../constants.js';
import {
  conditionsSchema,
  labelSelectorSchema,
  lastOperationSchema,
  objectMetaSchema,
  optional,
  requiredString,
  typedObject,
} from './common.js';
import { crd, customResource } from './crd.js';
import { CUSTOM_RESOURCE_POLICIES } from './kyma.js';
import { syncedListSchema } from './synced.js';

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

/** spec.config: upstream's CRD checks the type (install.source, a RawExtension, is not checked). */
const configSpecSchema = z.extend(imageSpecSchema, {
  type: optional(z.string().register(crd, { enum: ['helm-chart', 'oci-ref', 'kustomize', ''] })),
});

export const manifestManagerSchema = z.object({
  group: z.string(),
  version: z.string(),
  kind: z.string(),
  name: z.string(),
  namespace: optional(z.string()),
});

/** The default Module CR; any object with apiVersion, kind and metadata. */
export const manifestResourceSchema = z.looseObject({
  apiVersion: requiredString(),
  kind: requiredString(),
  metadata: optional(z.looseObject({ name: optional(z.string()), namespace: optional(z.string()) })),
});
export type ManifestResource = z.infer<typeof manifestResourceSchema>;

// The agent reads `remote` as optional (it always writes false); the API server requires it, as upstream's does.
export const manifestSpecSchema = z
  .object({
    customResourcePolicy: optional(
      z.enum(CUSTOM_RESOURCE_POLICIES).register(crd, { default: 'CreateAndDelete' }),
    ),
    remote: optional(
      z.boolean().register(crd, { description: 'Deprecated upstream and not used; always false.' }),
    ),
    version: optional(z.string()),
    /** Deprecated upstream; only the raw manifest is rendered. */
    config: optional(configSpecSchema),
    install: z.object({
      name: z.string(),
      source: imageSpecSchema.register(crd, {
        served: {
          type: 'object',
          description:
            '{repo, name, ref, type}: the raw manifest at <repo>/component-descriptors/<name>@<ref>; type oci-dir (a tar) or oci-ref (YAML).',
          'x-kubernetes-preserve-unknown-fields': true,
        },
      }),
    }),
    resource: optional(
      manifestResourceSchema.register(crd, {
        served: {
          type: 'object',
          nullable: true,
          description: 'The default Module CR, created once in the SKR.',
          'x-kubernetes-embedded-resource': true,
          'x-kubernetes-preserve-unknown-fields': true,
        },
      }),
    ),
    localizedImages: optional(z.array(z.string())),
    manager: optional(manifestManagerSchema),
  })
  .register(crd, { required: ['install', 'remote'] });
export type ManifestSpec = z.infer<typeof manifestSpecSchema>;

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

// The API server requires a state, as upstream's does; the agent reads a status without one as Processing-to-be.
export const manifestStatusSchema = z
  .object({
    state: optional(z.enum(MANIFEST_STATES)),
    lastOperation: optional(lastOperationSchema),
    conditions: optional(conditionsSchema),
    synced: optional(syncedListSchema),
  })
  .register(crd, { required: ['state'] });
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
export const manifestSchema = z.extend(
  typedObject(manifestSpecSchema, z.catch(z.optional(manifestStatusSchema), undefined)),
  { metadata: z.extend(objectMetaSchema, { ownerReferences: optional(z.array(ownerReferenceSchema)) }) },
);
export type Manifest = z.infer<typeof manifestSchema>;

export const manifestCrd = customResource(KINDS.manifest, {
  source: 'packages/api/src/schemas/manifest.ts',
  comment: `Manifest, operator.kyma-project.io/v1beta2: one installed module of one Kyma, in upstream lifecycle-manager's
shape (its fields, enums, default and required fields), so Manifests upstream wrote are read and adopted.`,
  description: "One installed module of one Kyma (upstream lifecycle-manager's v1beta2 Manifest).",
  printerColumns: [{ name: 'State', type: 'string', jsonPath: '.status.state' }],
  spec: manifestSpecSchema,
  status: manifestStatusSchema,
});
