// What the agent asks of its clusters, by cluster kind, verb and resource, how many bytes the answers bring, and
// what its connections cost (TLS handshakes, and how many of them resumed a session): the figures an SRE needs to see what one reconcile costs
// the API servers (decision 016), and that bench:agent-single prints per reconcile.
import { Counter, registeredMetric, type Registry } from '@skr-watcher/telemetry';

/** Which side a cluster client talks to; the only cluster label, so the series stay few with thousands of SKRs. */
export type ClusterKind = 'kcp' | 'skr';

export interface KubeRequestMetrics {
  /** One request sent (retries of a 429 count again: each costs the API server). */
  request(kind: ClusterKind, method: string, url: string, contentType: string | undefined): void;
  /**
   * The outcome of one request: the HTTP status code, or `error` when no answer came (refused, reset, timed out,
   * TLS failure). Lets an SRE alert on "SKRs answer 401" (decision 023).
   */
  outcome?(
    kind: ClusterKind,
    method: string,
    url: string,
    contentType: string | undefined,
    code: number | 'error',
  ): void;
  /** One TLS connection established; `resumed` when it resumed an earlier session (no certificate exchange). */
  connection(kind: ClusterKind, resumed: boolean): void;
  /** The body of one answer read whole (not watches), `bytes` long as sent (undecoded). */
  responseBody?(
    kind: ClusterKind,
    method: string,
    url: string,
    contentType: string | undefined,
    bytes: number,
  ): void;
}

/** The request and connection counters in `registry` (one set per registry, shared by every client). */
export function kubeRequestMetrics(registry: Registry): KubeRequestMetrics {
  const registers = [registry];
  const requests = registeredMetric(
    registry,
    'skr_agent_kube_requests_total',
    () =>
      new Counter({
        name: 'skr_agent_kube_requests_total',
        help: 'Requests to the API servers by cluster kind (kcp, skr), verb (get, list, watch, create, update, patch, apply, delete, discovery) and resource (plural, with subresource).',
        labelNames: ['cluster', 'verb', 'resource'],
        registers,
      }),
  );
  const connections = registeredMetric(
    registry,
    'skr_agent_kube_tls_connections_total',
    () =>
      new Counter({
        name: 'skr_agent_kube_tls_connections_total',
        help: 'TLS connections to the API servers by cluster kind and whether the handshake resumed a session (true: no certificates exchanged or verified).',
        labelNames: ['cluster', 'resumed'],
        registers,
      }),
  );
  const responseBytes = registeredMetric(
    registry,
    'skr_agent_kube_response_bytes_total',
    () =>
      new Counter({
        name: 'skr_agent_kube_response_bytes_total',
        help: 'Bytes of the answers read whole from the API servers (watch streams not included), by cluster kind, verb and resource as for skr_agent_kube_requests_total.',
        labelNames: ['cluster', 'verb', 'resource'],
        registers,
      }),
  );
  const outcomes = registeredMetric(
    registry,
    'skr_agent_kube_responses_total',
    () =>
      new Counter({
        name: 'skr_agent_kube_responses_total',
        help: 'Outcomes of requests to the API servers by cluster kind (kcp, skr), verb and HTTP status code (`error` when no answer came: refused, reset, timed out, TLS failure).',
        labelNames: ['cluster', 'verb', 'code'],
        registers,
      }),
  );
  return {
    outcome(kind, method, url, contentType, code) {
      const { verb } = describeRequest(method, url, contentType);
      outcomes.inc({ cluster: kind, verb, code: String(code) });
    },
    request(kind, method, url, contentType) {
      const { verb, resource } = describeRequest(method, url, contentType);
      requests.inc({ cluster: kind, verb, resource });
    },
    connection(kind, resumed) {
      connections.inc({ cluster: kind, resumed: String(resumed) });
    },
    responseBody(kind, method, url, contentType, bytes) {
      const { verb, resource } = describeRequest(method, url, contentType);
      responseBytes.inc({ cluster: kind, verb, resource }, bytes);
    },
  };
}

/**
 * Verb and resource of a request to a Kubernetes API path, as the API server's audit log names them:
 * `/apis/<group>/<version>[/namespaces/<ns>]/<resource>[/<name>[/<subresource>]]` (or `/api/v1/...`). The resource
 * is the plural (with `/<subresource>`), never a name, so the label stays bounded.
 */
export function describeRequest(
  method: string,
  url: string,
  contentType: string | undefined,
): { verb: string; resource: string } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { verb: method.toLowerCase(), resource: 'unknown' };
  }
  const segments = parsed.pathname.split('/').filter(Boolean);
  // /api/v1/... has the version at index 1, /apis/<group>/<version>/... at index 2.
  const rest =
    segments[0] === 'api' ? segments.slice(2) : segments[0] === 'apis' ? segments.slice(3) : undefined;
  if (!rest || rest.length === 0) return { verb: 'discovery', resource: '' };
  const namespaced = rest[0] === 'namespaces' && rest.length >= 3;
  const [resource = '', name, subresource] = namespaced ? rest.slice(2) : rest;
  const fullResource = subresource ? `${resource}/${subresource}` : resource;
  switch (method.toUpperCase()) {
    case 'GET':
      if (name !== undefined) return { verb: 'get', resource: fullResource };
      return { verb: parsed.searchParams.get('watch') === 'true' ? 'watch' : 'list', resource: fullResource };
    case 'POST':
      return { verb: 'create', resource: fullResource };
    case 'PUT':
      return { verb: 'update', resource: fullResource };
    case 'PATCH':
      return {
        verb: contentType?.includes('apply-patch') ? 'apply' : 'patch',
        resource: fullResource,
      };
    case 'DELETE':
      return { verb: name === undefined ? 'deletecollection' : 'delete', resource: fullResource };
    default:
      return { verb: method.toLowerCase(), resource: fullResource };
  }
}
