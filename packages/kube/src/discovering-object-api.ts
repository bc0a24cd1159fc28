// KubernetesObjectApi (any kind by apiVersion and kind) whose discovery answers come from the process's shared
// DiscoveryCache, and which can read an object's metadata alone.
import {
  HttpMethod,
  KubernetesObjectApi,
  type Configuration,
  type KubernetesObject,
  type V1APIResource,
  type V1APIResourceList,
} from '@kubernetes/client-node';
import { KubeRequestError, isNotFound } from './apply.js';
import { sharedDiscovery, type DiscoveryCache } from './discovery.js';
import { PARTIAL_OBJECT_METADATA } from './metadata-list.js';

/**
 * KubernetesObjectApi whose discovery lookups go through a DiscoveryCache shared by every client of the process
 * (discovery.ts): one request per API server and group-version, not one per client and caller.
 */
export class DiscoveringObjectApi extends KubernetesObjectApi {
  constructor(
    configuration: Configuration,
    private readonly server: string,
    private readonly discovery: DiscoveryCache = sharedDiscovery,
  ) {
    super(configuration);
  }

  /** The resource serving `kind` in `apiVersion`; undefined when the server does not serve it. */
  discover(apiVersion: string, kind: string): Promise<V1APIResource | undefined> {
    return this.resource(apiVersion, kind);
  }

  override resource(apiVersion: string, kind: string): Promise<V1APIResource | undefined> {
    return this.discovery.served(this.server, apiVersion, kind, async () => {
      const path = `/${apiVersion.includes('/') ? 'apis' : 'api'}/${apiVersion}`;
      const request = this.configuration.baseServer.makeRequestContext(path, HttpMethod.GET);
      request.setHeaderParam('Accept', 'application/json');
      try {
        return (await this.requestPromise(request, 'V1APIResourceList')) as V1APIResourceList;
      } catch (error) {
        // A group-version the server does not serve: no kind of it is served.
        if (isNotFound(error)) return undefined;
        throw new KubeRequestError(`discovery ${path}`, error);
      }
    }) as Promise<V1APIResource | undefined>;
  }

  /**
   * The object's metadata only (a PartialObjectMetadata, read from etcd like any GET): the API server encodes and
   * sends no spec, data or status. Fails with 404 when the object is absent.
   */
  async readMetadata(spec: KubernetesObject): Promise<KubernetesObject> {
    const request = this.configuration.baseServer.makeRequestContext(
      await this.specUriPath(spec, 'read'),
      HttpMethod.GET,
    );
    request.setHeaderParam('Accept', PARTIAL_OBJECT_METADATA);
    return this.requestPromise(request);
  }
}
