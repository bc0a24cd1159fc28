// Who may read /metrics, as kubebuilder projects decide it (controller-runtime's WithAuthenticationAndAuthorization):
// the bearer token is checked with a TokenReview, then the user it names must be allowed `get` on the non-resource
// URL by a SubjectAccessReview. Answers are cached for a minute per token (hashed), so a Prometheus scraping every
// few seconds costs the API server two requests a minute, not two per scrape (decision 023).
import { createHash } from 'node:crypto';
import { AuthenticationV1Api, AuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';

export type MetricsAccess = 'allowed' | 'unauthenticated' | 'forbidden';

export interface MetricsAuthorizer {
  /** The access the bearer token (without `Bearer `) gives to GET `path`. Throws when the API server cannot say. */
  check(token: string, path: string): Promise<MetricsAccess>;
}

const CACHE_MS = 60_000;
const CACHE_ENTRIES = 64;

export function kubernetesMetricsAuthorizer(
  kubeConfig: KubeConfig,
  options: { now?: () => number } = {},
): MetricsAuthorizer {
  const now = options.now ?? Date.now;
  const authentication = kubeConfig.makeApiClient(AuthenticationV1Api);
  const authorization = kubeConfig.makeApiClient(AuthorizationV1Api);
  const cache = new Map<string, { access: MetricsAccess; until: number }>();

  const decide = async (token: string, path: string): Promise<MetricsAccess> => {
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
          nonResourceAttributes: { path, verb: 'get' },
        },
      },
    });
    return access.status?.allowed ? 'allowed' : 'forbidden';
  };

  return {
    async check(token, path) {
      const key = createHash('sha256').update(path).update('\0').update(token).digest('hex');
      const at = now();
      const hit = cache.get(key);
      if (hit && hit.until > at) return hit.access;
      const access = await decide(token, path);
      if (cache.size >= CACHE_ENTRIES) {
        for (const [stale, entry] of cache) if (entry.until <= at) cache.delete(stale);
        if (cache.size >= CACHE_ENTRIES) cache.clear();
      }
      cache.set(key, { access, until: at + CACHE_MS });
      return access;
    },
  };
}
