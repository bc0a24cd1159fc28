// Modules from one OCI registry, as the agent reads them: a component version's descriptor becomes what a
// Manifest's spec carries (install source, localized images), and an install source becomes parsed objects.
// Everything is read through one content-addressed cache; component versions are taken as immutable (as upstream
// does), so a resolved version is kept too, and a pass over unchanged modules sends no request.
import type { Registry } from '@skr-watcher/telemetry';
import { Gauge, registeredMetric } from '@skr-watcher/telemetry';
import { firstRegularFile, tarFiles, uncompressed } from './archive.js';
import { ContentCache, type CacheStats } from './blob-cache.js';
import {
  classifyResources,
  decodeDescriptor,
  DESCRIPTOR_MAX_BYTES,
  mappedComponentName,
  type ComponentDescriptor,
  type LocalBlob,
} from './descriptor.js';
import { createManifestParser, type ParseLimits } from './bounded-parse.js';
import { isModuleSourceError, ModuleSourceError } from './errors.js';
import {
  componentConfigSchema,
  componentRepository,
  COMPONENT_DESCRIPTORS,
  DESCRIPTOR_FILE,
  ociManifestSchema,
  RAW_MANIFEST,
  versionTag,
  type OciManifest,
} from './layout.js';
import { DEFAULT_OBJECT_BOUNDS, type ManifestObject, type ObjectBounds } from './manifest-objects.js';
import { parseRegistryHost, type RegistryConfig } from './registry-config.js';
import { isDigest, RegistryClient } from './registry-client.js';

/** `spec.install.source` of a Manifest: where its raw manifest is, as upstream writes it. */
export interface InstallSource {
  /** The configured registry reference (host/subpath, no scheme, no `/component-descriptors`). */
  repo: string;
  /** The component name (urlPath mapping), or its sha256 in hex (sha256-digest mapping). */
  name: string;
  /** The layer digest. */
  ref: string;
  type: 'oci-dir' | 'oci-ref';
}

export interface ResolvedModule {
  componentName: string;
  /** The component version (what a Manifest's `spec.version` carries). */
  version: string;
  install: { name: typeof RAW_MANIFEST; source: InstallSource };
  localizedImages: string[];
  /** Every local blob of the descriptor (`raw-manifest`, `default-cr`, …). */
  layers: LocalBlob[];
  /** The digest of the component version's OCI manifest. */
  manifestDigest: string;
  descriptor: ComponentDescriptor;
}

export interface ModuleSourceBounds {
  /** Bytes of one blob as stored, and of its content after decompression (default 16 MiB). */
  maxBlobBytes: number;
  /** Bytes the cache keeps (default 256 MiB). */
  maxCacheBytes: number;
  /** Entries of one tar archive (default 1,000). */
  maxTarEntries: number;
  objects: ObjectBounds;
}

export const DEFAULT_BOUNDS: ModuleSourceBounds = {
  maxBlobBytes: 16 * 1024 * 1024,
  maxCacheBytes: 256 * 1024 * 1024,
  maxTarEntries: 1_000,
  objects: DEFAULT_OBJECT_BOUNDS,
};

export interface ModuleSourceOptions extends RegistryConfig {
  bounds?: Partial<ModuleSourceBounds>;
  /** Hosts a registry redirect may lead to besides the registry's (RegistryClientOptions.redirectHosts). */
  redirectHosts?: readonly string[];
  /** Heap, time and concurrency of the raw manifests' parse threads (bounded-parse.ts). */
  parseLimits?: Partial<ParseLimits>;
  /** Bound of each registry request (default 30 s). */
  timeoutMs?: number;
  /** PEM of extra CAs for an HTTPS registry with a private CA. */
  ca?: string;
  /** Where the registry request counter and the cache gauge are registered. */
  metrics?: Registry;
}

export interface ModuleSource {
  /** The registry reference (`spec.install.source.repo` of the Manifests this source writes). */
  readonly repo: string;
  /** The component version `ocmComponentName:version`, read from `component-descriptors/`. */
  resolve(ocmComponentName: string, version: string): Promise<ResolvedModule>;
  /** The objects of a Manifest's install source: a fresh copy each call (callers may change them). */
  rawManifestObjects(source: InstallSource): Promise<ManifestObject[]>;
  /** The raw manifest's YAML text. */
  rawManifestText(source: InstallSource): Promise<string>;
  /** A blob of a component version by digest, verified (e.g. `default-cr`). */
  blob(componentName: string, digest: string): Promise<Buffer>;
  cacheStats(): CacheStats;
  /** Registry requests sent so far, by operation. */
  requests(): Readonly<Record<string, number>>;
  close(): Promise<void>;
}

