// ModuleConfig: the mirror in KCP of one Module CR of one SKR, for module managers to read without SKR
// credentials. One per (Kyma, module); written by server-side apply (spec, then status through /status).
import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  ANNOTATIONS,
  FIELD_MANAGER,
  KINDS,
  LABELS,
  MANAGED_BY,
  type ModuleConfig,
  type MirroredResource,
  type ResourceState,
  listItems,
  parseModuleConfig,
} from '@skr-watcher/api';
import {
  applyCustomObject,
  applyCustomStatus,
  deleteCustomObjectIfExists,
  getCustomObject,
  parsedInPlace,
  parsedOnce,
} from '@skr-watcher/kube';
import { bucketOf } from '../../sharding/ring.js';
import { apiVersionOf, listKcp, refOf, type ReconcileContext } from '../context.js';

const MAX_NAME = 253;

/**
 * `<kyma>-<module>-<hash>`: readable, and collision-free although names may contain dashes (`a-b`+`c` and
 * `a`+`b-c` differ in the hash of the pair). Long names are cut so the whole stays a valid object name.
 */
export function moduleConfigName(kyma: string, module: string): string {
  const hash = createHash('sha256').update(`${kyma}\0${module}`).digest('hex').slice(0, 8);
  const readable = `${kyma}-${module}`.slice(0, MAX_NAME - hash.length - 1).replace(/[-.]+$/, '');
  return `${readable}-${hash}`;
}

const LISTED = 'ModuleConfig';
const parseListed = (object: unknown) => parseModuleConfig(object, 'ModuleConfig');
/**
 * The controller's ModuleConfig cache keeps each ModuleConfig as `moduleConfigsOf` reads it: one copy, validated
 * once. Its update handler hashes the parsed spec (`isOwnMirror`), which is the spec the agent wrote.
 */
export const cachedModuleConfig = parsedInPlace(LISTED, parseListed);

/**
 * The ModuleConfigs of one Kyma, by module name, from the API server's watch cache (`resourceVersion=0`): a
 * consistent list waits for the cache to catch up with the writes of the previous pass, which costs tens of
 * milliseconds per reconcile. The answer may be slightly stale, so it is only used to find ModuleConfigs of
 * modules that are no longer wanted (deleting one twice is harmless); decisions about a wanted module read its
 * ModuleConfig fresh (`readModuleConfig`). The controller's watch cache, when there is one, has the same freshness.
 * `consistent`: every ModuleConfig written so far, listed from etcd (no cache): the deletion of a Kyma must not
 * miss one written a moment before.
 */
export async function moduleConfigsOf(
  ctx: ReconcileContext,
  kyma: string,
  read: 'cached' | 'consistent' = 'cached',
): Promise<Map<string, ModuleConfig>> {
  const items =
    (read === 'cached' ? ctx.caches?.moduleConfigs(kyma) : undefined) ??
    listItems(await listKcp(ctx, 'moduleConfig', `${LABELS.kymaName}=${kyma}`, read), 'ModuleConfig list');
  const byModule = new Map<string, ModuleConfig>();
  for (const item of items) {
    const config = parsedOnce(item, LISTED, parseListed);
    if (config.spec.kyma === kyma) byModule.set(config.spec.module, config);
  }
  return byModule;
}

/** The ModuleConfig of one Kyma and module, read from etcd (not the watch cache); undefined when absent. */
export async function readModuleConfig(
  ctx: ReconcileContext,
  kyma: string,
  module: string,
): Promise<ModuleConfig | undefined> {
  const name = moduleConfigName(kyma, module);
  const raw = await getCustomObject(ctx.kcp.custom, refOf('moduleConfig', ctx.namespace, name));
  return raw === undefined ? undefined : parseModuleConfig(raw, `ModuleConfig ${ctx.namespace}/${name}`);
}

/** JSON with object keys sorted at every level: the API server may return keys in another order than we sent. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** The value of ANNOTATIONS.mirroredSpecHash for a ModuleConfig spec. */
export function mirroredSpecHash(spec: unknown): string {
  return createHash('sha256').update(canonicalJson(spec)).digest('hex');
}

/**
 * Whether a ModuleConfig as watched is the agent's own write: its spec is the one the agent last wrote. Its watch
 * event then has nothing for a reconcile to do (decision 010); an edit by hand changes the spec, not the hash.
 */
export function isOwnMirror(config: {
  metadata?: { annotations?: Record<string, string> };
  spec?: unknown;
}): boolean {
  const hash = config.metadata?.annotations?.[ANNOTATIONS.mirroredSpecHash];
  return hash !== undefined && hash === mirroredSpecHash(config.spec);
}

/** The part of a Module CR that is mirrored: identity and spec, nothing the SKR's API server owns. */
export function mirroredResource(moduleCr: KubernetesObject & { spec?: unknown }): MirroredResource {
  const name = moduleCr.metadata?.name ?? '';
  const namespace = moduleCr.metadata?.namespace;
  const spec = moduleCr.spec;
  return {
    apiVersion: moduleCr.apiVersion ?? '',
    kind: moduleCr.kind ?? '',
    metadata: { name, ...(namespace ? { namespace } : {}) },
    ...(spec !== undefined && spec !== null && typeof spec === 'object'
      ? { spec: structuredClone(spec) as Record<string, unknown> }
      : {}),
  };
}

/**
 * Mirrors a Module CR into its ModuleConfig. Writes only what changed: the spec when the Module CR's identity or
 * spec differ, the status when the source resourceVersion or the state differ. Returns whether it wrote.
 * `statusLeftToNext()`, asked once the spec is written: a mirror of a newer write of the Module CR waits in the
 * lane and writes the status (it reads the ModuleConfig fresh, and a mirror that ends otherwise wakes the full pass,
 * which mirrors too), so this one leaves it: one KCP write less, and the lane free for that mirror sooner.
 */
