// OCM component descriptors (schema v2 and ocm.software/v3alpha1) as modulectl and `ocm transfer` store them,
// reduced to what installing a module needs: which resources are local blobs (layers of the component version's
// OCI manifest) and which images the module runs (ociArtifact, for image localization).
import { createHash } from 'node:crypto';
import { parse } from 'yaml';
import * as z from 'zod/mini';
import './zod-messages.js';
import { ModuleSourceError } from './errors.js';

/** Access types of resources stored in the component version itself: they become layers. */
const LOCAL_BLOB_TYPES = new Set(['localBlob', 'localBlob/v1', 'localOciBlob', 'localOciBlob/v1']);
/** Access types of resources stored elsewhere: skipped (scanning, localization). */
const EXTERNAL_TYPES = new Set(['ociArtifact', 'ociArtifact/v1', 'ociRegistry', 'ociRegistry/v1']);
/** Only this type feeds `localizedImages` (upstream's rule). */
const LOCALIZED_IMAGE_TYPE = 'ociArtifact';
/** The mediaType that makes a local blob a tar (`oci-dir`); anything else is the YAML itself (`oci-ref`). */
export const TAR_MEDIA_TYPE = 'application/x-tar';

const accessSchema = z.looseObject({
  type: z.string().check(z.minLength(1)),
  localReference: z.optional(z.string()),
  mediaType: z.optional(z.string()),
  referenceName: z.optional(z.string()),
  imageReference: z.optional(z.string()),
});

const resourceSchema = z.looseObject({
  name: z.string().check(z.minLength(1)),
  type: z.optional(z.string()),
  version: z.optional(z.string()),
  relation: z.optional(z.string()),
  access: accessSchema,
});

const repositoryContextSchema = z.looseObject({
  type: z.optional(z.string()),
  baseUrl: z.optional(z.string()),
  subPath: z.optional(z.string()),
  componentNameMapping: z.optional(z.string()),
});

const v2Schema = z.object({
  meta: z.object({ schemaVersion: z.literal('v2') }),
  component: z.looseObject({
    name: z.string().check(z.minLength(1)),
    version: z.string().check(z.minLength(1)),
    repositoryContexts: z.nullish(z.array(repositoryContextSchema)),
    resources: z.nullish(z.array(resourceSchema)),
  }),
});

const v3Schema = z.object({
  apiVersion: z.literal('ocm.software/v3alpha1'),
  kind: z.literal('ComponentVersion'),
  metadata: z.looseObject({
    name: z.string().check(z.minLength(1)),
    version: z.string().check(z.minLength(1)),
  }),
  repositoryContexts: z.nullish(z.array(repositoryContextSchema)),
  spec: z.looseObject({ resources: z.nullish(z.array(resourceSchema)) }),
});

export type DescriptorResource = z.infer<typeof resourceSchema>;

export interface ComponentDescriptor {
  schema: 'v2' | 'v3alpha1';
  name: string;
  version: string;
  resources: DescriptorResource[];
  /** The effective (last) repository context's name mapping; `urlPath` when there is none. */
  componentNameMapping: string;
}

/** A resource stored as a layer of the component version. */
export interface LocalBlob {
  /** The resource name: `raw-manifest`, `default-cr`, … */
  name: string;
  /** The layer digest (`localReference`). */
  digest: string;
  mediaType: string;
  /** `oci-dir` iff the mediaType is exactly application/x-tar, else `oci-ref` (upstream's rule). */
  type: 'oci-dir' | 'oci-ref';
}

export interface ClassifiedResources {
  localBlobs: LocalBlob[];
  /** `access.imageReference` of every resource of access type exactly `ociArtifact`. */
  localizedImages: string[];
}

/** Bound of the `component-descriptor.yaml` entry (upstream's). */
export const DESCRIPTOR_MAX_BYTES = 100 * 1024;

