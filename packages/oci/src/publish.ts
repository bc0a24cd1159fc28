// Writes one module version into a registry in the layout modulectl produces (a component version under
// component-descriptors/, descriptor layer first, one localBlob layer per resource) and describes the
// ModuleTemplate and ModuleReleaseMeta that offer it.
import { pack } from 'tar-stream';
import { parse, stringify } from 'yaml';
import {
  componentRepository,
  DEFAULT_CR,
  DESCRIPTOR_FILE,
  DESCRIPTOR_LAYER_MEDIA_TYPE,
  OCI_MANIFEST_MEDIA_TYPE,
  OCM_CONFIG_MEDIA_TYPE,
  RAW_MANIFEST,
  versionTag,
} from './layout.js';
import { TAR_MEDIA_TYPE } from './descriptor.js';
import { RegistryClient, type Descriptor } from './registry-client.js';
import type { RegistryCredentials, RegistryLocation } from './registry-config.js';

/** A tar archive of files with fixed metadata (mtime 0, mode 0644), so the same files give the same digest. */
export async function tarOf(files: { name: string; data: Buffer }[]): Promise<Buffer> {
  const archive = pack();
  const chunks: Buffer[] = [];
  archive.on('data', (chunk: unknown) => chunks.push(chunk as Buffer));
  const ended = new Promise<void>((resolve, reject) => {
    archive.on('end', resolve);
    archive.on('error', reject);
  });
  for (const file of files) {
    archive.entry({ name: file.name, size: file.data.length, mode: 0o644, mtime: new Date(0) }, file.data);
  }
  archive.finalize();
  await ended;
  return Buffer.concat(chunks);
}

export interface LocalResource {
  name: string;
  /** OCM resource type: `directoryTree` for modulectl's raw-manifest and default-cr. */
  type: string;
  mediaType: string;
  data: Buffer;
}

export interface ImageResource {
  name: string;
  version: string;
  /** Feeds `localizedImages`. */
  imageReference: string;
}

export interface ComponentVersionSpec {
  componentName: string;
  version: string;
  provider?: string;
  labels?: { name: string; value: string }[];
  resources: LocalResource[];
  images?: ImageResource[];
}

export interface PublishedComponent {
  repository: string;
  tag: string;
  manifestDigest: string;
  /** The descriptor as stored (v2 YAML). */
  descriptorYaml: string;
  layers: (Descriptor & { name: string })[];
}

/** The resource of a file as modulectl stores it: a tar holding the file under its base name. */
export async function directoryTreeResource(
  name: string,
  fileName: string,
  data: Buffer,
): Promise<LocalResource> {
  return {
    name,
    type: 'directoryTree',
    mediaType: TAR_MEDIA_TYPE,
    data: await tarOf([{ name: fileName, data }]),
  };
}

/** Pushes the resources, the descriptor layer, the config and the manifest tagged with the version. */
export async function publishComponentVersion(
  client: RegistryClient,
  location: RegistryLocation,
  spec: ComponentVersionSpec,
): Promise<PublishedComponent> {
  const repository = componentRepository(location.basePath, spec.componentName);
  const layers: (Descriptor & { name: string })[] = [];
  for (const resource of spec.resources) {
    layers.push({
      name: resource.name,
      ...(await client.pushBlob(repository, resource.data, resource.mediaType)),
    });
  }
  const descriptor = {
    meta: { schemaVersion: 'v2' },
    component: {
      name: spec.componentName,
      version: spec.version,
      provider: spec.provider ?? 'kyma-project.io',
      labels: (spec.labels ?? []).map((label) => ({ ...label, version: 'v1' })),
      repositoryContexts: [
        {
          type: 'OCIRegistry',
          baseUrl: location.host,
          ...(location.basePath ? { subPath: location.basePath } : {}),
          componentNameMapping: 'urlPath',
        },
      ],
      componentReferences: [],
      sources: [],
      resources: [
        ...(spec.images ?? []).map((image) => ({
          name: image.name,
          type: 'ociArtifact',
          relation: 'external',
          version: image.version,
          access: { type: 'ociArtifact', imageReference: image.imageReference },
        })),
        ...spec.resources.map((resource, i) => ({
          name: resource.name,
          type: resource.type,
          relation: 'local',
          version: spec.version,
          access: {
            type: 'localBlob',
            localReference: layers[i]!.digest,
            mediaType: resource.mediaType,
            referenceName: resource.name,
          },
          digest: {
            hashAlgorithm: 'SHA-256',
            normalisationAlgorithm: 'genericBlobDigest/v1',
            value: layers[i]!.digest.slice('sha256:'.length),
          },
        })),
      ],
    },
  };
  const descriptorYaml = stringify(descriptor);
  const descriptorTar = await tarOf([{ name: DESCRIPTOR_FILE, data: Buffer.from(descriptorYaml) }]);
  const descriptorLayer = await client.pushBlob(repository, descriptorTar, DESCRIPTOR_LAYER_MEDIA_TYPE);
  const configBytes = Buffer.from(JSON.stringify({ componentDescriptorLayer: descriptorLayer }));
  const config = await client.pushBlob(repository, configBytes, OCM_CONFIG_MEDIA_TYPE);
  const manifest = {
    schemaVersion: 2,
    mediaType: OCI_MANIFEST_MEDIA_TYPE,
    config,
    layers: [descriptorLayer, ...layers.map(({ mediaType, digest, size }) => ({ mediaType, digest, size }))],
  };
  const tag = versionTag(spec.version);
  const pushed = await client.pushManifest(
    repository,
    tag,
    Buffer.from(JSON.stringify(manifest)),
    OCI_MANIFEST_MEDIA_TYPE,
  );
  return { repository, tag, manifestDigest: pushed.digest, descriptorYaml, layers };
}

