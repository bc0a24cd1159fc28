// Drift put back at once: a callback about an object a module installed (the SKR webhook watches them by
// their `managed-by: kyma` label) re-applies that object from its Manifest's rendered set now, records an Event on
// the Kyma naming what was put back, and the Kyma's full pass follows at once (router.ts), which
// re-applies the whole set as every pass does. Reverts of one object are paced: something in the SKR that keeps
// changing it costs one targeted revert and one Event per window, the windows doubling up to DRIFT_PACING.maxMs; a
// callback inside a window is `deferred` and wakes no full pass (the Kyma's scheduled passes put the object back).
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  ANNOTATIONS,
  LABELS,
  MANIFEST,
  MODULE_MIRROR,
  backoffDelay,
  formatDuration,
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
import { dataToInject, InjectDataFromKcpError } from '../reconcile/manifests/inject-data-from-kcp.js';
import { manifestTransforms, setMembers } from '../reconcile/manifests/install.js';
import { manifestsOf } from '../reconcile/manifests/manifests-of-kyma.js';
import type { ModuleCrChange } from '../reconcile/modules/mirror-lanes.js';

/**
 * reverted: the SKR held something else than the module sets (or nothing) and the object was applied again;
 * in-place: the SKR held what the module sets (the write touched only fields the module does not set); not-shown: the announced write never showed; skipped: the
 * Manifest is being removed, paused or unmanaged, or its set no longer holds the object (the full pass decides);
 * failed: the apply failed (the full pass retries with backoff and status); deferred: the object was put back
 * moments ago and its next targeted revert is not due yet (the full pass puts it back).
 */
export type DriftOutcome = 'reverted' | 'in-place' | 'not-shown' | 'skipped' | 'failed' | 'deferred';

export interface DriftResult {
  outcome: DriftOutcome;
  /** `namespace/name` of the Manifest whose set holds the object. */
  manifest: string;
  /** SKR reads until the announced write showed. */
  reads: number;
  /** Epoch ms at the end of each step, for the log line bench:drift reads to say where a revert's time goes. */
  steps: DriftSteps;
  /** `reverted` only: the SKR no longer held the object, so it was created again. */
  recreated?: boolean;
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

/** How targeted reverts of one object are paced (in the replica's memory: a restart starts every object afresh). */
export interface DriftPacing {
  /** The wait after the first revert of a streak; it doubles with each further revert. */
  initialMs: number;
  /** The longest wait between two targeted reverts of one object. */
  maxMs: number;
  /** A streak ends once no callback about the object came for this long: its next revert is at once again. */
  quietMs: number;
  /** Objects whose streak is kept at most; the one whose last callback is oldest is forgotten first. */
  maxObjects: number;
}

/**
 * A writer fighting the agent every second costs 1 s, 2 s, 4 s … 5 min apart one targeted revert and one Event
 * each, not one per write; quiet twice the longest wait, an object's next edit is put back at once again.
 */
export const DRIFT_PACING: DriftPacing = {
  initialMs: 1_000,
  maxMs: 5 * 60_000,
  quietMs: 10 * 60_000,
  maxObjects: 10_000,
};

export interface DriftReverterOptions {
  /** Epoch ms now (default: the reconcile context's clock). */
  now?: () => number;
  pacing?: Partial<DriftPacing>;
}

export type DriftReverter = (
  ctx: ReconcileContext,
  kymaName: string,
  change: ModuleCrChange,
) => Promise<DriftResult | undefined>;

/** `revertDrift` paced per object, counted in `skr_agent_drift_reverts_total{outcome}` when a registry is given. */
export function createDriftReverter(registry?: Registry, options: DriftReverterOptions = {}): DriftReverter {
  const reverts = registry
    ? new Counter({
        name: 'skr_agent_drift_reverts_total',
        help: 'Callbacks about objects a module installed, by what the targeted revert did.',
        labelNames: ['outcome'],
        registers: [registry],
      })
    : undefined;
  const streaks = new DriftStreaks({ ...DRIFT_PACING, ...options.pacing });
  return async (ctx, kymaName, change) => {
    const now = options.now ?? (() => ctx.clock().getTime());
    const key = `${ctx.namespace}/${kymaName}\0${objectKey(change)}`;
    const result = await revertDrift(ctx, kymaName, change, () => streaks.admit(key, now()));
    if (!result) return undefined;
    if (result.outcome === 'reverted') {
      await recordRevert(ctx, kymaName, change, result, streaks.reverted(key, now()));
    }
    reverts?.inc({ outcome: result.outcome.replace('-', '_') });
    const line = {
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
    };
    // One line per callback about an installed object (the webhook sends only writes that look like drift); a
    // deferred one only at debug, so a writer fighting the agent does not write a line a second either.
    if (result.outcome === 'deferred') ctx.logger.debug(line, 'drift callback deferred');
    else ctx.logger.info(line, 'drift callback handled');
    return result;
  };
}

/** What the Event about a revert stands for: this revert and the callbacks deferred since the last Event. */
export interface RevertFold {
  /** The first revert of a streak: the object had been quiet. */
  first: boolean;
  /** Callbacks folded: this revert's and the deferred ones. */
  writes: number;
  /** Since the last Event about the object. */
  sinceMs: number;
  /** Until the object's next targeted revert is due. */
  nextInMs: number;
}

interface Streak {
  /** Targeted reverts let through in this streak: the backoff's attempt number. */
  attempts: number;
  /** Epoch ms before which a callback about the object is deferred. */
  dueAt: number;
  /** Epoch ms of the last callback about the object. */
  seenAt: number;
  /** Callbacks deferred since the last Event. */
  deferred: number;
  /** Epoch ms of the last Event about the object. */
  reportedAt: number;
}

/**
 * Per-object streaks of targeted reverts, oldest callback first (a Map keeps insertion order): bounded by
 * `maxObjects`, and each callback drops the streaks at the front that have been quiet.
 */
export class DriftStreaks {
  private readonly streaks = new Map<string, Streak>();

