// Drift put back at once: a callback about an object a module installed (the SKR webhook watches them by
// their `managed-by: kyma` label) re-applies that object from its Manifest's rendered set now, records an Event on
// the Kyma naming what was put back, and the Kyma's full pass follows at once (router.ts), which
// re-applies the whole set as every pass does.
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  ANNOTATIONS,
  LABELS,
  MANIFEST,
  MODULE_MIRROR,
  backoffDelay,
  showsChange,
  type Manifest,
  type SyncedObject,
} from '@skr-watcher/api';
import {
  applyObjectSet,
  manifestHolder,
  readObject,
  syncedObjectOf,
  transformed,
  type ObjectRef,
} from '@skr-watcher/kube';
import { Counter, type Registry } from '@skr-watcher/telemetry';
import type { ReconcileContext } from '../reconcile/context.js';
import { manifestTransforms, setMembers } from '../reconcile/manifests/install.js';
import { manifestsOf } from '../reconcile/manifests/manifests-of-kyma.js';
import type { ModuleCrChange } from '../reconcile/modules/mirror-lanes.js';

/**
 * reverted: the SKR held something else than the module sets (or nothing) and the object was applied again;
 * in-place: the SKR held what the module sets (the write touched only fields the module does not set); not-shown: the announced write never showed; skipped: the
 * Manifest is being removed, paused or unmanaged, or its set no longer holds the object (the full pass decides);
 * failed: the apply failed (the full pass retries with backoff and status).
 */
export type DriftOutcome = 'reverted' | 'in-place' | 'not-shown' | 'skipped' | 'failed';

export interface DriftResult {
  outcome: DriftOutcome;
  /** `namespace/name` of the Manifest whose set holds the object. */
  manifest: string;
  /** SKR reads until the announced write showed. */
  reads: number;
  /** Epoch ms at the end of each step, for the log line bench:drift reads to say where a revert's time goes. */
  steps: DriftSteps;
}

export interface DriftSteps {
  startedAt?: number;
  /** The Manifest holding the object was found (watch cache). */
  foundAt?: number;
  /** The SKR showed the announced write. */
  shownAt?: number;
  /** The object's desired form was taken from the rendered set. */
  renderedAt?: number;
  /** The server-side apply returned. */
  appliedAt?: number;
  /** The Event on the Kyma was written. */
  recordedAt?: number;
}

export const DRIFT_EVENT_REASON = 'DriftReverted';

export type DriftReverter = (
  ctx: ReconcileContext,
  kymaName: string,
  change: ModuleCrChange,
) => Promise<DriftResult | undefined>;

/** `revertDrift`, counted in `skr_agent_drift_reverts_total{outcome}` when a registry is given. */
export function createDriftReverter(registry?: Registry): DriftReverter {
  const reverts = registry
    ? new Counter({
        name: 'skr_agent_drift_reverts_total',
        help: 'Callbacks about objects a module installed, by what the targeted revert did.',
        labelNames: ['outcome'],
        registers: [registry],
      })
    : undefined;
  return async (ctx, kymaName, change) => {
    const result = await revertDrift(ctx, kymaName, change);
    if (!result) return undefined;
    reverts?.inc({ outcome: result.outcome.replace('-', '_') });
    // One line per callback about an installed object: the webhook sends only writes that look like drift.
    ctx.logger.info(
      {
        kyma: kymaName,
        gvk: change.gvk,
        namespace: change.namespace,
        name: change.name,
        outcome: result.outcome,
        manifest: result.manifest,
        reads: result.reads,
        receivedAt: change.receivedAtMs,
        ...result.steps,
        doneAt: Date.now(),
      },
      'drift callback handled',
    );
    return result;
  };
}

function sameObject(entry: SyncedObject, change: ModuleCrChange): boolean {
  return (
    entry.group === change.gvk.group &&
    entry.kind === change.gvk.kind &&
    entry.name === change.name &&
    entry.namespace === change.namespace
  );
}

/** The Manifest of the Kyma whose `status.synced` holds the object; undefined: no module installed it. */
async function manifestHolding(
  ctx: ReconcileContext,
  kymaName: string,
  change: ModuleCrChange,
): Promise<Manifest | undefined> {
  for (const manifest of (await manifestsOf(ctx, kymaName)).values()) {
    if ((manifest.status?.synced ?? []).some((entry) => sameObject(entry, change))) return manifest;
  }
  return undefined;
}

/**
 * Undefined when the object is no module's (the caller's other paths decide). An object the SKR refuses is
 * `failed`; an SKR that cannot be reached throws. Either way the full pass follows and retries with backoff.
 */
