// Applying a set of objects to an SKR: transforms, namespaces set against the SKR's discovery, the caller's guard,
// then server-side apply (named field manager, forced, managedFields cleared) in three phases: CRDs and
// Namespaces, then (once the set's CRDs are Established) everything else, then webhook configurations. Only when
// every object of the new set is in place are the objects that left the set removed (delete-set.ts): during an
// upgrade there is no moment without the old objects that the new set still needs. The result says, per object,
// what happened, and gives the inventory the caller records (`status.synced`).
import type { KubernetesObject } from '@kubernetes/client-node';
import { HOLDER_MARKS, isRecord } from '@skr-watcher/api';
import { apiErrorCode, applyObject, createIfAbsent, isUnreachable, readObject } from '../apply.js';
import type { ClusterClient } from '../cluster-client.js';
import { mapLimited } from './concurrency.js';
import { removeObjects, type RemovalResult } from './delete-set.js';
import { writeClaim, type Holding } from './holders.js';
import {
  describeSynced,
  leftTheSet,
  syncedKey,
  syncedObjectOf,
  uniqueSynced,
  type SetMember,
  type SyncedObject,
} from './inventory.js';
import { applyPhaseOf, isCrd, neverPruned, type ApplyPhase } from './order.js';
import { nextPollMs } from './poll.js';
import { transformed, type Transform } from './transforms.js';

/** One object the set should hold. */
export interface DesiredObject {
  object: SetMember;
  /**
   * `apply` (default): server-side apply, so drift is reverted on every pass. `create`: created when absent and
   * then left to the SKR's users; with `createdBefore`, an object that was created once and is gone now stays gone
   * (the user's deletion stands).
   */
  mode?: 'apply' | 'create';
  createdBefore?: boolean;
}

export type MemberOutcome =
  'applied' | 'adopted' | 'created' | 'present' | 'left' | 'failed' | 'refused' | 'waiting';

export interface MemberResult {
  /** Identity as applied (namespace set against the SKR's discovery). */
  object: SyncedObject;
  /**
   * `applied`, `created`; `adopted`: applied to an object that existed before and that nobody held (it is let go,
   * not deleted, when the set removes it); `present`: create mode, the object exists and is left as it is; `left`: create mode,
   * created once and deleted since, not recreated; `failed` (message says why); `refused` by the caller's guard;
   * `waiting`: not applied yet because a CRD of the set is not Established.
   */
  outcome: MemberOutcome;
  message: string;
}

export interface ObjectSetOptions {
  fieldManager: string;
  /** Run on every object, in order, before anything else (transforms.ts). */
  transforms?: readonly Transform[];
  /** Why the set must not touch this object (write or delete); undefined when it may. Checked per object. */
  refuse?: (object: SyncedObject) => string | undefined;
  /**
   * Who this set is (holders.ts): with it, each object is read before it is written or removed, and an object
   * another holder names is refused and left to it. Without it, objects are written and removed unread.
   */
  holding?: Holding;
  /** Requests in flight at once for this set (default 4). */
  concurrency?: number;
  /** How long a pass waits for the set's CRDs to become Established before it reports "waiting" (default 10 s). */
  establishTimeoutMs?: number;
}

export interface ApplySetRequest {
  objects: readonly DesiredObject[];
  /** What the caller recorded last time (`status.synced`). */
  inventory: readonly SyncedObject[];
  /** Objects not in the new set that must not be removed now (e.g. what a malformed item applied before). */
  keep?: readonly SyncedObject[];
  /** What the set recorded as its own, for the holder check (holders.ts); default `inventory`. Never pruned. */
  recorded?: readonly SyncedObject[];
}

export type SetState = 'done' | 'waiting' | 'failed';

export interface ApplySetResult {
  /** `done`: every object in place and everything that left the set gone; `waiting`: CRDs not yet Established or
   * removals not finished (come back later); `failed`: some object failed (see results), nothing was pruned. */
  state: SetState;
  /** One per desired object, in the order given. */
  results: MemberResult[];
  /** One per object that left the set; empty when pruning did not run (the new set is not in place). */
  pruned: RemovalResult[];
  /** The inventory to record now: the objects of the new set and those that left it but may still exist. */
  inventory: SyncedObject[];
}

