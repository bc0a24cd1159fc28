// Pieces shared by every resource schema: object metadata, conditions, states, tracking objects.
// Schemas describe what the agent reads; they accept anything the CRDs accept (upstream's too) and drop
// fields the agent never reads, so an object written by another controller still parses.
import * as z from 'zod/mini';
import { crd, dateTime, int64 } from './crd.js';

/** `null` reads as absent: API servers and hand-written YAML both produce it for empty fields. */
export function optional<T extends z.ZodMiniType>(
  schema: T,
): z.ZodMiniPipe<z.ZodMiniTransform<unknown, unknown>, z.ZodMiniOptional<T>> {
  return z.pipe(
    z.transform<unknown, unknown>((value) => (value === null ? undefined : value)),
    z.optional(schema),
  );
}

/** A string that must not be empty; the message names what is missing, as the API server's would. */
export const requiredString = () => z.string().check(z.minLength(1, 'is required'));

/** A list read entry by entry: an entry `entry` cannot read is skipped, the others are kept. */
export function readableEntries<T extends z.ZodMiniType>(entry: T) {
  return z.pipe(
    z.array(z.unknown()),
    z.transform((entries) =>
      entries.flatMap((value) => {
        const parsed = entry.safeParse(value);
        return parsed.success ? [parsed.data as z.output<T>] : [];
      }),
    ),
  );
}

export const stringMap = z.record(z.string(), z.string());

/** A timestamp as the API server sends it; client code may hand us a Date. */
const timestamp = z.union([
  z.string(),
  z.pipe(
    z.date(),
    z.transform((date) => date.toISOString()),
  ),
]);

export const objectMetaSchema = z.object({
  name: requiredString(),
  namespace: optional(z.string()),
  uid: optional(z.string()),
  resourceVersion: optional(z.string()),
  generation: optional(z.number()),
  creationTimestamp: optional(timestamp),
  deletionTimestamp: optional(timestamp),
  labels: optional(stringMap),
  annotations: optional(stringMap),
  finalizers: optional(z.array(z.string())),
});
export type ObjectMeta = z.infer<typeof objectMetaSchema>;

/** apiVersion, kind, metadata and the given spec and status. */
export function typedObject<Spec extends z.ZodMiniType, Status extends z.ZodMiniType>(
  spec: Spec,
  status: Status,
) {
  return z.object({
    apiVersion: requiredString(),
    kind: requiredString(),
    metadata: objectMetaSchema,
    spec,
    status: optional(status),
  });
}

export interface TypedObject<Spec, Status = unknown> {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec: Spec;
  status?: Status | undefined;
}

/** States of a Kyma and of the objects it aggregates, as upstream's `shared.State` enumerates them. */
export const RESOURCE_STATES = ['Ready', 'Processing', 'Warning', 'Error', 'Deleting'] as const;
export const resourceStateSchema = z.enum(RESOURCE_STATES);
export type ResourceState = z.infer<typeof resourceStateSchema>;

/** A module's state adds Unmanaged (`managed: false`: the user runs the module, the agent leaves it alone). */
export const MODULE_STATES = [...RESOURCE_STATES, 'Unmanaged'] as const;
/**
 * Upstream's CRDs also allow '' (not set yet) for a module's state; the agent reads no module in '' (a Kyma status
 * with one reads as absent and is rewritten).
 */
export const moduleStateSchema = z
  .enum(MODULE_STATES)
  .register(crd, { served: { type: 'string', enum: [...MODULE_STATES, ''] } });
export type ModuleState = z.infer<typeof moduleStateSchema>;

/** metav1.Condition, checked by the API server as upstream's CRDs check it. */
export const conditionSchema = z.object({
  type: z.string().register(crd, {
    maxLength: 316,
    pattern:
      '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$',
  }),
  status: z.enum(['True', 'False', 'Unknown']),
  reason: z
    .string()
    .register(crd, { minLength: 1, maxLength: 1024, pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$' }),
  message: z.string().register(crd, { maxLength: 32768 }),
  lastTransitionTime: dateTime(),
  observedGeneration: optional(int64({ minimum: 0 })),
});

/** A list of conditions, one per type (server-side apply merges them by type). */
export const conditionsSchema = z
  .array(conditionSchema)
  .register(crd, { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] });
export type Condition = z.infer<typeof conditionSchema>;

export const lastOperationSchema = z.object({
  operation: z.string(),
  lastUpdateTime: optional(dateTime()),
});
export type LastOperation = z.infer<typeof lastOperationSchema>;

/** Upstream's TrackingObject: type meta and a partial object meta, enough to find and compare an object. */
export const trackingObjectSchema = z
  .object({
    apiVersion: optional(z.string()),
    kind: optional(z.string()),
    metadata: optional(
      z.object({
        name: optional(z.string()),
        namespace: optional(z.string()),
        generation: optional(int64()),
      }),
    ),
  })
  .register(crd, { description: 'Type meta and partial object meta of a tracked object.' });
export type TrackingObject = z.infer<typeof trackingObjectSchema>;

/**
 * metav1.LabelSelector. The API server takes any operator (as upstream's CRDs do); the agent reads only the four it
 * evaluates, so a ModuleReleaseMeta whose kymaSelector has another is an error on that module (a Watcher's gateway
 * selector, never read, reads as absent).
 */
export const labelSelectorSchema = z
  .object({
    matchLabels: optional(stringMap),
    matchExpressions: optional(
      z
        .array(
          z.object({
            key: z.string(),
            operator: z
              .enum(['In', 'NotIn', 'Exists', 'DoesNotExist'])
              .register(crd, { served: { type: 'string' } }),
            values: optional(z.array(z.string()).register(crd, { 'x-kubernetes-list-type': 'atomic' })),
          }),
        )
        .register(crd, { 'x-kubernetes-list-type': 'atomic' }),
    ),
  })
  .register(crd, { 'x-kubernetes-map-type': 'atomic' });
export type LabelSelector = z.infer<typeof labelSelectorSchema>;

export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

export interface GroupVersionResource {
  group: string;
  version: string;
  resource: string;
}
