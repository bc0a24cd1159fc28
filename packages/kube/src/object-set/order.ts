// In which order the objects of a set are written and removed. Apply: CRDs and Namespaces first (what the rest
// needs to exist), webhook configurations last (a webhook registered before its Service and Deployment would
// reject or fail every write it intercepts). Delete: upstream lifecycle-manager's two phases, everything else
// first and the module's operator, RBAC, CRDs and Namespaces last, so the operator can finish its own cleanup.
import { DEFAULTS } from '@skr-watcher/api';
import type { SyncedObject } from './inventory.js';

export type ApplyPhase = 'foundation' | 'workload' | 'webhooks';

export const APPLY_PHASES: readonly ApplyPhase[] = ['foundation', 'workload', 'webhooks'];

const CRD = { group: 'apiextensions.k8s.io', kind: 'CustomResourceDefinition' };

export function isCrd(entry: Pick<SyncedObject, 'group' | 'kind'>): boolean {
  return entry.group === CRD.group && entry.kind === CRD.kind;
}

export function isNamespace(entry: Pick<SyncedObject, 'group' | 'kind'>): boolean {
  return entry.group === '' && entry.kind === 'Namespace';
}

const WEBHOOK_KINDS = new Set(['ValidatingWebhookConfiguration', 'MutatingWebhookConfiguration']);

export function applyPhaseOf(entry: Pick<SyncedObject, 'group' | 'kind'>): ApplyPhase {
  if (isCrd(entry) || isNamespace(entry)) return 'foundation';
  if (entry.group === 'admissionregistration.k8s.io' && WEBHOOK_KINDS.has(entry.kind)) return 'webhooks';
  return 'workload';
}

/**
 * Kinds removed in the second phase of a deletion (upstream's "operator-related" kinds): a module's operator and
 * what it runs on stay until everything it may still be cleaning up (its CRs, the objects they made) is gone.
 */
export const OPERATOR_RELATED_KINDS: ReadonlySet<string> = new Set([
  'CustomResourceDefinition',
  'Namespace',
  'ServiceAccount',
  'Role',
  'ClusterRole',
  'RoleBinding',
  'ClusterRoleBinding',
  'Service',
  'Deployment',
]);

export type DeletePhase = 'dependents' | 'operator';

export function deletePhaseOf(entry: Pick<SyncedObject, 'kind'>): DeletePhase {
  return OPERATOR_RELATED_KINDS.has(entry.kind) ? 'operator' : 'dependents';
}

/** The Namespace no set ever removes: the agent's own objects and every module live there. */
export const NEVER_PRUNED_NAMESPACE = DEFAULTS.skrNamespace;

export function neverPruned(entry: SyncedObject): boolean {
  return isNamespace(entry) && entry.name === NEVER_PRUNED_NAMESPACE;
}
