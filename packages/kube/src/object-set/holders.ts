// Who holds an object in an SKR (decision 026). Every object a set writes names its holder on itself: a module's by
// upstream's marks (`managed-by: kyma` and the owned-by annotation, `<namespace>/<Manifest>`), a SyncResource's by
// `managed-by: skr-watcher` and the sync-resource annotation. Before a set writes or deletes an object it reads it
// and asks here what it may do: an object another holder names is refused and left to that holder; one nobody
// names existed before (the SKR's user made it) and is adopted, which the object then says, so that removing the
// set lets it go with its data instead of deleting it. Pure: the reads and writes are the engine's.
import type { KubernetesObject } from '@kubernetes/client-node';
import { HOLDER_MARKS, MANAGED_BY } from '@skr-watcher/api';
import { MODULE_OBJECT_METADATA } from './transforms.js';

/** How a set names itself in its objects' marks and in messages: `Manifest kcp-system/a`, `SyncResource kcp-system/s`. */
export interface Holding {
  self: string;
  /**
   * What becomes of an object nobody holds when the set removes it: `keep` (default: it was adopted or made by the
   * SKR's user; let go with its data) or `delete` (a SyncResource's Delete item, whose job is to remove it).
   */
  unheld?: 'keep' | 'delete';
}

export function manifestHolder(namespace: string, name: string): string {
  return `Manifest ${namespace}/${name}`;
}

export function syncResourceHolder(namespace: string, name: string): string {
  return `SyncResource ${namespace}/${name}`;
}

/**
 * The holder the live object names; `''` when it carries a set's label but no name (written before names were
 * recorded), undefined when it carries none.
 */
export function holderNamedBy(live: KubernetesObject): string | undefined {
  const managedBy = live.metadata?.labels?.[MODULE_OBJECT_METADATA.managedByLabel];
  const annotations = live.metadata?.annotations ?? {};
  if (managedBy === MODULE_OBJECT_METADATA.managedByValue) {
    const owner = annotations[MODULE_OBJECT_METADATA.ownedByAnnotation];
    return owner ? `Manifest ${owner}` : '';
  }
  if (managedBy === MANAGED_BY) {
    const owner = annotations[HOLDER_MARKS.syncResourceAnnotation];
    return owner ? `SyncResource ${owner}` : '';
  }
  return undefined;
}

export function isAdopted(live: KubernetesObject): boolean {
  return live.metadata?.annotations?.[HOLDER_MARKS.adoptedAnnotation] === 'true';
}

/** What a set may do with an object before it writes it. */
export type WriteClaim =
  /** Absent, or this set's: write it. */
  | { verdict: 'hold' }
  /** Nobody's, or this set's after an adoption: write it with the adopted mark. */
  | { verdict: 'adopt' }
  /** Another holder's: leave it. */
  | { verdict: 'refuse'; holder: string };

/**
 * `inInventory`: the set recorded the object as its own last time, which is how an object written before holder
 * names were recorded is still recognised as the set's.
 */
export function writeClaim(
  live: KubernetesObject | undefined,
  holding: Holding,
  inInventory: boolean,
): WriteClaim {
  if (live === undefined) return { verdict: 'hold' };
  const holder = holderNamedBy(live);
  if (holder === holding.self) return isAdopted(live) ? { verdict: 'adopt' } : { verdict: 'hold' };
  if (holder === '') return inInventory ? { verdict: 'hold' } : { verdict: 'refuse', holder: 'another set' };
  if (holder !== undefined) return { verdict: 'refuse', holder };
  return { verdict: 'adopt' };
}

/** What a set removing an object does with it. */
export type RemoveClaim =
  | { verdict: 'delete' }
  /** Adopted by this set: the marks go, the object and its data stay. */
  | { verdict: 'release' }
  /** Another holder's, or nobody's: left as it is. */
  | { verdict: 'leave'; why: string };

export function removeClaim(live: KubernetesObject, holding: Holding): RemoveClaim {
  const holder = holderNamedBy(live);
  if (holder === holding.self) return isAdopted(live) ? { verdict: 'release' } : { verdict: 'delete' };
  // Recorded in this set's inventory (removal works from it) and marked by a set without a name: written before
  // holder names were recorded.
  if (holder === '') return { verdict: 'delete' };
  if (holder !== undefined) return { verdict: 'leave', why: `is held by ${holder}; left to it` };
  if (holding.unheld === 'delete') return { verdict: 'delete' };
  return { verdict: 'leave', why: 'was not created by this set; left with its data' };
}

/** The marks a release removes (a JSON merge patch sets them to null): after it, nobody holds the object. */
export const RELEASED_LABELS: readonly string[] = [MODULE_OBJECT_METADATA.managedByLabel];
export const RELEASED_ANNOTATIONS: readonly string[] = [
  MODULE_OBJECT_METADATA.ownedByAnnotation,
  MODULE_OBJECT_METADATA.disclaimerAnnotation,
  HOLDER_MARKS.syncResourceAnnotation,
  HOLDER_MARKS.adoptedAnnotation,
];
