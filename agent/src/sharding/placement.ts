// Where the ring places a Kyma. Replicas place it by its bucket (a function of its name, so its dependents can be
// selected by bucket) while every member announces bucket placement on its Lease; while a member does not (one of
// an agent that places by runtime-id, during a rolling update), all place it by runtime-id, as that member does.

/** What a replica that places by bucket says on its Lease (ANNOTATIONS.shardPlacement). */
export const PLACEMENT = 'buckets';
