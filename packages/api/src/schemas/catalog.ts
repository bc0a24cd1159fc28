// The module catalog (operator.kyma-project.io/v1beta2): ModuleTemplate (one version of a module) and
// ModuleReleaseMeta (which version each channel serves, or the version of a mandatory module). Field facts
// follow upstream lifecycle-manager's v1beta2 API and modulectl's output; manifests/crds/moduletemplates.yaml and
// modulereleasemetas.yaml are generated from this file (`npm run generate`). The agent copies both kinds' specs into
// SKRs as parsed, so these schemas keep every field the CRDs have.
import * as z from 'zod/mini';
import { KINDS } from '../constants.js';
import { labelSelectorSchema, moduleStateSchema, optional, requiredString, typedObject } from './common.js';
import { crd, customResource, embeddedResource } from './crd.js';

/** Upstream's patterns of a module name and a module version (both may be empty in old channel-based templates). */
const MODULE_NAME = { pattern: '^([a-z]{3,}(-[a-z]{3,})*)?$', maxLength: 64 };
const MODULE_VERSION = {
  pattern: '^((0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)(-[a-zA-Z-][0-9a-zA-Z-]*)?)?$',
  maxLength: 32,
};

/** The default Module CR of a module version; its apiVersion and kind name the Module CR type. */
export const moduleDataSchema = z
  .looseObject({
    apiVersion: requiredString(),
    kind: requiredString(),
    metadata: optional(z.looseObject({ name: optional(z.string()), namespace: optional(z.string()) })),
    spec: optional(z.record(z.string(), z.unknown())),
  })
  .register(crd, embeddedResource('The default Module CR; absent for a module without one.'));
export type ModuleData = z.infer<typeof moduleDataSchema>;

const groupVersionKindSchema = z.object({ group: z.string(), version: z.string(), kind: z.string() });

/** A list of named entries, one per name (server-side apply merges them by name). */
const BY_NAME = { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['name'] };

export const moduleTemplateSpecSchema = z.object({
  /** Upstream made these optional (empty in old channel-based templates); resolution needs both. */
  moduleName: optional(
    z.string().register(crd, {
      ...MODULE_NAME,
      description: 'The module; empty only in old channel-based templates.',
    }),
  ),
  version: optional(
    z.string().register(crd, {
      ...MODULE_VERSION,
      description: 'The module version (semantic version); empty only in old channel-based templates.',
    }),
  ),
  /** Deprecated upstream: the channel of a channel-based template. */
  channel: optional(
    z.string().register(crd, {
      pattern: '^$|^[a-z]{3,}$',
      maxLength: 32,
      description: 'Deprecated upstream; the channel of an old channel-based template.',
    }),
  ),
  /** A mandatory module's template, installed through its ModuleReleaseMeta only. */
  mandatory: optional(
    z
      .boolean()
      .register(crd, { description: 'The template of a mandatory module, installed in every Kyma.' }),
  ),
  /** Absent: the module has no default Module CR and is installed without one. */
  data: optional(moduleDataSchema),
  /** The OCM component descriptor; kept opaque (this project installs nothing from OCM). */
  descriptor: optional(
    z.record(z.string(), z.unknown()).register(crd, {
      description: "The module's OCM component descriptor; kept, not interpreted.",
    }),
  ),
  /** Not used by the agent; '' (upstream's enum has it) is read too, so such a template still resolves. */
  customStateCheck: optional(
    z
      .array(
        z.object({
          jsonPath: z.string(),
          value: z.string(),
          mappedState: z.union([moduleStateSchema, z.literal('')]),
        }),
      )
      .register(crd, { description: 'Deprecated upstream.' }),
  ),
  resources: optional(
    z
      .array(z.object({ name: z.string(), link: z.string().register(crd, { format: 'uri' }) }))
      .register(crd, { ...BY_NAME, description: 'Further resources of the module, e.g. its raw manifest.' }),
  ),
  info: optional(
    z
      .object({
        repository: optional(z.string()),
        documentation: optional(z.string()),
        icons: optional(z.array(z.object({ name: z.string(), link: z.string() })).register(crd, BY_NAME)),
      })
      // The API server requires both, as upstream's does; the agent reads neither.
      .register(crd, { required: ['documentation', 'repository'] }),
  ),
  associatedResources: optional(
    z
      .array(groupVersionKindSchema)
      .register(crd, { description: 'Kinds that belong to the module (informational).' }),
  ),
  manager: optional(
    z.extend(groupVersionKindSchema, { name: z.string(), namespace: optional(z.string()) }).register(crd, {
      description: "The resource whose readiness stands for the module's (usually its manager Deployment).",
    }),
  ),
  requiresDowntime: optional(
    z
      .boolean()
      .register(crd, { description: 'Upgrading to this version needs downtime (maintenance windows).' }),
  ),
});
export type ModuleTemplateSpec = z.infer<typeof moduleTemplateSpecSchema>;