/** Decodes a descriptor document (v2 or v3alpha1); aliases are refused outright (descriptors never need them). */
export function decodeDescriptor(text: string, what: string): ComponentDescriptor {
  let document: unknown;
  try {
    document = parse(text, { maxAliasCount: 0, uniqueKeys: true });
  } catch (cause) {
    throw new ModuleSourceError(
      'MalformedDescriptor',
      `${what} is not valid YAML: ${(cause as Error).message}`,
      {
        cause,
      },
    );
  }
  const mapping = (contexts: z.infer<typeof repositoryContextSchema>[] | null | undefined) => {
    const found = contexts?.at(-1)?.componentNameMapping ?? 'urlPath';
    if (found !== 'urlPath' && found !== 'sha256-digest') {
      throw new ModuleSourceError(
        'MalformedDescriptor',
        `${what}: componentNameMapping ${JSON.stringify(found)} is neither urlPath nor sha256-digest`,
      );
    }
    return found;
  };
  const v2 = v2Schema.safeParse(document);
  if (v2.success) {
    const c = v2.data.component;
    return {
      schema: 'v2',
      name: c.name,
      version: c.version,
      resources: c.resources ?? [],
      componentNameMapping: mapping(c.repositoryContexts),
    };
  }
  const v3 = v3Schema.safeParse(document);
  if (v3.success) {
    const d = v3.data;
    return {
      schema: 'v3alpha1',
      name: d.metadata.name,
      version: d.metadata.version,
      resources: d.spec.resources ?? [],
      componentNameMapping: mapping(d.repositoryContexts),
    };
  }
  const isV3 = typeof document === 'object' && document !== null && 'apiVersion' in document;
  const issue = (isV3 ? v3 : v2).error.issues[0];
  const where = issue?.path.length ? issue.path.join('.') : 'document';
  throw new ModuleSourceError(
    'MalformedDescriptor',
    `${what} is not an OCM component descriptor (v2 or v3alpha1): ${where}: ${issue?.message ?? 'invalid'}`,
  );
}

/**
 * Sorts the resources by access type. Any type other than local blobs, ociArtifact and ociRegistry fails the
 * whole module, as upstream does: a module with a resource nobody can read is not installed half.
 */
export function classifyResources(descriptor: ComponentDescriptor, what: string): ClassifiedResources {
  const localBlobs: LocalBlob[] = [];
  const localizedImages: string[] = [];
  for (const resource of descriptor.resources) {
    const { access } = resource;
    if (LOCAL_BLOB_TYPES.has(access.type)) {
      const digest = access.localReference ?? '';
      if (digest.includes(',')) {
        throw new ModuleSourceError(
          'MalformedDescriptor',
          `${what}: resource ${resource.name} is a chunked local blob (${digest.split(',').length} parts); not supported`,
        );
      }
      if (!/^sha256:[a-f0-9]{64}$/.test(digest)) {
        throw new ModuleSourceError(
          'MalformedDescriptor',
          `${what}: resource ${resource.name} has localReference ${JSON.stringify(digest)}, not a sha256 digest`,
        );
      }
      const mediaType = access.mediaType ?? '';
      localBlobs.push({
        name: resource.name,
        digest,
        mediaType,
        type: mediaType === TAR_MEDIA_TYPE ? 'oci-dir' : 'oci-ref',
      });
    } else if (EXTERNAL_TYPES.has(access.type)) {
      if (access.type === LOCALIZED_IMAGE_TYPE && access.imageReference)
        localizedImages.push(access.imageReference);
    } else {
      throw new ModuleSourceError(
        'UnknownAccessType',
        `${what}: resource ${resource.name} has access type ${JSON.stringify(access.type)}; ` +
          'only localBlob, localOciBlob, ociArtifact and ociRegistry are understood',
      );
    }
  }
  return { localBlobs, localizedImages };
}

/** The repository name of a component under `component-descriptors/` for the descriptor's name mapping. */
export function mappedComponentName(descriptor: ComponentDescriptor): string {
  return descriptor.componentNameMapping === 'sha256-digest'
    ? createHash('sha256').update(descriptor.name).digest('hex')
    : descriptor.name;
}