export async function mirrorModuleCr(
  ctx: ReconcileContext,
  kyma: string,
  module: string,
  moduleCr: KubernetesObject & { spec?: unknown },
  state: ResourceState,
  existing: ModuleConfig | undefined,
  onSpecApplied?: (generation: number | undefined) => void,
  statusLeftToNext: () => boolean = () => false,
): Promise<boolean> {
  const name = existing?.metadata.name ?? moduleConfigName(kyma, module);
  const ref = refOf('moduleConfig', ctx.namespace, name);
  const resource = mirroredResource(moduleCr);
  const sourceResourceVersion = moduleCr.metadata?.resourceVersion ?? '';
  // The bucket label lets a sharded replica watch only its Kymas' ModuleConfigs; one without it (an older agent's
  // write) gets it on the next pass.
  const labels = {
    [LABELS.kymaName]: kyma,
    [LABELS.moduleName]: module,
    [LABELS.managedBy]: MANAGED_BY,
    [LABELS.shardBucket]: String(bucketOf(kyma)),
  };
  const spec = { kyma, module, resource };
  const annotations = { [ANNOTATIONS.mirroredSpecHash]: mirroredSpecHash(spec) };
  const specChanged =
    !existing ||
    !isDeepStrictEqual(existing.spec, spec) ||
    Object.entries(labels).some(([key, value]) => existing.metadata.labels?.[key] !== value) ||
    existing.metadata.annotations?.[ANNOTATIONS.mirroredSpecHash] !==
      annotations[ANNOTATIONS.mirroredSpecHash];
  let generation = existing?.metadata.generation;
  if (specChanged) {
    const applied = await applyCustomObject(
      ctx.kcp.custom,
      ref,
      {
        apiVersion: apiVersionOf('moduleConfig'),
        kind: KINDS.moduleConfig.kind,
        metadata: { name, namespace: ctx.namespace, labels, annotations },
        spec,
      },
      { fieldManager: FIELD_MANAGER, force: true },
    );
    const appliedGeneration = (applied as { metadata?: { generation?: unknown } } | undefined)?.metadata
      ?.generation;
    generation = typeof appliedGeneration === 'number' ? appliedGeneration : generation;
    onSpecApplied?.(generation);
  }
  const statusChanged =
    specChanged ||
    existing?.status?.sourceResourceVersion !== sourceResourceVersion ||
    existing?.status?.state !== state;
  if (statusChanged && !statusLeftToNext()) {
    await applyCustomStatus(
      ctx.kcp.custom,
      ref,
      {
        apiVersion: apiVersionOf('moduleConfig'),
        kind: KINDS.moduleConfig.kind,
        metadata: { name, namespace: ctx.namespace },
        status: {
          state,
          sourceResourceVersion,
          ...(generation !== undefined ? { observedGeneration: generation } : {}),
          lastOperation: {
            operation: `mirrored ${resource.kind} ${resource.metadata.namespace ?? ''}/${resource.metadata.name} at resourceVersion ${sourceResourceVersion}`,
            lastUpdateTime: ctx.clock().toISOString(),
          },
        },
      },
      { fieldManager: FIELD_MANAGER, force: true },
    );
  }
  return specChanged || statusChanged;
}

/** Type of the ModuleConfig condition that says whether its spec mirrors the Module CR as it is now. */
export const MIRRORED_CONDITION = 'Mirrored';

/**
 * A Module CR that cannot be mirrored: its ModuleConfig keeps the last spec mirrored, and its status
 * says Error with the reason, so a module manager does not take that spec for the SKR's current one. A mirror that
 * succeeds later applies the status without the condition (same field manager), which removes it.
 */
export async function markModuleConfigError(
  ctx: ReconcileContext,
  existing: ModuleConfig | undefined,
  reason: string,
  message: string,
): Promise<void> {
  if (!existing) return; // only the full reconcile creates one, from a Module CR it can mirror
  const condition = existing.status?.conditions?.find((c) => c.type === MIRRORED_CONDITION);
  if (existing.status?.state === 'Error' && condition?.reason === reason && condition.message === message)
    return;
  const now = ctx.clock().toISOString();
  await applyCustomStatus(
    ctx.kcp.custom,
    refOf('moduleConfig', ctx.namespace, existing.metadata.name),
    {
      apiVersion: apiVersionOf('moduleConfig'),
      kind: KINDS.moduleConfig.kind,
      metadata: { name: existing.metadata.name, namespace: ctx.namespace },
      status: {
        state: 'Error',
        ...(existing.status?.sourceResourceVersion !== undefined
          ? { sourceResourceVersion: existing.status.sourceResourceVersion }
          : {}),
        conditions: [{ type: MIRRORED_CONDITION, status: 'False', reason, message, lastTransitionTime: now }],
        lastOperation: { operation: message, lastUpdateTime: now },
      },
    },
    { fieldManager: FIELD_MANAGER, force: true },
  );
}

/** Deletes the ModuleConfig of a Kyma and module (by its deterministic name, and by `listed` if that differs). */
export async function deleteModuleConfig(
  ctx: ReconcileContext,
  kyma: string,
  module: string,
  listed?: ModuleConfig,
): Promise<boolean> {
  const names = new Set([moduleConfigName(kyma, module), ...(listed ? [listed.metadata.name] : [])]);
  let deleted = false;
  for (const name of names) {
    const ref = refOf('moduleConfig', ctx.namespace, name);
    deleted = (await deleteCustomObjectIfExists(ctx.kcp.custom, ref)) || deleted;
  }
  return deleted;
}