export const moduleTemplateSchema = typedObject(moduleTemplateSpecSchema, z.unknown());
export type ModuleTemplate = z.infer<typeof moduleTemplateSchema>;

export const channelVersionSchema = z.object({
  channel: z
    .string()
    .check(z.minLength(1))
    .register(crd, { pattern: '^[a-z]+$', minLength: 3, maxLength: 32 }),
  version: z.string().register(crd, MODULE_VERSION),
});
export type ChannelVersion = z.infer<typeof channelVersionSchema>;

export const moduleReleaseMetaSpecSchema = z
  .object({
    moduleName: requiredString().register(crd, MODULE_NAME),
    ocmComponentName: optional(
      z.string().register(crd, {
        pattern:
          '^[a-z][-a-z0-9]*([.][a-z][-a-z0-9]*)*[.][a-z]{2,}(/[a-z][-a-z0-9_]*([.][a-z][-a-z0-9_]*)*)+$',
        maxLength: 255,
        description: 'The OCM component of the module, e.g. kyma-project.io/module/keda.',
      }),
    ),
    /** Exactly one of channels and mandatory (the CRD's rule below). */
    channels: optional(
      z
        .array(channelVersionSchema)
        .register(crd, { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['channel'] }),
    ),
    mandatory: optional(
      z
        .object({
          version: z.string().check(z.minLength(1)).register(crd, {
            minLength: 1,
            pattern:
              '^(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)(?:-((?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\\.(?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\\+([0-9a-zA-Z-]+(?:\\.[0-9a-zA-Z-]+)*))?$',
          }),
        })
        .register(crd, { description: 'A mandatory module, installed in every Kyma at this version.' }),
    ),
    /** Deprecated upstream: only Kymas labelled beta / internal may use the module. */
    beta: optional(
      z.boolean().register(crd, {
        default: false,
        description:
          'Deprecated upstream; only Kymas labelled operator.kyma-project.io/beta=true may use the module.',
      }),
    ),
    internal: optional(
      z.boolean().register(crd, {
        default: false,
        description:
          'Deprecated upstream; only Kymas labelled operator.kyma-project.io/internal=true may use the module.',
      }),
    ),
    /** A restricted module: only Kymas whose labels this selects may use it. */
    kymaSelector: optional(
      // A fresh schema: the description belongs to this field, not to every label selector.
      z.extend(labelSelectorSchema, {}).register(crd, {
        'x-kubernetes-map-type': 'atomic',
        description: 'A restricted module; only Kymas whose labels this selects may use it.',
      }),
    ),
  })
  .register(crd, {
    'x-kubernetes-validations': [
      {
        rule: '(has(self.mandatory) && !has(self.channels)) || (!has(self.mandatory) && has(self.channels))',
        message: "exactly one of 'mandatory' or 'channels' must be specified",
      },
    ],
  });
export type ModuleReleaseMetaSpec = z.infer<typeof moduleReleaseMetaSpecSchema>;

export const moduleReleaseMetaSchema = typedObject(moduleReleaseMetaSpecSchema, z.unknown());
export type ModuleReleaseMeta = z.infer<typeof moduleReleaseMetaSchema>;

export const moduleTemplateCrd = customResource(KINDS.moduleTemplate, {
  source: 'packages/api/src/schemas/catalog.ts',
  comment: `ModuleTemplate, operator.kyma-project.io/v1beta2: one version of a module, shaped as modulectl writes it.
Accepts every field upstream lifecycle-manager's v1beta2 accepts, with its types and patterns; the
descriptor, which upstream requires, stays optional here (docs/decisions/009).`,
  description: 'One version of a module; spec.data is its default Module CR.',
  shortNames: ['mt'],
  spec: moduleTemplateSpecSchema,
});

export const moduleReleaseMetaCrd = customResource(KINDS.moduleReleaseMeta, {
  source: 'packages/api/src/schemas/catalog.ts',
  comment: `ModuleReleaseMeta, operator.kyma-project.io/v1beta2: which version each release channel of a module serves,
or the version of a mandatory module. Accepts every field upstream lifecycle-manager's v1beta2 accepts,
with its types, patterns, defaults and the rule that exactly one of channels and mandatory is given.`,
  description: 'Which version of a module each release channel serves.',
  shortNames: ['mrm'],
  spec: moduleReleaseMetaSpecSchema,
});
