// A module's raw manifest: multi-document YAML of Kubernetes objects. Bounded in documents, and in aliases so a
// "billion laughs" document cannot expand into gigabytes when the objects are later serialized to be applied.
import { parseAllDocuments } from 'yaml';
import { ModuleSourceError } from './errors.js';

export interface ManifestObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [key: string]: unknown };
  [key: string]: unknown;
}

export interface ObjectBounds {
  maxObjects: number;
  /** Alias nodes, weighted by the size of what they stand for (the `yaml` package's maxAliasCount). */
  maxAliasCount: number;
}

export const DEFAULT_OBJECT_BOUNDS: ObjectBounds = { maxObjects: 5_000, maxAliasCount: 100 };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Parses the YAML into objects, each with apiVersion, kind and metadata.name; empty documents are skipped. */
export function parseManifestObjects(
  text: string,
  what: string,
  bounds: ObjectBounds = DEFAULT_OBJECT_BOUNDS,
): ManifestObject[] {
  const malformed = (detail: string, cause?: unknown) =>
    new ModuleSourceError('MalformedManifest', `${what}: ${detail}`, cause === undefined ? {} : { cause });
  const documents = parseAllDocuments(text, { uniqueKeys: false });
  if (!Array.isArray(documents)) return []; // an empty stream
  if (documents.length > bounds.maxObjects) {
    throw new ModuleSourceError('TooLarge', `${what}: more than ${bounds.maxObjects} YAML documents`);
  }
  const objects: ManifestObject[] = [];
  documents.forEach((document, index) => {
    const place = `document ${index + 1}`;
    const error = document.errors[0];
    if (error) throw malformed(`${place} is not valid YAML: ${error.message}`, error);
    let value: unknown;
    try {
      value = document.toJS({ maxAliasCount: bounds.maxAliasCount });
    } catch (cause) {
      const aliases = /alias/i.test((cause as Error).message);
      throw malformed(
        aliases
          ? `${place} uses more YAML aliases than the bound of ${bounds.maxAliasCount} (an alias bomb?)`
          : `${place}: ${(cause as Error).message}`,
        cause,
      );
    }
    if (value === null || value === undefined) return;
    if (!isRecord(value)) throw malformed(`${place} is not a mapping`);
    const { apiVersion, kind, metadata } = value;
    if (typeof apiVersion !== 'string' || apiVersion === '' || typeof kind !== 'string' || kind === '') {
      throw malformed(`${place} has no apiVersion and kind`);
    }
    if (!isRecord(metadata) || typeof metadata['name'] !== 'string' || metadata['name'] === '') {
      throw malformed(`${place} (${kind}) has no metadata.name`);
    }
    if (metadata['namespace'] !== undefined && typeof metadata['namespace'] !== 'string') {
      throw malformed(`${place} (${kind} ${metadata['name']}) has a metadata.namespace that is not a string`);
    }
    objects.push(value as ManifestObject);
  });
  return objects;
}
