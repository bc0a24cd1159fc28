export { ModuleSourceError, isModuleSourceError, MODULE_SOURCE_REASONS } from './errors.js';
export type { ModuleSourceReason } from './errors.js';
export { registryConfigFromFlags, parseRegistryHost, parseDockerConfigJson } from './registry-config.js';
export type {
  RegistryConfig,
  RegistryCredentials,
  RegistryFlags,
  RegistryLocation,
} from './registry-config.js';
export { RegistryClient, sha256Digest, isDigest, MANIFEST_MEDIA_TYPES } from './registry-client.js';
export { parseChallenge } from './registry-auth.js';
export type { RegistryClientOptions, Descriptor, FetchedManifest } from './registry-client.js';
export type { RegistryOperation } from './registry-exchange.js';
export { createModuleSource, DEFAULT_BOUNDS } from './module-source.js';
export type {
  InstallSource,
  ModuleSource,
  ModuleSourceBounds,
  ModuleSourceOptions,
  ResolvedModule,
} from './module-source.js';
export { decodeDescriptor, classifyResources, TAR_MEDIA_TYPE, DESCRIPTOR_MAX_BYTES } from './descriptor.js';
export type { ComponentDescriptor, LocalBlob, ClassifiedResources } from './descriptor.js';
export {
  parseManifestObjects,
  DEFAULT_OBJECT_BOUNDS,
  documentMarkers,
  documentOverTokens,
} from './manifest-objects.js';
export { createManifestParser, DEFAULT_PARSE_LIMITS, parsesInline } from './bounded-parse.js';
export type { ManifestParser, ParseLimits } from './bounded-parse.js';
export type { ManifestObject, ObjectBounds } from './manifest-objects.js';
export { tarFiles, firstRegularFile, uncompressed } from './archive.js';
export { ContentCache } from './blob-cache.js';
export type { CacheStats } from './blob-cache.js';
export * from './layout.js';
export {
  publishComponentVersion,
  moduleComponent,
  directoryTreeResource,
  tarOf,
  moduleTemplateFor,
  moduleReleaseMetaFor,
  publishModule,
} from './publish.js';
export type {
  ComponentVersionSpec,
  LocalResource,
  ImageResource,
  PublishedComponent,
  ModuleVersion,
  CatalogOptions,
  CatalogObject,
  PublishTarget,
  PublishedModule,
} from './publish.js';
