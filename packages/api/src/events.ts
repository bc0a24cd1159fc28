// The callback contract (DESIGN 4.2, 4.3): what an SKR webhook posts to the KCP listener.
import { z } from 'zod';

/** Kubernetes object names are DNS subdomains of at most 253 characters. */
const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
/** Namespaces are DNS labels of at most 63 characters. */
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** API groups are empty (core) or DNS subdomains. */
const GROUP = /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)?$/;
const VERSION = /^[a-z0-9]{1,63}$/;
const KIND = /^[A-Za-z][A-Za-z0-9]{0,62}$/;

const objectKey = z.object({
  // Capitalised keys are the reference system's wire format; keep them.
  Namespace: z.string().regex(NAMESPACE, 'must be a namespace (DNS label) or empty').or(z.literal('')),
  Name: z.string().regex(NAME, 'must be a Kubernetes object name'),
});

const gvk = z.object({
  group: z.string().regex(GROUP, 'must be an API group (DNS subdomain) or empty'),
  version: z.string().regex(VERSION, 'must be an API version such as v1beta2'),
  kind: z.string().regex(KIND, 'must be a Kind such as Kyma'),
});

export const watchEventV2Schema = z.object({ watched: objectKey, watchedGvk: gvk });
export const watchEventV1Schema = watchEventV2Schema.extend({ owner: objectKey });

export type WatchEventV2 = z.infer<typeof watchEventV2Schema>;
export type WatchEventV1 = z.infer<typeof watchEventV1Schema>;
export type ContractVersion = 'v1' | 'v2';

export type ParseResult<T> = { ok: true; value: T } | { ok: false; error: string };

/** Turns a Zod error into one line naming every offending field, e.g. `watched.Name: Required`. */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => `${issue.path.length ? issue.path.join('.') : '(body)'}: ${issue.message}`)
    .join('; ');
}

/** Validates an already JSON-decoded callback body against the contract of its path version. */
export function parseWatchEvent(version: 'v1', body: unknown): ParseResult<WatchEventV1>;
export function parseWatchEvent(version: 'v2', body: unknown): ParseResult<WatchEventV2>;
export function parseWatchEvent(
  version: ContractVersion,
  body: unknown,
): ParseResult<WatchEventV1 | WatchEventV2>;
export function parseWatchEvent(
  version: ContractVersion,
  body: unknown,
): ParseResult<WatchEventV1 | WatchEventV2> {
  const schema = version === 'v1' ? watchEventV1Schema : watchEventV2Schema;
  const result = schema.safeParse(body);
  return result.success
    ? { ok: true, value: result.data }
    : { ok: false, error: describeIssues(result.error) };
}

/** Builds the v2 body for an object; `namespace` is empty for cluster-scoped objects. */
export function watchEventFor(
  object: { namespace: string; name: string },
  watchedGvk: { group: string; version: string; kind: string },
): WatchEventV2 {
  return {
    watched: { Namespace: object.namespace, Name: object.name },
    watchedGvk: { group: watchedGvk.group, version: watchedGvk.version, kind: watchedGvk.kind },
  };
}

/** Callback path for a manager and contract version: `/v2/lifecycle-manager/event`. */
export function eventPath(manager: string, version: ContractVersion = 'v2'): string {
  return `/${version}/${manager}/event`;
}

/** Matches `/v1/<component>/event` and `/v2/<component>/event`. */
const EVENT_PATH = /^\/(v1|v2)\/([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)\/event$/;

export function parseEventPath(path: string): { version: ContractVersion; component: string } | undefined {
  const match = EVENT_PATH.exec(path);
  if (!match) return undefined;
  return { version: match[1] as ContractVersion, component: match[2] as string };
}