export async function revertDrift(
  ctx: ReconcileContext,
  kymaName: string,
  change: ModuleCrChange,
): Promise<DriftResult | undefined> {
  const installation = ctx.modules;
  if (!installation) return undefined;
  const steps: DriftSteps = { startedAt: Date.now() };
  const manifest = await manifestHolding(ctx, kymaName, change);
  if (!manifest) return undefined;
  steps.foundAt = Date.now();
  const namespace = manifest.metadata.namespace ?? ctx.namespace;
  const result = (outcome: DriftOutcome, reads = 0): DriftResult => ({
    outcome,
    manifest: `${namespace}/${manifest.metadata.name}`,
    reads,
    steps,
  });
  if (
    manifest.metadata.deletionTimestamp ||
    manifest.metadata.labels?.[LABELS.skipReconciliation] === 'true' ||
    manifest.metadata.annotations?.[ANNOTATIONS.isUnmanaged] === 'true'
  )
    return result('skipped');
  const lookup = await ctx.skrClients.forKyma(kymaName);
  if (!lookup) return result('skipped');
  const objects = lookup.client.objects;
  const { group, version, kind } = change.gvk;
  const ref: ObjectRef = {
    apiVersion: group ? `${group}/${version}` : version,
    kind,
    name: change.name,
    ...(change.namespace ? { namespace: change.namespace } : {}),
  };
  const shown = await readUntilShown(ctx, objects, ref, change);
  if (!shown.shown) return result('not-shown', shown.reads);
  steps.shownAt = Date.now();

  const members = setMembers(await installation.objects(manifest), `Manifest ${manifest.metadata.name}`);
  const desired = members.find((member) => {
    const entry = syncedObjectOf(member);
    return sameObject(
      { ...entry, namespace: entry.namespace || (change.namespace === 'default' ? 'default' : '') },
      change,
    );
  });
  if (!desired) return result('skipped', shown.reads);
  steps.renderedAt = Date.now();
  const transforms = manifestTransforms(manifest, namespace, installation);
  // Another uid than the callback's: the object was deleted, and a full pass running meanwhile re-created it.
  const uid = change.fingerprint.uid;
  const before = uid && shown.object?.metadata?.uid !== uid ? undefined : shown.object;
  // Drift is what the SKR held against what the module sets: a field the module does not set is not drift, and a
  // default the API server filled in is not either. (An edit that a full pass running at that moment put back
  // before this read is reverted without an Event.)
  const drifted = !before || !holds(before, transformed(desired, transforms));
  const applied = await applyObjectSet(
    lookup.client,
    // One object, nothing pruned; the Manifest's inventory says which objects it held before holder names.
    { objects: [{ object: desired }], inventory: [], recorded: manifest.status?.synced ?? [] },
    {
      fieldManager: MANIFEST.applyFieldManager,
      transforms,
      // Only what this Manifest holds is put back: an object another module holds stays that module's.
      holding: { self: manifestHolder(namespace, manifest.metadata.name) },
    },
  );
  steps.appliedAt = Date.now();
  const member = applied.results[0];
  if (member?.outcome !== 'applied' && member?.outcome !== 'adopted') {
    ctx.logger.info(
      { kyma: kymaName, manifest: manifest.metadata.name, ref, message: member?.message },
      'drift: targeted revert did not apply; the full pass follows',
    );
    return result('failed', shown.reads);
  }
  if (!drifted) return result('in-place', shown.reads);
  const what = `${kind} ${change.namespace ? `${change.namespace}/` : ''}${change.name}`;
  const message = before
    ? `${what} was changed in the SKR; put back as Manifest ${namespace}/${manifest.metadata.name} installs it`
    : `${what} was deleted in the SKR; re-created as Manifest ${namespace}/${manifest.metadata.name} installs it`;
  await ctx.events.normal({ namespace: ctx.namespace, name: kymaName }, DRIFT_EVENT_REASON, message);
  steps.recordedAt = Date.now();
  return result('reverted', shown.reads);
}

/**
 * Whether `live` holds every value of `wanted` (objects: each key of `wanted`, recursively; arrays: same length,
 * element by element). Iterative: depth comes from the SKR and the module's manifest, not from this call stack.
 */
export function holds(live: unknown, wanted: unknown): boolean {
  const pending: unknown[] = [live, wanted];
  while (pending.length > 0) {
    const want = pending.pop();
    const have = pending.pop();
    if (want === have) continue;
    if (typeof want !== 'object' || typeof have !== 'object' || want === null || have === null) return false;
    if (Array.isArray(want)) {
      if (!Array.isArray(have) || have.length !== want.length) return false;
      for (let index = 0; index < want.length; index++) pending.push(have[index], want[index]);
      continue;
    }
    if (Array.isArray(have)) return false;
    for (const [key, value] of Object.entries(want)) {
      if (!Object.hasOwn(have, key)) {
        if (isEmpty(value)) continue;
        return false;
      }
      pending.push((have as Record<string, unknown>)[key], value);
    }
  }
  return true;
}

/** The API server leaves out empty maps and lists (omitempty): a module's `data: {}` reads back as nothing. */
function isEmpty(value: unknown): boolean {
  return typeof value === 'object' && value !== null && Object.keys(value).length === 0;
}

/**
 * Validating admission runs before the API server stores the write: re-read on a short backoff until the object
 * shows what the callback announced (decision 010), within MODULE_MIRROR's bound.
 */
async function readUntilShown(
  ctx: ReconcileContext,
  objects: Parameters<typeof readObject>[0],
  ref: ObjectRef,
  change: ModuleCrChange,
): Promise<{ shown: boolean; object: KubernetesObject | undefined; reads: number }> {
  const started = Date.now();
  for (let reads = 1; ; reads++) {
    const object = await readObject(objects, ref);
    if (showsChange(change.fingerprint, object)) return { shown: true, object, reads };
    const delay = backoffDelay(reads, MODULE_MIRROR.rereadInitialMs, MODULE_MIRROR.rereadMaxMs);
    if (Date.now() + delay - started > MODULE_MIRROR.rereadBoundMs) return { shown: false, object, reads };
    ctx.logger.debug({ ref, reads, delayMs: delay }, 'drift: the SKR does not show the announced write yet');
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}