interface Prepared {
  index: number;
  desired: DesiredObject;
  body: SetMember;
  phase: ApplyPhase;
}

/**
 * Re-reads of a CRD not yet Established (or of a kind not served yet): soon at first, since the API server sets the
 * condition within tens of milliseconds and every one waited past it delays the module's install, then backing off
 * so a slow CRD costs no more than a read per 250 ms.
 */
export const ESTABLISH_POLL = { firstMs: 10, maxMs: 250 } as const;

/** The wait before the next re-read, after waiting `previousMs` (0 before the first). */
export function nextEstablishPollMs(previousMs: number): number {
  return nextPollMs(previousMs, ESTABLISH_POLL);
}

/** Objects transformed per slice before yielding (each is a deep copy). */
const PREPARE_SLICE = 50;

/** Brings the SKR to hold exactly `request.objects` of this set (see the file comment). */
export async function applyObjectSet(
  skr: ClusterClient,
  request: ApplySetRequest,
  options: ObjectSetOptions,
): Promise<ApplySetResult> {
  const concurrency = options.concurrency ?? 4;
  const results: MemberResult[] = new Array(request.objects.length);
  const prepared: Prepared[] = [];
  for (const [index, desired] of request.objects.entries()) {
    // A large set is prepared in slices: other Kymas' work gets the event loop between them.
    if (index > 0 && index % PREPARE_SLICE === 0) await new Promise((resolve) => setImmediate(resolve));
    try {
      const body = transformed(desired.object, options.transforms ?? []);
      const { group, kind } = syncedObjectOf(body);
      prepared.push({ index, desired, body, phase: applyPhaseOf({ group, kind }) });
    } catch (error) {
      results[index] = {
        object: syncedObjectOf(desired.object),
        outcome: 'failed',
        message: messageOf(error),
      };
    }
  }

  const recorded = new Set((request.recorded ?? request.inventory).map(syncedKey));
  const foundation = prepared.filter((item) => item.phase === 'foundation');
  await applyPhase(skr, foundation, results, options, concurrency, recorded);
  const establishMs = options.establishTimeoutMs ?? 10_000;
  const { waitingFor, fresh } = await crdsOfTheSet(skr, foundation, results, establishMs);
  // Kinds of CRDs just Established: discovery and storage may lag a moment behind the condition.
  const freshUntil = Date.now() + establishMs;
  for (const phase of ['workload', 'webhooks'] as const) {
    const members = prepared.filter((item) => item.phase === phase);
    const ready: Prepared[] = [];
    for (const item of members) {
      const crd = waitingFor.get(`${syncedObjectOf(item.body).group}/${item.body.kind}`);
      if (crd)
        results[item.index] = {
          object: syncedObjectOf(item.body),
          outcome: 'waiting',
          message: `waits for CRD ${crd} to be Established`,
        };
      else ready.push(item);
    }
    await applyPhase(skr, ready, results, options, concurrency, recorded, {
      kinds: fresh,
      until: freshUntil,
    });
  }

  const applied = results.filter(
    (result) => result.outcome !== 'failed' && result.outcome !== 'refused' && result.outcome !== 'waiting',
  );
  const previous = uniqueSynced(request.inventory);
  const refusedKeys = new Set(
    results.filter((result) => result.outcome === 'refused').map((result) => syncedKey(result.object)),
  );
  const inPlace = results.every((result) => result.outcome !== 'failed' && result.outcome !== 'waiting');
  const nextMembers = [...applied.map((result) => result.object), ...(request.keep ?? [])];
  if (!inPlace) {
    // Nothing leaves the inventory while the new set is not in place: what failed may still need the old objects.
    const kept = previous.filter((entry) => !refusedKeys.has(syncedKey(entry)));
    return {
      state: results.some((result) => result.outcome === 'failed') ? 'failed' : 'waiting',
      results,
      pruned: [],
      inventory: uniqueSynced([...nextMembers, ...kept]),
    };
  }
  const stay = [...nextMembers, ...results.map((result) => result.object)];
  // A record without a namespace names the object in `default` (where the API server put it): not a different one.
  const gone = leftTheSet(previous, [
    ...stay,
    ...stay.filter((entry) => entry.namespace === 'default').map((entry) => ({ ...entry, namespace: '' })),
  ]);
  const removal = await removeObjects(skr, gone, {
    refuse: options.refuse,
    concurrency,
    ...(options.holding ? { holding: options.holding } : {}),
  });
  return {
    state: removal.finished ? 'done' : 'waiting',
    results,
    pruned: removal.results,
    inventory: uniqueSynced([...nextMembers, ...removal.remaining]),
  };
}

