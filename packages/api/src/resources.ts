// The custom resources. Their zod schemas in ./schemas are the one description of each kind; the
// types here are inferred from them, and manifests/crds/ describes the same fields to the API server.
import { DEFAULTS, LABELS } from './constants.js';
import type { LabelSelector, TrackingObject, Watcher } from './schemas/index.js';

export * from './schemas/index.js';

/** `group/version`, or `version` for the core group. */
export function apiVersionOf(gv: { group: string; version: string }): string {
  return gv.group === '' ? gv.version : `${gv.group}/${gv.version}`;
}

/** Splits an apiVersion into its group (empty for core) and version. */
export function splitApiVersion(apiVersion: string): { group: string; version: string } {
  const slash = apiVersion.indexOf('/');
  return slash < 0
    ? { group: '', version: apiVersion }
    : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1) };
}

/** The component a Watcher's events wake: `spec.manager`, else upstream's `managed-by` label, else the default. */
export function managerOf(watcher: Pick<Watcher, 'spec' | 'metadata'>): string {
  return watcher.spec.manager || watcher.metadata.labels?.[LABELS.managedBy] || DEFAULTS.manager;
}

/** Identity of an object recorded in a tracking object; undefined when it lacks a kind or name. */
export function trackedObject(
  tracking: TrackingObject | undefined,
): { apiVersion: string; kind: string; name: string; namespace?: string } | undefined {
  const name = tracking?.metadata?.name;
  if (!tracking?.apiVersion || !tracking.kind || !name) return undefined;
  const namespace = tracking.metadata?.namespace;
  return { apiVersion: tracking.apiVersion, kind: tracking.kind, name, ...(namespace ? { namespace } : {}) };
}

/**
 * Whether `labels` satisfy a label selector, with the Kubernetes semantics (all terms ANDed). An empty
 * selector selects nothing here: upstream treats a restricted module with an empty kymaSelector as closed.
 */
export function selectsLabels(selector: LabelSelector, labels: Record<string, string> | undefined): boolean {
  const have = labels ?? {};
  const matchLabels = Object.entries(selector.matchLabels ?? {});
  const expressions = selector.matchExpressions ?? [];
  if (matchLabels.length === 0 && expressions.length === 0) return false;
  if (matchLabels.some(([key, value]) => have[key] !== value)) return false;
  return expressions.every(({ key, operator, values }) => {
    const present = Object.hasOwn(have, key);
    switch (operator) {
      case 'In':
        return present && (values ?? []).includes(have[key]!);
      case 'NotIn':
        return !present || !(values ?? []).includes(have[key]!);
      case 'Exists':
        return present;
      case 'DoesNotExist':
        return !present;
    }
  });
}
