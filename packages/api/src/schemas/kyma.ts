// Kyma (operator.kyma-project.io/v1beta2): the desired modules of one SKR and the status aggregating them.
// Field facts follow upstream lifecycle-manager's v1beta2 API; `spec.modules[].version` and `spec.sync` are
// this project's additions. manifests/crds/kymas.yaml is the server-side description of the same fields.
import { z } from 'zod';
import {
  conditionSchema,
  lastOperationSchema,
  moduleStateSchema,
  optional,
  resourceStateSchema,
  trackingObjectSchema,
  typedObject,
} from './common.js';

export const CUSTOM_RESOURCE_POLICIES = ['CreateAndDelete', 'Ignore'] as const;
export type CustomResourcePolicy = (typeof CUSTOM_RESOURCE_POLICIES)[number];

export const kymaModuleSchema = z.object({
  name: z.string().min(1, 'is required'),
  channel: optional(z.string()),
  /** This project's addition: pins a version instead of following a channel. */
  version: optional(z.string()),
  /** Absent means CreateAndDelete (the CRD defaults it; objects from other sources may lack it). */
  customResourcePolicy: optional(z.enum(CUSTOM_RESOURCE_POLICIES)),
  /** Absent means true; false hands the module to the user (state Unmanaged). */
  managed: optional(z.boolean()),
  /** Upstream's multi-tenant controller name; accepted, not used. */
  controller: optional(z.string()),
  /** Deprecated upstream; accepted, not used. */
  remoteModuleTemplateRef: optional(z.string()),
});
export type KymaModule = z.infer<typeof kymaModuleSchema>;

export const kymaSpecSchema = z.object({
  channel: optional(z.string()),
  skipMaintenanceWindows: optional(z.boolean()),
  modules: optional(z.array(kymaModuleSchema)),
  /** This project's addition: where the SKR Kyma lives, and whether the module catalog is copied there. */
  sync: optional(
    z.object({
      enabled: optional(z.boolean()),
      namespace: optional(z.string()),
      moduleCatalog: optional(z.boolean()),
    }),
  ),
});
export type KymaSpec = z.infer<typeof kymaSpecSchema>;

export const kymaModuleStatusSchema = z.object({
  name: z.string(),
  /** The module's fully qualified name: the OCM component name (upstream deprecates it for the field below). */
  fqdn: optional(z.string()),
  /** The ModuleReleaseMeta's OCM component name; written next to `fqdn` as upstream does. */
  ocmComponentName: optional(z.string()),
  channel: optional(z.string()),
  version: optional(z.string()),
  message: optional(z.string()),
  state: moduleStateSchema,
  // An older shape of these (a template name, a flat resource) reads as absent rather than failing the status.
  /** Upstream's Manifest; this project installs no Manifests, so it only keeps one another controller wrote. */
  manifest: optional(trackingObjectSchema).catch(undefined),
  /** The Module CR in the SKR. */
  resource: optional(trackingObjectSchema).catch(undefined),
  /** The ModuleTemplate the module was resolved to. */
  template: optional(trackingObjectSchema).catch(undefined),
  maintenance: optional(z.boolean()),
});
export type KymaModuleStatus = z.infer<typeof kymaModuleStatusSchema>;

export const kymaStatusSchema = z.object({
  state: optional(z.union([resourceStateSchema, z.literal('')])),
  lastOperation: optional(lastOperationSchema),
  conditions: optional(z.array(conditionSchema)),
  modules: optional(z.array(kymaModuleStatusSchema)),
  activeChannel: optional(z.string()),
});
export type KymaStatus = z.infer<typeof kymaStatusSchema>;

/**
 * A status the agent cannot read (written by another tool, or by hand) counts as no status: the next write
 * replaces it, instead of the Kyma never reconciling again.
 */
export const kymaSchema = typedObject(
  kymaSpecSchema.default({}),
  kymaStatusSchema.optional().catch(undefined),
);
export type Kyma = z.infer<typeof kymaSchema>;
