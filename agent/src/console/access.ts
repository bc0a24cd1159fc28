// Who may see what the console serves, decided per request as kube-rbac-proxy decides it: the caller's bearer token
// is checked with a TokenReview, and the user it names must be allowed `get` on Kymas in the namespace (the overview)
// or on that Kyma (its page) by a SubjectAccessReview. No token or an unknown one: 401; no permission: 403; in
// neither case any data. Answers are cached briefly, per token and question, in a bounded cache.
import { GROUP, KINDS } from '@skr-watcher/api';
import type { AccessAttributes, AccessReviewer, MetricsAccess } from '@skr-watcher/kube';
import type { RouteRequest } from '@skr-watcher/telemetry';

/** A revoked permission or token stops working within this. */
export const REVIEW_CACHE_MS = 10_000;
/** Answers kept at most (a console has few viewers; a flood of random tokens only churns this). */
export const REVIEW_CACHE_ENTRIES = 256;

/** The query parameter a link may carry a token in, once: the page moves it into sessionStorage. */
export const TOKEN_QUERY = 'token';

/** The bearer token of a request: `Authorization: Bearer …`, else (pages only) `?token=`. */
export function bearerToken(request: RouteRequest, allowQuery: boolean): string | undefined {
  const header = request.headers.authorization;
  const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
  if (match?.[1]) return match[1];
  const query = allowQuery ? request.query.get(TOKEN_QUERY) : null;
  return query ? query : undefined;
}

/** `get` on Kymas in `namespace`, or on the Kyma `name` there. */
export function kymaAccess(namespace: string, name?: string): AccessAttributes {
  return {
    kind: 'resource',
    group: GROUP,
    resource: KINDS.kyma.plural,
    verb: 'get',
    namespace,
    ...(name ? { name } : {}),
  };
}

export async function accessOf(
  reviewer: AccessReviewer,
  token: string | undefined,
  attributes: AccessAttributes,
): Promise<MetricsAccess> {
  if (!token) return 'unauthenticated';
  return reviewer.review(token, attributes);
}
