// Where the ring places a Kyma. Replicas place it by its bucket (a function of its name, so its dependents can be
// selected by bucket) while every member announces bucket placement on its Lease; while a member does not (one of
// an agent that places by runtime-id, during a rolling update), all place it by runtime-id, as that member does.
import { LABELS, SHARDING } from '@skr-watcher/api';
import { objectKey } from '@skr-watcher/kube';
import type { Member } from './peer-leases.js';
import { bucketKey, bucketOf, createHashRing, type HashRing } from './ring.js';

/** What a replica that places by bucket says on its Lease (ANNOTATIONS.shardPlacement). */
export const PLACEMENT = 'buckets';

type Placed = { metadata: { name: string; namespace?: string; labels?: Record<string, string> } };

/** The ring key of a Kyma placed by bucket. */
export function shardKeyOf(kyma: Placed): string {
  return bucketKey(bucketOf(kyma.metadata.name));
}

/**
 * The ring key of a Kyma placed by runtime-id, as members that do not announce bucket placement place it: its
 * runtime-id label, else its key.
 */
export function runtimeIdShardKeyOf(kyma: Placed): string {
  return kyma.metadata.labels?.[LABELS.runtimeId] || objectKey(kyma);
}

/** True when every member places by bucket, so all of them may. */
export function placesByBucket(members: readonly Member[]): boolean {
  return members.every((m) => m.placement === PLACEMENT);
}

/** The ring of the current members as this replica (`me`) places Kymas on it. */
export class Placement {
  private ring: HashRing;
  private bucketPlacement = true;
  private ringBuckets: { ring: HashRing; buckets: number[] } | undefined;

  constructor(private readonly me: string) {
    this.ring = createHashRing([me]);
  }

  /** New members: a new ring. True when the placement changed between bucket and runtime-id. */
  setMembers(members: readonly Member[]): boolean {
    this.ring = createHashRing(members.map((m) => m.identity));
    const was = this.bucketPlacement;
    this.bucketPlacement = placesByBucket(members);
    return this.bucketPlacement !== was;
  }

  /** False while a member places by runtime-id. */
  get byBucket(): boolean {
    return this.bucketPlacement;
  }

  /** The Kyma's ring key; `bucket` is bucketOf(its name), hashed once by the caller. */
  keyOf(kyma: Placed & { bucket: number }): string {
    return this.bucketPlacement ? bucketKey(kyma.bucket) : runtimeIdShardKeyOf(kyma);
  }

  /** The member the ring picks for the Kyma. */
  targetOf(kyma: Placed & { bucket: number }): string | undefined {
    return this.ring.ownerOf(this.keyOf(kyma));
  }

  /** True when the ring picks this replica for the bucket. */
  ownsBucket(bucket: number): boolean {
    return this.ring.ownerOf(bucketKey(bucket)) === this.me;
  }

  /** The buckets the ring picks this replica for, worked out once per ring. */
  bucketsOfRing(): number[] {
    if (this.ringBuckets?.ring !== this.ring) {
      const buckets: number[] = [];
      for (let b = 0; b < SHARDING.buckets; b++) if (this.ownsBucket(b)) buckets.push(b);
      this.ringBuckets = { ring: this.ring, buckets };
    }
    return this.ringBuckets.buckets;
  }
}

/** What this replica does about a Kyma's owner label in an assignment pass. */
export type OwnerStep =
  | { step: 'hand-over'; to: string }
  /** It is ours and the ring keeps it here: a handover decided earlier is called off. */
  | { step: 'keep' }
  | { step: 'claim' }
  | { step: 'none' };

/**
 * The assignment rule. The owner hands a Kyma over when the ring picks another member; the ring's pick claims it when
 * it has no owner or its owner is gone (`isGone`, asked only then). Anyone else leaves the label alone.
 */
export function ownerStep(
  me: string,
  owner: string | undefined,
  target: string | undefined,
  isGone: (owner: string) => boolean,
): OwnerStep {
  if (owner === me)
    return target !== me && target !== undefined ? { step: 'hand-over', to: target } : { step: 'keep' };
  if (target === me && (owner === undefined || isGone(owner))) return { step: 'claim' };
  return { step: 'none' };
}
