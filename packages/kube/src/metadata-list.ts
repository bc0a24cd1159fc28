// Lists of metadata only (PartialObjectMetadataList, as client-go's metadata informers read them): the API server
// encodes no spec, data or status, and the client parses none. For callers that decide on names, labels,
// annotations and resourceVersions only.
import { setHeaderOptions } from '@kubernetes/client-node';
import { isRecord, objectMetaSchema, parseShape, ShapeError, type ObjectMeta } from '@skr-watcher/api';

/** Accept header of a metadata-only read (what `kubectl get --show-kind -o name` and client-go's metadata client ask). */
export const PARTIAL_OBJECT_METADATA = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

/** Accept header of a metadata-only list: each item a PartialObjectMetadata. */
export const PARTIAL_OBJECT_METADATA_LIST =
  'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';

/** Request options of a metadata-only list ('append' keeps the client's deadline middleware). */
export const metadataOnlyList = setHeaderOptions('Accept', PARTIAL_OBJECT_METADATA_LIST);

/** The metadata of each item of a metadata-only list answer, validated; managedFields are dropped. */
export function listedMetadata(answer: unknown, what: string): ObjectMeta[] {
  const items = isRecord(answer) ? answer['items'] : undefined;
  // An empty PartialObjectMetadataList has `items: null` (a Go nil slice), unlike the typed and custom lists.
  if (items === null) return [];
  if (!Array.isArray(items)) throw new ShapeError(`${what}: list answer without items`);
  return items.map((item) =>
    parseShape(objectMetaSchema, isRecord(item) ? item['metadata'] : undefined, `${what} item`),
  );
}