export interface ModuleVersion {
  moduleName: string;
  version: string;
  /** Channels the ModuleReleaseMeta serves this version in (default: regular). */
  channels?: string[];
  ocmComponentName: string;
  /** The raw manifest's YAML (all objects of the module). */
  rawManifest: string;
  /** File name inside the raw-manifest tar (modulectl keeps the manifest file's base name). */
  rawManifestFileName?: string;
  /** The default CR (YAML of one object), if the module has one. */
  defaultCr?: string;
  images?: ImageResource[];
  mandatory?: boolean;
  requiresDowntime?: boolean;
}

/** The component version of a module as modulectl builds it: raw-manifest and default-cr as directoryTree tars. */
export async function moduleComponent(module: ModuleVersion): Promise<ComponentVersionSpec> {
  const resources = [
    await directoryTreeResource(
      RAW_MANIFEST,
      module.rawManifestFileName ?? `${module.moduleName}.yaml`,
      Buffer.from(module.rawManifest),
    ),
  ];
  if (module.defaultCr !== undefined) {
    resources.push(await directoryTreeResource(DEFAULT_CR, 'default-cr.yaml', Buffer.from(module.defaultCr)));
  }
  return {
    componentName: module.ocmComponentName,
    version: module.version,
    labels: [
      { name: 'operator.kyma-project.io/requiresDowntime', value: String(module.requiresDowntime ?? false) },
    ],
    resources,
    ...(module.images ? { images: module.images } : {}),
  };
}

export interface CatalogOptions {
  /** Namespace of the catalog objects (default kcp-system). */
  namespace?: string;
  repository?: string;
  documentation?: string;
  manager?: { group: string; version: string; kind: string; name: string; namespace?: string };
}

export type CatalogObject = {
  apiVersion: 'operator.kyma-project.io/v1beta2';
  kind: 'ModuleTemplate' | 'ModuleReleaseMeta';
  metadata: {
    name: string;
    namespace: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec: Record<string, unknown>;
};

/**
 * The ModuleTemplate `<module>-<version>` modulectl writes for a version: the default CR as `spec.data`, the
 * descriptor left empty (lifecycle-manager reads it from the registry since 2025-10).
 */
export function moduleTemplateFor(module: ModuleVersion, options: CatalogOptions = {}): CatalogObject {
  const data = module.defaultCr === undefined ? undefined : (parse(module.defaultCr) as unknown);
  return {
    apiVersion: 'operator.kyma-project.io/v1beta2',
    kind: 'ModuleTemplate',
    metadata: {
      name: `${module.moduleName}-${module.version}`,
      namespace: options.namespace ?? 'kcp-system',
      labels: {
        'operator.kyma-project.io/module-name': module.moduleName,
        ...(module.mandatory ? { 'operator.kyma-project.io/mandatory-module': 'true' } : {}),
      },
      annotations: { 'operator.kyma-project.io/is-cluster-scoped': 'false' },
    },
    spec: {
      moduleName: module.moduleName,
      version: module.version,
      mandatory: module.mandatory ?? false,
      requiresDowntime: module.requiresDowntime ?? false,
      info: {
        repository: options.repository ?? '',
        documentation: options.documentation ?? '',
      },
      ...(data === undefined || data === null ? {} : { data }),
      ...(options.manager ? { manager: options.manager } : {}),
      descriptor: {},
    },
  };
}

/** The ModuleReleaseMeta `<module>` that serves the version on its channels (or as a mandatory module). */
export function moduleReleaseMetaFor(module: ModuleVersion, options: CatalogOptions = {}): CatalogObject {
  return {
    apiVersion: 'operator.kyma-project.io/v1beta2',
    kind: 'ModuleReleaseMeta',
    metadata: { name: module.moduleName, namespace: options.namespace ?? 'kcp-system' },
    spec: {
      moduleName: module.moduleName,
      ocmComponentName: module.ocmComponentName,
      ...(module.mandatory
        ? { mandatory: { version: module.version } }
        : {
            channels: (module.channels ?? ['regular']).map((channel) => ({
              channel,
              version: module.version,
            })),
          }),
    },
  };
}

export interface PublishTarget {
  location: RegistryLocation;
  credentials?: RegistryCredentials;
  /** PEM of extra CAs for an HTTPS registry with a private CA. */
  ca?: string;
}

export interface PublishedModule {
  component: PublishedComponent;
  moduleTemplate: CatalogObject;
  moduleReleaseMeta: CatalogObject;
}

/** Publishes a module version and returns it with the ModuleTemplate and ModuleReleaseMeta that offer it. */
export async function publishModule(
  target: PublishTarget,
  module: ModuleVersion,
  catalog: CatalogOptions = {},
): Promise<PublishedModule> {
  const client = new RegistryClient({
    host: target.location.host,
    insecure: target.location.insecure,
    ...(target.credentials ? { credentials: target.credentials } : {}),
    ...(target.ca ? { ca: target.ca } : {}),
  });
  try {
    const component = await publishComponentVersion(client, target.location, await moduleComponent(module));
    return {
      component,
      moduleTemplate: moduleTemplateFor(module, catalog),
      moduleReleaseMeta: moduleReleaseMetaFor(module, catalog),
    };
  } finally {
    await client.close();
  }
}
