// What a SyncResource may touch in the SKR: never the agent's own objects (agent-owned.ts), never a Secret the SKR
// would give a ServiceAccount's token, and otherwise only what the allow-list admits (kinds in namespaces); and the
// SyncResource as the holder of what it applied (decision 026), so it never writes or removes another's object.
import { splitApiVersion } from '@skr-watcher/api';
import { syncResourceHolder, type Holding, type SyncedObject } from '@skr-watcher/kube';
import type { AgentOwnedObjects } from '../agent-owned.js';
import type { SyncResourcePolicy } from '../context.js';
import { appliedOf, describeApplied, type Applied } from './applied-objects.js';

/** Why a SyncResource may not write or delete this object; undefined when it may. */
export type SyncResourceGuard = (object: SyncedObject) => string | undefined;

/**
 * Why SyncResources may not touch this object, or undefined when they may. A module manager's SyncResource must
 * not reach anything in the SKR (RBAC, webhooks, other tenants' namespaces): only allowed kinds in allowed namespaces.
 */
export function refusedByPolicy(policy: SyncResourcePolicy, applied: Applied): string | undefined {
  const { group } = splitApiVersion(applied.apiVersion);
  const kind = group ? `${applied.kind}.${group}` : applied.kind;
  if (!policy.kinds.includes(kind))
    return `${describeApplied(applied)}: kind ${kind} is not allowed for SyncResources (allowed: ${policy.kinds.join(', ')}); refused`;
  if (!applied.namespace || !policy.namespaces.includes(applied.namespace))
    return `${describeApplied(applied)}: SyncResources may touch namespaces ${policy.namespaces.join(', ')} only; refused`;
  return undefined;
}

/**
 * The guard of every write and delete a SyncResource causes: the agent's own objects first (their reason is the
 * one a user needs to see), then the allow-list. Records are checked too: whoever may write SyncResource status
 * must not be able to delete anything by it.
 */
export function guardOf(policy: SyncResourcePolicy, owned: AgentOwnedObjects): SyncResourceGuard {
  return (object) => owned.reasonFor(object) ?? refusedByPolicy(policy, appliedOf(object));
}

/**
 * A Secret of type service-account-token makes the SKR's token controller mint a token for any ServiceAccount it
 * names: a module manager could so obtain the credentials of a ServiceAccount of the SKR. Refused whatever the
 * allow-list says.
 */
export function tokenSecretRefusal(resource: Record<string, unknown>): string | undefined {
  if (resource['apiVersion'] !== 'v1' || resource['kind'] !== 'Secret') return undefined;
  if (resource['type'] !== 'kubernetes.io/service-account-token') return undefined;
  return "a Secret of type kubernetes.io/service-account-token would be given a ServiceAccount's token by the SKR; refused";
}

/** The SyncResource as the holder of its objects in the SKR (decision 026). */
export function holdingOf(namespace: string, name: string): Holding {
  return { self: syncResourceHolder(namespace, name) };
}