  constructor(private readonly pacing: DriftPacing) {}

  get size(): number {
    return this.streaks.size;
  }

  /** Whether a targeted revert of the object may run at `now`; one not due yet is counted as deferred. */
  admit(key: string, now: number): boolean {
    const streak = this.current(key, now);
    if (!streak) return true;
    const due = now >= streak.dueAt;
    if (due) {
      // Taken at once, so a second callback about the object that arrives meanwhile is deferred.
      streak.attempts += 1;
      streak.dueAt = now + this.delay(streak.attempts);
    } else streak.deferred += 1;
    this.touch(key, streak, now);
    return due;
  }

  /** The object was put back at `now`: what its Event folds. An object not in a streak starts one. */
  reverted(key: string, now: number): RevertFold {
    const streak = this.current(key, now);
    if (!streak) {
      const started = { attempts: 1, dueAt: now + this.delay(1), seenAt: now, deferred: 0, reportedAt: now };
      this.touch(key, started, now);
      return { first: true, writes: 1, sinceMs: 0, nextInMs: started.dueAt - now };
    }
    const fold = {
      first: false,
      writes: streak.deferred + 1,
      sinceMs: now - streak.reportedAt,
      nextInMs: Math.max(0, streak.dueAt - now),
    };
    streak.deferred = 0;
    streak.reportedAt = now;
    this.touch(key, streak, now);
    return fold;
  }

  private delay(attempt: number): number {
    return backoffDelay(attempt, this.pacing.initialMs, this.pacing.maxMs, () => 1);
  }

  private current(key: string, now: number): Streak | undefined {
    const streak = this.streaks.get(key);
    if (streak && now - streak.seenAt >= this.pacing.quietMs) {
      this.streaks.delete(key);
      return undefined;
    }
    return streak;
  }

