// The ModuleConfig mirror step of a wanted module, the same in both module modes: its Module CR is read from the
// SKR (what happens when it is absent is the mode's call), checked, and mirrored into its ModuleConfig in KCP,
// inside the Module CR's mirror lane; and the removal of a module's ModuleConfig in that lane.
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  LIMITS,
  nestsDeeperThan,
  trackedObject,
  type KymaModuleStatus,
  type ResourceState,
} from '@skr-watcher/api';
import { isUnreachable, KubeRequestError, readObject, type ObjectRef } from '@skr-watcher/kube';
import type { ReconcileContext } from '../context.js';
import { mirroredObjectOf } from './mirror-lanes.js';
import { kymaKeyOf, type ModuleInput } from './module-input.js';
import {
  deleteModuleConfig,
  markModuleConfigError,
  mirrorModuleCr,
  readModuleConfig,
} from './module-config.js';
import { withWarning } from './module-status.js';
import type { ResolvedModule } from './resolution.js';

/** A Module CR as read from the SKR. */
export type ModuleCr = KubernetesObject & { spec?: unknown; status?: unknown };

/** The Module CR of a module that has one, in a namespace. */
export type NamespacedRef = ObjectRef & { namespace: string };

/** What a mode does about a Module CR absent from the SKR: the one it created, or the module's entry without one. */
export type AbsentModuleCr = { moduleCr: ModuleCr } | { status: KymaModuleStatus };

/** The mode's part of the mirror step. */
export interface MirrorRules {
  /** The SKR has no Module CR at `resource`; `dropMirror` removes its ModuleConfig, if there is one. */
  absent(resource: NamespacedRef, dropMirror: () => Promise<void>): Promise<AbsentModuleCr>;
  /** The state the ModuleConfig mirrors for `moduleCr`. */
  mirroredState(moduleCr: ModuleCr): ResourceState;
  /** The module's entry once its Module CR is mirrored with `state`. */
  mirrored(state: ResourceState): KymaModuleStatus;
}

/** Runs `work` in the mirror lane of `moduleCr`, or right away when the module has no known Module CR. */
export function inModuleCrLane<T>(
  ctx: ReconcileContext,
  kymaKey: string,
  moduleCr: ObjectRef | undefined,
  work: () => Promise<T>,
): Promise<T> {
  return moduleCr ? ctx.inMirrorLane(kymaKey, mirroredObjectOf(moduleCr), work) : work();
}

/**
 * Removes the ModuleConfig of a wanted module, if there is one. Only the full reconcile creates one (a targeted
 * mirror updates it), so one found absent here stays absent; removing one happens in its Module CR's mirror lane,
 * so no targeted mirror that read it a moment before writes it back.
 */
export async function removeModuleConfig(input: ModuleInput, moduleCr: ObjectRef | undefined): Promise<void> {
  const { ctx, kyma } = input;
  const module = input.wanted.module.name;
  if (!(await readModuleConfig(ctx, kyma.metadata.name, module))) return;
  await inModuleCrLane(ctx, kymaKeyOf(ctx, kyma), moduleCr, () =>
    deleteModuleConfig(ctx, kyma.metadata.name, module),
  );
}

function hasNamespace(resource: ObjectRef | undefined): resource is NamespacedRef {
  return Boolean(resource?.namespace);
}

/**
 * The mirror step of a resolved module whose entry so far is `base` and whose Module CR is `resource`. The Module CR
 * is read, and its ModuleConfig read and written, inside its mirror lane: a targeted mirror of an edit made after
 * this read runs after this write (decision 010).
 */
export async function mirrorModule(
  input: ModuleInput,
  resolved: ResolvedModule,
  base: KymaModuleStatus,
  resource: ObjectRef | undefined,
  rules: MirrorRules,
): Promise<KymaModuleStatus> {
  const { ctx, kyma } = input;
  if (!hasNamespace(resource)) {
    // A module without a default CR (no spec.data) is installed without one, as upstream does.
    await removeModuleConfig(input, trackedObject(input.previous?.resource));
    return withWarning(resolved, base);
  }
  return ctx.inMirrorLane(kymaKeyOf(ctx, kyma), mirroredObjectOf(resource), () =>
    mirrorInLane(input, base, resource, rules),
  );
}

async function mirrorInLane(
  input: ModuleInput,
  base: KymaModuleStatus,
  resource: NamespacedRef,
  rules: MirrorRules,
): Promise<KymaModuleStatus> {
  const { ctx, kyma, skr } = input;
  const kymaName = kyma.metadata.name;
  const module = input.wanted.module.name;
  const fresh = readModuleConfig(ctx, kymaName, module);
  fresh.catch(() => undefined);
  const dropMirror = async () => {
    if (await fresh) await deleteModuleConfig(ctx, kymaName, module);
  };
  let moduleCr: ModuleCr | undefined;
  try {
    moduleCr = (await readObject(skr.objects, resource)) as ModuleCr | undefined;
    if (!moduleCr) {
      const absent = await rules.absent(resource, dropMirror);
      if ('status' in absent) return absent.status;
      moduleCr = absent.moduleCr;
    }
  } catch (error) {
    // An SKR answer about this module only (e.g. its CRD is not installed) fails the module; no answer fails the pass.
    if (isUnreachable(error) || !(error instanceof KubeRequestError)) throw error;
    return { ...base, state: 'Error', message: error.message };
  }
  // Deeper objects overflow the stack in cloning and comparison: an Error on this module, not a failed pass.
  if (nestsDeeperThan(moduleCr.spec, LIMITS.objectDepth)) {
    const message = `Module CR ${resource.kind} ${resource.namespace}/${resource.name}: spec nests deeper than ${LIMITS.objectDepth} levels; not mirrored`;
    await markModuleConfigError(ctx, await fresh, 'SpecTooDeep', message);
    return { ...base, state: 'Error', message };
  }
  const state = rules.mirroredState(moduleCr);
  const existing = await fresh;
  try {
    await mirrorModuleCr(ctx, kymaName, module, moduleCr, state, existing);
  } catch (error) {
    // KCP refused the mirror itself (too large, invalid): an Error on this module and its ModuleConfig.
    if (
      !(error instanceof KubeRequestError) ||
      !(error.code === 400 || error.code === 413 || error.code === 422)
    )
      throw error;
    await markModuleConfigError(ctx, existing, 'MirrorRefused', error.message);
    return { ...base, state: 'Error', message: error.message };
  }
  return rules.mirrored(state);
}