async function applyPhase(
  skr: ClusterClient,
  items: readonly Prepared[],
  results: MemberResult[],
  options: ObjectSetOptions,
  concurrency: number,
  recorded: ReadonlySet<string>,
  fresh: { kinds: ReadonlySet<string>; until: number } = { kinds: new Set(), until: 0 },
): Promise<void> {
  const outcomes = await mapLimited(items, concurrency, async (item) => {
    const kind = `${syncedObjectOf(item.body).group}/${item.body.kind}`;
    try {
      for (let pollMs = 0; ;) {
        try {
          return { item, result: await applyOne(skr, item, options, recorded) };
        } catch (error) {
          if (!fresh.kinds.has(kind) || !notServedYet(error)) throw error;
          if (Date.now() >= fresh.until)
            return {
              item,
              result: {
                object: syncedObjectOf(item.body),
                outcome: 'waiting' as const,
                message: `waits until the SKR serves ${item.body.kind} in ${item.body.apiVersion} (its CRD is Established)`,
              },
            };
          pollMs = nextEstablishPollMs(pollMs);
          await new Promise((resolve) => setTimeout(resolve, pollMs));
        }
      }
    } catch (error) {
      if (isUnreachable(error)) return { item, unreachable: error };
      return {
        item,
        result: { object: syncedObjectOf(item.body), outcome: 'failed' as const, message: messageOf(error) },
      };
    }
  });
  for (const outcome of outcomes) {
    // An SKR that stopped answering fails the whole pass, as any other unreachable cluster does.
    if ('unreachable' in outcome) throw outcome.unreachable;
    results[outcome.item.index] = outcome.result;
  }
}

async function applyOne(
  skr: ClusterClient,
  item: Prepared,
  options: ObjectSetOptions,
  recorded: ReadonlySet<string>,
): Promise<MemberResult> {
  let body = await withNamespaceOfKind(skr, item.body);
  const object = syncedObjectOf(body);
  const what = describeSynced(object);
  const refusal = options.refuse?.(object);
  if (refusal) return { object, outcome: 'refused', message: refusal };
  let adopted = false;
  let live: KubernetesObject | undefined;
  // The Namespace every module lives in is shared: nobody holds it, no set removes it (order.ts).
  if (options.holding && !neverPruned(object)) {
    live = await readObject(skr.objects, refFor(body));
    const claim = writeClaim(live, options.holding, recorded.has(syncedKey(object)));
    if (claim.verdict === 'refuse')
      return {
        object,
        outcome: 'refused',
        message: `${what} is held by ${claim.holder}; refused, the holder keeps it`,
      };
    adopted = claim.verdict === 'adopt';
  }
  if (item.desired.mode === 'create') {
    const existing =
      options.holding && !neverPruned(object) ? live : await readObject(skr.objects, refFor(body));
    if (existing) return { object, outcome: 'present', message: `${what} exists; left to the SKR` };
    if (item.desired.createdBefore)
      return { object, outcome: 'left', message: `${what} was created once; not recreated` };
    const created = await createIfAbsent(skr.objects, writable(body), options.fieldManager);
    return created
      ? { object, outcome: 'created', message: `created ${what}` }
      : { object, outcome: 'present', message: `${what} exists; left to the SKR` };
  }
  if (adopted)
    body = {
      ...body,
      metadata: {
        ...body.metadata,
        annotations: { ...body.metadata.annotations, [HOLDER_MARKS.adoptedAnnotation]: 'true' },
      },
    };
  await applyObject(skr.objects, writable(body), { fieldManager: options.fieldManager, force: true });
  return adopted
    ? {
        object,
        outcome: 'adopted',
        message: `${what} existed before the install; adopted, and left with its data when the set is removed`,
      }
    : { object, outcome: 'applied', message: `applied ${what}` };
}

