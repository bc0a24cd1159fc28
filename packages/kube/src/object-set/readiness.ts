// Readiness of a set, read the same way for every kind (kstatus's rules): a workload (Deployment, StatefulSet,
// DaemonSet) is Ready once its controller has observed its current generation and every replica is updated and
// available; every other kind is Ready once it exists. A set is Ready when every workload in it is, not only the
// first (upstream's "manager"); a set without workloads is Ready. A workload that is not Ready is Error while one of
// its Pods cannot start its containers (an image that cannot be pulled, a missing config): upstream's state checks
// turn such a module Error, and waiting for a progress deadline would only delay what is already known.
import { isRecord } from '@skr-watcher/api';
import { isUnreachable, readObject } from '../apply.js';
import type { ClusterClient } from '../cluster-client.js';
import { mapLimited } from './concurrency.js';
import { describeSynced, refOfSynced, type SyncedObject } from './inventory.js';

export type ReadinessState = 'Ready' | 'Processing' | 'Error';

export interface ObjectReadiness {
  object: SyncedObject;
  state: ReadinessState;
  reason: string;
}

export interface SetReadiness {
  state: ReadinessState;
  /** One entry per workload of the set, in the set's order. */
  workloads: ObjectReadiness[];
  /** The first workload that is not Ready, with its reason; undefined when the set is Ready. */
  message: string | undefined;
}

const WORKLOAD_KINDS = new Set(['Deployment', 'StatefulSet', 'DaemonSet']);

export function isWorkload(entry: Pick<SyncedObject, 'group' | 'kind'>): boolean {
  return entry.group === 'apps' && WORKLOAD_KINDS.has(entry.kind);
}

function numberAt(record: Record<string, unknown>, key: string): number | undefined {
  const value = record[key];
  return typeof value === 'number' ? value : undefined;
}

function conditionOf(status: Record<string, unknown>, type: string): Record<string, unknown> | undefined {
  const conditions = status['conditions'];
  if (!Array.isArray(conditions)) return undefined;
  return conditions.find(
    (condition): condition is Record<string, unknown> => isRecord(condition) && condition['type'] === type,
  );
}

type Verdict = { state: ReadinessState; reason: string };

/** Readiness of one workload as read from the API server (kstatus's rules for its kind). */
export function workloadReadiness(kind: string, object: unknown): Verdict {
  if (!isRecord(object)) return { state: 'Processing', reason: 'not found' };
  const metadata = isRecord(object['metadata']) ? object['metadata'] : {};
  const spec = isRecord(object['spec']) ? object['spec'] : {};
  const status = isRecord(object['status']) ? object['status'] : {};
  const generation = numberAt(metadata, 'generation') ?? 0;
  const observed = numberAt(status, 'observedGeneration');
  if (observed === undefined || observed < generation)
    return { state: 'Processing', reason: `generation ${generation} not yet observed by its controller` };
  switch (kind) {
    case 'Deployment':
      return deploymentReadiness(spec, status);
    case 'StatefulSet':
      return statefulSetReadiness(spec, status);
    case 'DaemonSet':
      return daemonSetReadiness(status);
    default:
      return { state: 'Ready', reason: 'exists' };
  }
}

function deploymentReadiness(spec: Record<string, unknown>, status: Record<string, unknown>): Verdict {
  const progressing = conditionOf(status, 'Progressing');
  if (progressing?.['reason'] === 'ProgressDeadlineExceeded')
    return {
      state: 'Error',
      reason: `progress deadline exceeded: ${String(progressing['message'] ?? '')}`.trim(),
    };
  const replicas = numberAt(spec, 'replicas') ?? 1;
  const updated = numberAt(status, 'updatedReplicas') ?? 0;
  const total = numberAt(status, 'replicas') ?? 0;
  const available = numberAt(status, 'availableReplicas') ?? 0;
  if (updated < replicas)
    return { state: 'Processing', reason: `${updated} of ${replicas} replicas updated` };
  if (total > updated)
    return { state: 'Processing', reason: `${total - updated} old replicas pending termination` };
  if (available < updated)
    return { state: 'Processing', reason: `${available} of ${updated} updated replicas available` };
  if (conditionOf(status, 'Available')?.['status'] === 'False')
    return { state: 'Processing', reason: 'condition Available is False' };
  return { state: 'Ready', reason: `${available} of ${replicas} replicas available` };
}

