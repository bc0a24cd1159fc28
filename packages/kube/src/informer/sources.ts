// Where informers list and watch: custom resources of one kind, Secrets of one namespace, and any collection
// listed and watched as metadata only.
import {
  CoreV1Api,
  CustomObjectsApi,
  HttpMethod,
  RequestContext,
  type KubeConfig,
  type V1Secret,
} from '@kubernetes/client-node';
import { fetch } from 'undici';
import { PARTIAL_OBJECT_METADATA_LIST } from '../metadata-list.js';
import { WatchFailure } from './failure.js';
import type { CachedObject, InformerSource, ListPage, PartialObjectMetadata } from './types.js';

/** Lists and watches custom resources of one kind, in one namespace or in all. */
export function customResourceSource<T extends CachedObject>(
  kubeConfig: KubeConfig,
  target: { group: string; version: string; plural: string; namespace?: string; labelSelector?: string },
): InformerSource<T> {
  const api = kubeConfig.makeApiClient(CustomObjectsApi);
  const { group, version, plural, namespace, labelSelector } = target;
  const path = namespace
    ? `/apis/${group}/${version}/namespaces/${namespace}/${plural}`
    : `/apis/${group}/${version}/${plural}`;
  return {
    resource: plural,
    path,
    labelSelector,
    list: async ({ limit, continueToken }) => {
      const page: unknown = namespace
        ? await api.listNamespacedCustomObject({
            group,
            version,
            namespace,
            plural,
            labelSelector,
            limit,
            _continue: continueToken,
          })
        : await api.listClusterCustomObject({
            group,
            version,
            plural,
            labelSelector,
            limit,
            _continue: continueToken,
          });
      return page as ListPage<T>;
    },
  };
}

/** Lists and watches Secrets of one namespace that match a label selector (and a field selector, e.g. on `type`). */
export function secretSource(
  kubeConfig: KubeConfig,
  target: { namespace: string; labelSelector?: string; fieldSelector?: string },
): InformerSource<V1Secret> {
  const api = kubeConfig.makeApiClient(CoreV1Api);
  const { namespace, labelSelector, fieldSelector } = target;
  return {
    resource: 'secrets',
    path: `/api/v1/namespaces/${namespace}/secrets`,
    labelSelector,
    fieldSelector,
    list: async ({ limit, continueToken }) => {
      const page = await api.listNamespacedSecret({
        namespace,
        labelSelector,
        fieldSelector,
        limit,
        _continue: continueToken,
      });
      // client-node's typed V1ListMeta names the token `_continue` (`continue` is a reserved word): without this
      // mapping the relist stopped after its first page, and the cache knew 500 Secrets of a larger namespace.
      const metadata = page.metadata;
      return {
        items: page.items,
        metadata: {
          ...(metadata?.resourceVersion ? { resourceVersion: metadata.resourceVersion } : {}),
          ...(metadata?._continue ? { continue: metadata._continue } : {}),
        },
      };
    },
  };
}

/**
 * `source`'s collection (path and selectors), listed and watched as PartialObjectMetadata: for caches that read
 * names, labels and resourceVersions only (decision 012); client-go's metadata informers ask the same.
 * No spec, status or Secret data travels or is parsed. No plain JSON fallback: a server that cannot convert answers
 * 406, and the informer fails rather than caching whole objects. `T` is what the caller reads of it.
 */
export function metadataOnly<T extends CachedObject = PartialObjectMetadata>(
  kubeConfig: KubeConfig,
  source: Pick<InformerSource<unknown>, 'resource' | 'path' | 'labelSelector' | 'fieldSelector'>,
): InformerSource<T> {
  const { resource, path, labelSelector, fieldSelector } = source;
  return {
    resource,
    path,
    labelSelector,
    fieldSelector,
    metadataOnly: true,
    list: async ({ limit, continueToken }) => {
      const cluster = kubeConfig.getCurrentCluster();
      if (!cluster) throw new Error(`list ${resource}: the kubeconfig has no current cluster`);
      const url = new URL(cluster.server + path);
      const query = { labelSelector, fieldSelector, limit, continue: continueToken };
      for (const [key, value] of Object.entries(query)) {
        if (value !== undefined) url.searchParams.set(key, String(value));
      }
      // As client-node's Watch sends a request: the KubeConfig's authentication and dispatcher (pooled or not).
      const request = new RequestContext(url.toString(), HttpMethod.GET);
      await kubeConfig.applySecurityAuthentication(request);
      request.setHeaderParam('Accept', PARTIAL_OBJECT_METADATA_LIST);
      const response = await fetch(url, {
        headers: request.getHeaders(),
        dispatcher: request.getDispatcher(),
      });
      const body = await response.text();
      if (response.status !== 200) {
        throw new WatchFailure(`HTTP ${response.status}: ${body.slice(0, 512)}`, response.status);
      }
      const page = JSON.parse(body) as { items?: T[] | null; metadata?: ListPage<T>['metadata'] } | null;
      // An empty PartialObjectMetadataList says `"items": null` (Go's nil slice), where a typed list says `[]`.
      return { ...page, items: page?.items ?? [] };
    },
  };
}
