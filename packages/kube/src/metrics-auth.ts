// Who may read what the agent serves over HTTP, as kube-rbac-proxy and kubebuilder projects decide it
// (controller-runtime's WithAuthenticationAndAuthorization): the bearer token is checked with a TokenReview, then
// the user it names must be allowed the request's attributes by a SubjectAccessReview. Answers are cached per token
// and attributes (hashed), bounded in time and entries, so a caller polling every few seconds costs the API server
// two requests per cache period, not two per request (decision 023).
import { createHash } from 'node:crypto';
import { AuthenticationV1Api, AuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';

export type MetricsAccess = 'allowed' | 'unauthenticated' | 'forbidden';

export interface MetricsAuthorizer {
  /** The access the bearer token (without `Bearer `) gives to GET `path`. Throws when the API server cannot say. */
  check(token: string, path: string): Promise<MetricsAccess>;
}

/** What a request asks for, in a SubjectAccessReview's words: a non-resource URL or a resource. */
export type AccessAttributes =
  | { kind: 'url'; path: string; verb: string }
  | { kind: 'resource'; group: string; resource: string; verb: string; namespace: string; name?: string };

export interface AccessReviewer {
  /** The access `token` gives to `attributes`. Throws when the API server cannot say. */
  review(token: string, attributes: AccessAttributes): Promise<MetricsAccess>;
}

export interface AccessReviewerOptions {
  /** How long an answer is reused. */
  cacheMs: number;
  /** Answers kept at most. */
  cacheEntries: number;
  now?: () => number;
}

const METRICS_CACHE = { cacheMs: 60_000, cacheEntries: 64 };

export function kubernetesAccessReviewer(
  kubeConfig: KubeConfig,
  options: AccessReviewerOptions,
): AccessReviewer {
  const now = options.now ?? Date.now;
  const authentication = kubeConfig.makeApiClient(AuthenticationV1Api);
  const authorization = kubeConfig.makeApiClient(AuthorizationV1Api);
  const cache = new Map<string, { access: MetricsAccess; until: number }>();

  const decide = async (token: string, attributes: AccessAttributes): Promise<MetricsAccess> => {
    const review = await authentication.createTokenReview({ body: { spec: { token } } });
    const user = review.status?.user;
    if (!review.status?.authenticated || !user?.username) return 'unauthenticated';
    const access = await authorization.createSubjectAccessReview({
      body: {
        spec: {
          user: user.username,
          ...(user.uid ? { uid: user.uid } : {}),
          ...(user.groups ? { groups: user.groups } : {}),
          ...(user.extra ? { extra: user.extra } : {}),
          ...(attributes.kind === 'url'
            ? { nonResourceAttributes: { path: attributes.path, verb: attributes.verb } }
            : {
                resourceAttributes: {
                  group: attributes.group,
                  resource: attributes.resource,
                  verb: attributes.verb,
                  namespace: attributes.namespace,
                  ...(attributes.name ? { name: attributes.name } : {}),
                },
              }),
        },
      },
    });
    return access.status?.allowed ? 'allowed' : 'forbidden';
  };

  return {
    async review(token, attributes) {
      const key = createHash('sha256')
        .update(JSON.stringify(attributes))
        .update('\0')
        .update(token)
        .digest('hex');
      const at = now();
      const hit = cache.get(key);
      if (hit && hit.until > at) return hit.access;
      const access = await decide(token, attributes);
      if (cache.size >= options.cacheEntries) {
        for (const [stale, entry] of cache) if (entry.until <= at) cache.delete(stale);
        if (cache.size >= options.cacheEntries) cache.clear();
      }
      cache.set(key, { access, until: at + options.cacheMs });
      return access;
    },
  };
}

export function kubernetesMetricsAuthorizer(
  kubeConfig: KubeConfig,
  options: { now?: () => number } = {},
): MetricsAuthorizer {
  const reviewer = kubernetesAccessReviewer(kubeConfig, { ...METRICS_CACHE, ...options });
  return { check: (token, path) => reviewer.review(token, { kind: 'url', path, verb: 'get' }) };
}