function statefulSetReadiness(spec: Record<string, unknown>, status: Record<string, unknown>): Verdict {
  const replicas = numberAt(spec, 'replicas') ?? 1;
  const ready = numberAt(status, 'readyReplicas') ?? 0;
  const current = numberAt(status, 'currentReplicas') ?? 0;
  const updated = numberAt(status, 'updatedReplicas') ?? 0;
  const strategy = isRecord(spec['updateStrategy']) ? spec['updateStrategy'] : {};
  if (ready < replicas) return { state: 'Processing', reason: `${ready} of ${replicas} replicas ready` };
  if (strategy['type'] === 'OnDelete')
    return { state: 'Ready', reason: `${ready} of ${replicas} replicas ready` };
  const rolling = isRecord(strategy['rollingUpdate']) ? strategy['rollingUpdate'] : {};
  const partition = numberAt(rolling, 'partition') ?? 0;
  if (partition > 0) {
    if (updated < replicas - partition)
      return {
        state: 'Processing',
        reason: `${updated} of ${replicas - partition} replicas updated (partition ${partition})`,
      };
    return { state: 'Ready', reason: `partitioned rollout done (${updated} updated)` };
  }
  if (status['updateRevision'] !== undefined && status['currentRevision'] !== status['updateRevision'])
    return { state: 'Processing', reason: `${current} of ${replicas} replicas at the current revision` };
  return { state: 'Ready', reason: `${ready} of ${replicas} replicas ready` };
}

function daemonSetReadiness(status: Record<string, unknown>): Verdict {
  const desired = numberAt(status, 'desiredNumberScheduled') ?? 0;
  const updated = numberAt(status, 'updatedNumberScheduled') ?? 0;
  const available = numberAt(status, 'numberAvailable') ?? 0;
  if (updated < desired) return { state: 'Processing', reason: `${updated} of ${desired} pods updated` };
  if (available < desired)
    return { state: 'Processing', reason: `${available} of ${desired} pods available` };
  return { state: 'Ready', reason: `${available} of ${desired} pods available` };
}

/**
 * Container waiting reasons that do not clear without a change to the Pod, its image or its configuration: the kubelet
 * only retries them with growing backoff.
 */
const CANNOT_START = new Set([
  'ErrImagePull',
  'ImagePullBackOff',
  'InvalidImageName',
  'ErrImageNeverPull',
  'CreateContainerConfigError',
  'CreateContainerError',
  'CrashLoopBackOff',
]);

/** The workload's Pods (by its selector's matchLabels); the first container that cannot start, as a reason. */
async function containerThatCannotStart(
  skr: ClusterClient,
  object: SyncedObject,
  workload: unknown,
): Promise<string | undefined> {
  const spec = isRecord(workload) && isRecord(workload['spec']) ? workload['spec'] : {};
  const selector = isRecord(spec['selector']) ? spec['selector'] : {};
  const matchLabels = isRecord(selector['matchLabels']) ? selector['matchLabels'] : {};
  const labelSelector = Object.entries(matchLabels)
    .map(([key, value]) => `${key}=${String(value)}`)
    .join(',');
  if (!labelSelector || !object.namespace) return undefined;
  const pods = await skr.core.listNamespacedPod({ namespace: object.namespace, labelSelector });
  for (const pod of pods.items) {
    const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
    for (const container of statuses) {
      const waiting = container.state?.waiting;
      if (waiting?.reason && CANNOT_START.has(waiting.reason))
        return `Pod ${object.namespace}/${pod.metadata?.name ?? ''} container ${container.name}: ${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''}`;
    }
  }
  return undefined;
}

/** Readiness of one workload of a set: its own status first, its Pods only while it is not Ready. */
async function readinessOfWorkload(skr: ClusterClient, object: SyncedObject): Promise<Verdict> {
  const workload = await readObject(skr.objects, refOfSynced(object));
  const verdict = workloadReadiness(object.kind, workload);
  if (verdict.state !== 'Processing' || !workload) return verdict;
  const stuck = await containerThatCannotStart(skr, object, workload);
  return stuck ? { state: 'Error', reason: stuck } : verdict;
}

const ORDER: Record<ReadinessState, number> = { Ready: 0, Processing: 1, Error: 2 };

/** Reads every workload of the set and sums them up; other kinds are not read. */
export async function readinessOfSet(
  skr: ClusterClient,
  members: readonly SyncedObject[],
  options: { concurrency?: number } = {},
): Promise<SetReadiness> {
  const workloads = members.filter(isWorkload);
  const verdicts = await mapLimited(workloads, options.concurrency ?? 4, async (object) => {
    try {
      return { object, ...(await readinessOfWorkload(skr, object)) };
    } catch (error) {
      if (isUnreachable(error)) throw error;
      return {
        object,
        state: 'Error' as const,
        reason: error instanceof Error ? error.message : String(error),
      };
    }
  });
  let state: ReadinessState = 'Ready';
  for (const verdict of verdicts) if (ORDER[verdict.state] > ORDER[state]) state = verdict.state;
  const first = verdicts.find((verdict) => verdict.state !== 'Ready');
  return {
    state,
    workloads: verdicts,
    message: first ? `${describeSynced(first.object)}: ${first.reason}` : undefined,
  };
}