/**
 * The object with its namespace as the SKR's discovery says: a namespaced kind without a namespace goes to
 * `default` (as kubectl and upstream do), a cluster-scoped kind loses a stray one. A kind the SKR does not serve
 * fails this object only.
 */
async function withNamespaceOfKind(skr: ClusterClient, body: SetMember): Promise<SetMember> {
  let resource;
  try {
    resource = await skr.objects.discover(body.apiVersion, body.kind);
  } catch (error) {
    if (isUnreachable(error)) throw error;
    throw new KindNotServedError(`the SKR serves no ${body.kind} in ${body.apiVersion}`, { cause: error });
  }
  if (!resource) throw new KindNotServedError(`the SKR serves no ${body.kind} in ${body.apiVersion}`);
  const { namespace, ...metadata } = body.metadata;
  if (resource.namespaced) return { ...body, metadata: { ...metadata, namespace: namespace || 'default' } };
  return namespace === undefined ? body : { ...body, metadata };
}

class KindNotServedError extends Error {
  override name = 'KindNotServedError';
}

/** What a kind whose CRD was Established a moment ago may answer for a while: discovery without it, 404 or 429. */
function notServedYet(error: unknown): boolean {
  const code = apiErrorCode(error);
  return error instanceof KindNotServedError || code === 429 || code === 404;
}

function refFor(body: SetMember) {
  return {
    apiVersion: body.apiVersion,
    kind: body.kind,
    name: body.metadata.name,
    ...(body.metadata.namespace ? { namespace: body.metadata.namespace } : {}),
  };
}

/** What the API server must not be sent: server-owned metadata (managedFields cleared, as upstream does). */
function writable(body: SetMember): SetMember {
  const metadata: Record<string, unknown> = { ...body.metadata };
  for (const key of [
    'managedFields',
    'resourceVersion',
    'uid',
    'creationTimestamp',
    'generation',
    'selfLink',
    'deletionTimestamp',
    'deletionGracePeriodSeconds',
  ])
    delete metadata[key];
  return { ...body, metadata: metadata as unknown as SetMember['metadata'] };
}

/**
 * Waits (bounded) until every CRD the set applied in this pass is Established; returns, by `group/kind`, the CRDs
 * that are not (`waitingFor`), so objects of those kinds wait for the next pass instead of failing, and the kinds of
 * those that are (`fresh`).
 */
async function crdsOfTheSet(
  skr: ClusterClient,
  foundation: readonly Prepared[],
  results: readonly MemberResult[],
  timeoutMs: number,
): Promise<{ waitingFor: Map<string, string>; fresh: Set<string> }> {
  const crds = foundation.filter((item) => isCrd(syncedObjectOf(item.body)));
  const waiting = new Map<string, string>();
  const fresh = new Set<string>();
  for (const item of crds) {
    const spec = isRecord(item.body['spec']) ? item.body['spec'] : {};
    const names = isRecord(spec['names']) ? spec['names'] : {};
    const servedKind = `${String(spec['group'])}/${String(names['kind'])}`;
    if (
      results[item.index]?.outcome !== 'applied' &&
      results[item.index]?.outcome !== 'adopted' &&
      results[item.index]?.outcome !== 'created' &&
      results[item.index]?.outcome !== 'present'
    ) {
      waiting.set(servedKind, item.body.metadata.name);
      continue;
    }
    const deadline = Date.now() + timeoutMs;
    for (let pollMs = 0; ;) {
      const crd = await readObject(skr.objects, refFor(item.body));
      if (established(crd)) {
        fresh.add(servedKind);
        break;
      }
      if (Date.now() >= deadline) {
        waiting.set(servedKind, item.body.metadata.name);
        break;
      }
      pollMs = nextEstablishPollMs(pollMs);
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }
  return { waitingFor: waiting, fresh };
}

function established(crd: unknown): boolean {
  if (!isRecord(crd) || !isRecord(crd['status'])) return false;
  const conditions = crd['status']['conditions'];
  return (
    Array.isArray(conditions) &&
    conditions.some(
      (condition) =>
        isRecord(condition) && condition['type'] === 'Established' && condition['status'] === 'True',
    )
  );
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
