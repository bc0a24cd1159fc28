// Consistent hashing with virtual nodes: every replica computes the same ring from the same members, so all
// agree on who should own a Kyma without talking to each other; a join or leave moves only the keys on the
// arcs that changed hands (about 1/N of them), not all.
import { createHash } from 'node:crypto';
import { SHARDING } from '@skr-watcher/api';

/** 32 bits of MD5: well spread over similar strings (runtime-ids differ in a digit), and fast enough. */
function hash32(text: string): number {
  return createHash('md5').update(text).digest().readUInt32BE(0);
}

/** The shard bucket of a Kyma: a function of its name only, so each dependent (which names its Kyma) knows it. */
export function bucketOf(kymaName: string, buckets: number = SHARDING.buckets): number {
  return hash32(kymaName) % buckets;
}

/** Ring keys of the buckets, made once: a pass asks for one per Kyma. */
const BUCKET_KEYS = Array.from({ length: SHARDING.buckets }, (_, bucket) => `b${bucket}`);

/** The ring key of a bucket. */
export function bucketKey(bucket: number): string {
  return BUCKET_KEYS[bucket] ?? `b${bucket}`;
}

export interface HashRing {
  readonly members: readonly string[];
  /** The member that should own `key`; undefined on an empty ring. */
  ownerOf(key: string): string | undefined;
}

export function createHashRing(
  members: Iterable<string>,
  virtualNodes: number = SHARDING.virtualNodes,
): HashRing {
  const sorted = [...new Set(members)].sort();
  const points: { at: number; member: string }[] = [];
  for (const member of sorted) {
    for (let i = 0; i < virtualNodes; i++) points.push({ at: hash32(`${member}#${i}`), member });
  }
  // Ties (rare) break by member name so every replica builds the identical ring.
  points.sort((a, b) => a.at - b.at || (a.member < b.member ? -1 : a.member > b.member ? 1 : 0));
  const at = Uint32Array.from(points, (p) => p.at);
  // Every assignment pass asks for every Kyma; the answer only changes with the members (a new ring).
  const answers = new Map<string, string>();
  return {
    members: sorted,
    ownerOf(key) {
      if (points.length === 0) return undefined;
      const known = answers.get(key);
      if (known !== undefined) return known;
      const h = hash32(key);
      // First point clockwise from the key's hash, wrapping past the top.
      let lo = 0;
      let hi = at.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if ((at[mid] as number) < h) lo = mid + 1;
        else hi = mid;
      }
      const owner = (points[lo === at.length ? 0 : lo] as { member: string }).member;
      answers.set(key, owner);
      return owner;
    },
  };
}
