// The module catalog (operator.kyma-project.io/v1beta2): ModuleTemplate (one version of a module) and
// ModuleReleaseMeta (which version each channel serves, or the version of a mandatory module). Field facts
// follow upstream lifecycle-manager's v1beta2 API and modulectl's output; manifests/crds/ holds the CRDs.
import { z } from 'zod';
import { labelSelectorSchema, moduleStateSchema, optional, typedObject } from './common.js';

/** The default Module CR of a module version; its apiVersion and kind name the Module CR type. */
export const moduleDataSchema = z.looseObject({
  apiVersion: z.string().min(1, 'is required'),
  kind: z.string().min(1, 'is required'),
  metadata: optional(z.object({ name: optional(z.string()), namespace: optional(z.string()) })),
  spec: optional(z.record(z.string(), z.unknown())),
});
export type ModuleData = z.infer<typeof moduleDataSchema>;

const groupVersionKindSchema = z.object({ group: z.string(), version: z.string(), kind: z.string() });

export const moduleTemplateSpecSchema = z.object({
  /** Upstream made these optional (empty in old channel-based templates); resolution needs both. */
  moduleName: optional(z.string()),
  version: optional(z.string()),
  /** Deprecated upstream: the channel of a channel-based template. */
  channel: optional(z.string()),
  /** A mandatory module's template, installed through its ModuleReleaseMeta only. */
  mandatory: optional(z.boolean()),
  /** Absent: the module has no default Module CR and is installed without one. */
  data: optional(moduleDataSchema),
  /** The OCM component descriptor; kept opaque (this project installs nothing from OCM). */
  descriptor: optional(z.record(z.string(), z.unknown())),
  customStateCheck: optional(
    z.array(z.object({ jsonPath: z.string(), value: z.string(), mappedState: moduleStateSchema })),
  ),
  resources: optional(z.array(z.object({ name: z.string(), link: z.string() }))),
  info: optional(
    z.object({
      repository: optional(z.string()),
      documentation: optional(z.string()),
      icons: optional(z.array(z.object({ name: z.string(), link: z.string() }))),
    }),
  ),
  associatedResources: optional(z.array(groupVersionKindSchema)),
  manager: optional(groupVersionKindSchema.extend({ name: z.string(), namespace: optional(z.string()) })),
  requiresDowntime: optional(z.boolean()),
});
export type ModuleTemplateSpec = z.infer<typeof moduleTemplateSpecSchema>;

export const moduleTemplateSchema = typedObject(moduleTemplateSpecSchema, z.unknown());
export type ModuleTemplate = z.infer<typeof moduleTemplateSchema>;

export const channelVersionSchema = z.object({ channel: z.string().min(1), version: z.string() });
export type ChannelVersion = z.infer<typeof channelVersionSchema>;

export const moduleReleaseMetaSpecSchema = z.object({
  moduleName: z.string().min(1, 'is required'),
  ocmComponentName: optional(z.string()),
  /** Exactly one of channels and mandatory (the CRD enforces it). */
  channels: optional(z.array(channelVersionSchema)),
  mandatory: optional(z.object({ version: z.string().min(1) })),
  /** Deprecated upstream: only Kymas labelled beta / internal may use the module. */
  beta: optional(z.boolean()),
  internal: optional(z.boolean()),
  /** A restricted module: only Kymas whose labels this selects may use it. */
  kymaSelector: optional(labelSelectorSchema),
});
export type ModuleReleaseMetaSpec = z.infer<typeof moduleReleaseMetaSpecSchema>;

export const moduleReleaseMetaSchema = typedObject(moduleReleaseMetaSpecSchema, z.unknown());
export type ModuleReleaseMeta = z.infer<typeof moduleReleaseMetaSchema>;