  private touch(key: string, streak: Streak, now: number): void {
    streak.seenAt = now;
    this.streaks.delete(key);
    this.streaks.set(key, streak);
    for (const [oldest, entry] of this.streaks) {
      if (this.streaks.size <= this.pacing.maxObjects && now - entry.seenAt < this.pacing.quietMs) break;
      this.streaks.delete(oldest);
    }
  }
}

/** `group/kind/namespace/name`: one object whatever version the callback names. */
function objectKey(change: ModuleCrChange): string {
  return `${change.gvk.group}/${change.gvk.kind}/${change.namespace}/${change.name}`;
}

/** `ConfigMap kyma-system/name`, as the Events name an object. */
function describedObject(change: ModuleCrChange): string {
  return `${change.gvk.kind} ${change.namespace ? `${change.namespace}/` : ''}${change.name}`;
}

/** Whole seconds, at least one: `4m16s`. */
function roughly(ms: number): string {
  return formatDuration(Math.max(1, Math.round(ms / 1_000)) * 1_000);
}

/** The Event text of a revert: the first of a streak says what happened, a later one how often since the last. */
export function revertMessage(what: string, manifest: string, recreated: boolean, fold: RevertFold): string {
  if (fold.first) {
    return recreated
      ? `${what} was deleted in the SKR; re-created as Manifest ${manifest} installs it`
      : `${what} was changed in the SKR; put back as Manifest ${manifest} installs it`;
  }
  const times = fold.writes === 1 ? 'once' : `${fold.writes} times`;
  return (
    `${what} was changed in the SKR ${times} in the last ${roughly(fold.sinceMs)}; put back as Manifest ` +
    `${manifest} installs it. Something in the SKR keeps changing it: its next targeted revert waits ` +
    `${roughly(fold.nextInMs)}, the Kyma's full pass puts it back meanwhile`
  );
}

/** One Event per object on the Kyma: each revert's record raises its count by the callbacks it folds. */
async function recordRevert(
  ctx: ReconcileContext,
  kymaName: string,
  change: ModuleCrChange,
  result: DriftResult,
  fold: RevertFold,
): Promise<void> {
  const message = revertMessage(describedObject(change), result.manifest, result.recreated === true, fold);
  await ctx.events.normal({ namespace: ctx.namespace, name: kymaName }, DRIFT_EVENT_REASON, message, {
    key: objectKey(change),
    count: fold.writes,
  });
  result.steps.recordedAt = Date.now();
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
 * `isDue` is asked once the object is known to be a module's: false defers it without a request to the SKR.
 */
export async function revertDrift(
  ctx: ReconcileContext,
  kymaName: string,
  change: ModuleCrChange,
  isDue: () => boolean = () => true,
): Promise<DriftResult | undefined> {
  const installation = ctx.modules;
  if (!installation) return undefined;
  const steps: DriftSteps = { startedAt: Date.now() };
  const manifest = await manifestHolding(ctx, kymaName, change);
  if (!manifest) return undefined;
  steps.foundAt = Date.now();
  const namespace = manifest.metadata.namespace ?? ctx.namespace;
  const result = (outcome: DriftOutcome, reads = 0, recreated?: boolean): DriftResult => ({
    outcome,
    manifest: `${namespace}/${manifest.metadata.name}`,
    reads,
    steps,
    ...(recreated === undefined ? {} : { recreated }),
  });
  if (
    manifest.metadata.deletionTimestamp ||
    manifest.metadata.labels?.[LABELS.skipReconciliation] === 'true' ||
    manifest.metadata.annotations?.[ANNOTATIONS.isUnmanaged] === 'true'
  )
    return result('skipped');
  if (!isDue()) return result('deferred');
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
  // The deployer's Secret is put back with the KCP's data, as the full pass applies it; a KCP Secret gone wrong is
  // the full pass's to report.
  let injected;
  try {
    injected = await dataToInject(ctx.kcp, ctx.namespace, manifest, installation, [desired]);
  } catch (error) {
    if (error instanceof InjectDataFromKcpError) return result('failed', shown.reads);
    throw error;
  }
  steps.renderedAt = Date.now();
  const transforms = manifestTransforms(manifest, namespace, installation, injected);
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
  return result('reverted', shown.reads, !before);
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