/** Objects copied per slice before yielding. */
const COPY_SLICE = 50;

/** Raw manifests whose parse was refused, remembered at most (by digest); the oldest is forgotten first. */
const MAX_REFUSED_CONTENT = 1_000;

function installSourceKey(source: InstallSource): string {
  return `${source.ref}#${source.type}`;
}

/** Creates the module source of one registry; one per process, shared by every Kyma. */
export function createModuleSource(options: ModuleSourceOptions): ModuleSource {
  const bounds: ModuleSourceBounds = {
    ...DEFAULT_BOUNDS,
    ...options.bounds,
    objects: { ...DEFAULT_BOUNDS.objects, ...options.bounds?.objects },
  };
  const { location } = options;
  const client = new RegistryClient({
    host: location.host,
    insecure: location.insecure,
    ...(options.credentials ? { credentials: options.credentials } : {}),
    ...(options.ca ? { ca: options.ca } : {}),
    ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}),
    ...(options.metrics ? { metrics: options.metrics } : {}),
    ...(options.redirectHosts ? { redirectHosts: options.redirectHosts } : {}),
  });
  const cache = new ContentCache(bounds.maxCacheBytes);
  const parse = createManifestParser(options.parseLimits);
  // Content is addressed by digest, so what its parse refused it refuses again: answered without a pull or a parse
  // until the Manifest names another digest.
  const refused = new Map<string, ModuleSourceError>();
  if (options.metrics) {
    const metrics = options.metrics;
    registeredMetric(
      metrics,
      'skr_agent_oci_cache_bytes',
      () =>
        new Gauge({
          name: 'skr_agent_oci_cache_bytes',
          help: 'Bytes held by the module blob cache (verified blobs and what was parsed from them).',
          registers: [metrics],
          collect() {
            this.set(cache.stats().bytes);
          },
        }),
    );
  }

  /** A blob of `repository`, verified, through the cache. */
  const blob = (repository: string, digest: string, size?: number) =>
    cache.get(
      digest,
      () =>
        client.blob(repository, digest, {
          maxBytes: bounds.maxBlobBytes,
          ...(size === undefined ? {} : { size }),
        }),
      (bytes) => bytes.length,
    );

  async function readDescriptor(componentName: string, version: string): Promise<ResolvedModule> {
    const repository = componentRepository(location.basePath, componentName);
    const what = `component ${componentName}:${version} at ${location.reference}`;
    const fetched = await client.manifest(repository, versionTag(version));
    let manifest: OciManifest;
    try {
      manifest = ociManifestSchema.parse(JSON.parse(fetched.bytes.toString('utf8')));
    } catch (cause) {
      throw new ModuleSourceError(
        'MalformedDescriptor',
        `${what}: its OCI manifest is not an image manifest`,
        {
          cause,
        },
      );
    }
    const configBytes = await blob(repository, manifest.config.digest, manifest.config.size);
    const config = componentConfigSchema.safeParse(
      (() => {
        try {
          return JSON.parse(configBytes.toString('utf8')) as unknown;
        } catch {
          return undefined;
        }
      })(),
    );
    if (!config.success) {
      throw new ModuleSourceError(
        'MalformedDescriptor',
        `${what}: its config (${manifest.config.mediaType}) has no componentDescriptorLayer; is this an OCM component version?`,
      );
    }
    const layer = config.data.componentDescriptorLayer;
    const layerBytes = await blob(repository, layer.digest, layer.size);
    let text: string;
    if (layer.mediaType.endsWith('+tar') || layer.mediaType.endsWith('.tar')) {
      const files = await tarFiles(
        uncompressed(layerBytes, bounds.maxBlobBytes, `${what}: descriptor layer`),
        { maxEntries: bounds.maxTarEntries, maxFileBytes: DESCRIPTOR_MAX_BYTES },
        `${what}: descriptor layer`,
      );
      const entry = files.find((file) => file.name.replace(/^\.\//, '') === DESCRIPTOR_FILE);
      if (!entry) {
        throw new ModuleSourceError(
          'MalformedDescriptor',
          `${what}: the descriptor layer has no ${DESCRIPTOR_FILE}`,
        );
      }
      text = entry.data.toString('utf8');
    } else {
      if (layerBytes.length > DESCRIPTOR_MAX_BYTES) {
        throw new ModuleSourceError(
          'TooLarge',
          `${what}: the descriptor is more than ${DESCRIPTOR_MAX_BYTES} bytes`,
        );
      }
      text = layerBytes.toString('utf8');
    }
    const descriptor = decodeDescriptor(text, `${what}: descriptor`);
    if (descriptor.name !== componentName) {
      throw new ModuleSourceError(
        'MalformedDescriptor',
        `${what}: the descriptor is of component ${descriptor.name}`,
      );
    }
    const { localBlobs, localizedImages } = classifyResources(descriptor, what);
    const raw = localBlobs.find((l) => l.name === RAW_MANIFEST);
    if (!raw) {
      throw new ModuleSourceError(
        'MalformedDescriptor',
        `${what}: no local blob resource named ${RAW_MANIFEST}`,
      );
    }
    if (!manifest.layers.some((l) => l.digest === raw.digest)) {
      throw new ModuleSourceError(
        'MalformedDescriptor',
        `${what}: ${RAW_MANIFEST} names layer ${raw.digest}, which the component version does not have`,
      );
    }
    return {
      componentName,
      version: descriptor.version,
      install: {
        name: RAW_MANIFEST,
        source: {
          repo: location.reference,
          name: mappedComponentName(descriptor),
          ref: raw.digest,
          type: raw.type,
        },
      },
      localizedImages,
      layers: localBlobs,
      manifestDigest: fetched.digest,
      descriptor,
    };
  }

  /** The repository of an install source's blob; a `/component-descriptors` suffix (pre-2025-10 Manifests) is dropped. */
  function sourceRepository(source: InstallSource): string {
    const repo = source.repo
      .replace(/^https?:\/\//, '')
      .replace(new RegExp(`/${COMPONENT_DESCRIPTORS}/?$`), '');
    const { host, basePath } = parseRegistryHost(repo);
    if (host !== location.host) {
      throw new ModuleSourceError(
        'Misconfigured',
        `install source repo ${source.repo} is not the configured registry ${location.reference}`,
      );
    }
    return componentRepository(basePath, source.name);
  }

  async function rawManifestText(source: InstallSource): Promise<string> {
    const what = `raw manifest ${source.ref} of ${source.name}`;
    if (!isDigest(source.ref)) {
      throw new ModuleSourceError('MalformedDescriptor', `${what}: ref is not a sha256 digest`);
    }
    const repository = sourceRepository(source);
    return cache.get(
      `${installSourceKey(source)}#text`,
      async () => {
        const bytes = uncompressed(await blob(repository, source.ref), bounds.maxBlobBytes, what);
        if (source.type !== 'oci-dir') return bytes.toString('utf8');
        const files = await tarFiles(
          bytes,
          { maxEntries: bounds.maxTarEntries, maxFileBytes: bounds.maxBlobBytes },
          what,
        );
        return firstRegularFile(files, what).data.toString('utf8');
      },
      (text) => text.length,
    );
  }

  return {
    repo: location.reference,
    async resolve(ocmComponentName, version) {
      return cache.get(
        `descriptor:${ocmComponentName}:${version}`,
        () => readDescriptor(ocmComponentName, version),
        (resolved) => 2 * JSON.stringify(resolved.descriptor).length,
      );
    },
    rawManifestText,
    async rawManifestObjects(source) {
      const key = installSourceKey(source);
      const known = refused.get(key);
      if (known) throw known;
      let objects;
      try {
        objects = await cache.get(
          `${key}#objects`,
          async () => {
            const text = await rawManifestText(source);
            return {
              text: text.length,
              objects: await parse(text, `raw manifest ${source.ref} of ${source.name}`, bounds.objects),
            };
          },
          // Parsed objects take a few times their YAML's size.
          (parsed) => 3 * parsed.text,
        );
      } catch (error) {
        if (
          isModuleSourceError(error) &&
          (error.reason === 'TooLarge' || error.reason === 'MalformedManifest')
        ) {
          refused.set(key, error);
          if (refused.size > MAX_REFUSED_CONTENT) refused.delete(refused.keys().next().value as string);
        }
        throw error;
      }
      // A fresh copy for the caller, made in slices: a module of thousands of objects copies in many short turns.
      const copies: ManifestObject[] = [];
      for (const [index, object] of objects.objects.entries()) {
        if (index > 0 && index % COPY_SLICE === 0) await new Promise((resolve) => setImmediate(resolve));
        copies.push(structuredClone(object));
      }
      return copies;
    },
    async blob(componentName, digest) {
      return blob(componentRepository(location.basePath, componentName), digest);
    },
    cacheStats: () => cache.stats(),
    requests: () => ({ ...client.sent }),
    close: () => client.close(),
  };
}

export { isModuleSourceError };
