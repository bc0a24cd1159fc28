// Kyma (operator.kyma-project.io/v1beta2): the desired modules of one SKR and the status aggregating them.
// Field facts follow upstream lifecycle-manager's v1beta2 API; `spec.modules[].version` and `spec.sync` are
// this project's additions. manifests/crds/kymas.yaml is generated from this file (`npm run generate`).
import * as z from 'zod/mini';
import { KINDS } from '../constants.js';
import {
  conditionsSchema,
  lastOperationSchema,
  moduleStateSchema,
  optional,
  requiredString,
  resourceStateSchema,
  trackingObjectSchema,
  typedObject,
} from './common.js';
import { crd, customResource, type ServerFacts } from './crd.js';

/** Upstream's pattern of a release channel name. */
const channelSchema = (facts: ServerFacts = {}) =>
  z.string().register(crd, { pattern: '^[a-z]+$', minLength: 3, maxLength: 32, ...facts });

export const CUSTOM_RESOURCE_POLICIES = ['CreateAndDelete', 'Ignore'] as const;
export type CustomResourcePolicy = (typeof CUSTOM_RESOURCE_POLICIES)[number];

export const kymaModuleSchema = z.object({
  name: requiredString().register(crd, {
    description: 'The module; its ModuleReleaseMeta and ModuleTemplates carry this name.',
  }),
  channel: optional(channelSchema()),
  /** This project's addition: pins a version instead of following a channel. */
  version: optional(
    z.string().register(crd, {
      maxLength: 64,
      description: "This project's addition; pins a version instead of following a channel.",
    }),
  ),
  /** Absent means CreateAndDelete (the CRD defaults it; objects from other sources may lack it). */
  customResourcePolicy: optional(
    z.enum(CUSTOM_RESOURCE_POLICIES).register(crd, {
      default: 'CreateAndDelete',
      description: 'CreateAndDelete creates the default Module CR from the template; Ignore does not.',
    }),
  ),
  /** Absent means true; false hands the module to the user (state Unmanaged). */
  managed: optional(
    z.boolean().register(crd, {
      default: true,
      description: 'false hands the module to the user (state Unmanaged); its Module CR is left alone.',
    }),
  ),
  /** Upstream's multi-tenant controller name; accepted, not used. */
  controller: optional(
    z
      .string()
      .register(crd, { description: "Upstream's controller name for splitting work; accepted, not used." }),
  ),
  /** Deprecated upstream; accepted, not used. */
  remoteModuleTemplateRef: optional(
    z.string().register(crd, { description: 'Deprecated upstream; accepted, not used.' }),
  ),
});
export type KymaModule = z.infer<typeof kymaModuleSchema>;

export const kymaSpecSchema = z.object({
  channel: optional(channelSchema({ description: 'Default release channel of the modules.' })),
  skipMaintenanceWindows: optional(
    z.boolean().register(crd, { description: 'Upgrades that need downtime skip the maintenance windows.' }),
  ),
  modules: optional(
    z
      .array(kymaModuleSchema)
      .register(crd, { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['name'] }),
  ),
  /** This project's addition: where the SKR Kyma lives, and whether the module catalog is copied there. */
  sync: optional(
    z
      .object({
        enabled: optional(z.boolean()),
        namespace: optional(z.string().register(crd, { maxLength: 63 })),
        moduleCatalog: optional(z.boolean()),
      })
      .register(crd, {
        description:
          "This project's addition. Where the SKR Kyma lives and whether the module catalog is copied there.",
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
  manifest: z.catch(optional(trackingObjectSchema), undefined),
  /** The Module CR in the SKR. */
  resource: z.catch(optional(trackingObjectSchema), undefined),
  /** The ModuleTemplate the module was resolved to. */
  template: z.catch(optional(trackingObjectSchema), undefined),
  maintenance: optional(z.boolean().register(crd, { default: false })),
});
export type KymaModuleStatus = z.infer<typeof kymaModuleStatusSchema>;

/** Fields another controller adds to a Kyma status are kept by the API server; the agent reads these. */
export const kymaStatusSchema = z
  .object({
    state: optional(z.union([resourceStateSchema, z.literal('')])),
    lastOperation: optional(lastOperationSchema),
    conditions: optional(conditionsSchema),
    modules: optional(z.array(kymaModuleStatusSchema)),
    activeChannel: optional(z.string()),
  })
  .register(crd, { 'x-kubernetes-preserve-unknown-fields': true });
export type KymaStatus = z.infer<typeof kymaStatusSchema>;

/**
 * A status the agent cannot read (written by another tool, or by hand) counts as no status: the next write
 * replaces it, instead of the Kyma never reconciling again.
 */
export const kymaSchema = typedObject(
  z._default(kymaSpecSchema, {}),
  z.catch(z.optional(kymaStatusSchema), undefined),
);
export type Kyma = z.infer<typeof kymaSchema>;

export const kymaCrd = customResource(KINDS.kyma, {
  source: 'packages/api/src/schemas/kyma.ts',
  comment: `Kyma, operator.kyma-project.io/v1beta2. Accepts every field upstream lifecycle-manager's v1beta2 accepts, with
its types, enums and defaults; spec.modules[].version and spec.sync are this project's additions. Fields
upstream requires but the agent can do without (spec.channel) stay optional here (docs/decisions/009).`,
  description: 'Desired modules of one runtime cluster (SKR); its status aggregates everything.',
  printerColumns: [{ name: 'State', type: 'string', jsonPath: '.status.state' }],
  spec: kymaSpecSchema,
  status: kymaStatusSchema,
});
