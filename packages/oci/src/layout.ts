// How OCM stores one component version in an OCI registry (genericocireg, urlPath mapping), as modulectl and
// `ocm transfer` write it: an OCI image manifest tagged with the version under
// `<base>/component-descriptors/<component>`, whose config names the layer holding `component-descriptor.yaml`.
import * as z from 'zod/mini';
import './zod-messages.js';

export const COMPONENT_DESCRIPTORS = 'component-descriptors';
export const OCI_MANIFEST_MEDIA_TYPE = 'application/vnd.oci.image.manifest.v1+json';
export const OCM_CONFIG_MEDIA_TYPE = 'application/vnd.ocm.software.component.config.v1+json';
/** The config mediaType of component versions written by OCM's predecessor (Gardener's component-cli). */
export const LEGACY_CONFIG_MEDIA_TYPE = 'application/vnd.gardener.cloud.cnudie.component.config.v1+json';
export const DESCRIPTOR_LAYER_MEDIA_TYPE = 'application/vnd.ocm.software.component-descriptor.v2+yaml+tar';
/** The entry of the descriptor layer's tar that holds the descriptor. */
export const DESCRIPTOR_FILE = 'component-descriptor.yaml';

/** The resource names upstream reads from a module's descriptor. */
export const RAW_MANIFEST = 'raw-manifest';
export const DEFAULT_CR = 'default-cr';

/** `<base>/component-descriptors/<component>`: the repository of a component's versions. */
export function componentRepository(basePath: string, componentName: string): string {
  return [basePath, COMPONENT_DESCRIPTORS, componentName].filter((part) => part !== '').join('/');
}

/**
 * The tag of a component version. Upstream lifecycle-manager uses the version verbatim, OCM maps `+` (build
 * metadata, not allowed in a tag) to `.build-`; both agree on every version a registry can store as a tag.
 */
export function versionTag(version: string): string {
  return version.replaceAll('+', '.build-');
}

export const descriptorSchema = z.object({
  mediaType: z.string(),
  digest: z.string().check(z.regex(/^sha256:[a-f0-9]{64}$/, 'is not a sha256 digest')),
  size: z.int().check(z.nonnegative()),
});

export const ociManifestSchema = z.object({
  schemaVersion: z.literal(2),
  mediaType: z.optional(z.string()),
  config: descriptorSchema,
  layers: z.array(descriptorSchema),
});
export type OciManifest = z.infer<typeof ociManifestSchema>;

export const componentConfigSchema = z.object({
  componentDescriptorLayer: descriptorSchema,
});
