// The targeted path (decision 010): a callback about one Module CR mirrors that Module CR into its ModuleConfig
// at once (one SKR read, one KCP apply), before the Kyma's full reconcile, which follows as usual.
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  MODULE_MIRROR,
  backoffDelay,
  showsChange,
  type Kyma,
  type ResourceState,
  trackedObject,
} from '@skr-watcher/api';
import { readObject } from '@skr-watcher/kube';
import type { ReconcileContext } from '../reconcile/context.js';
import {
  mirroredObjectOf,
  type ModuleCrChange,
  type ModuleMirrorResult,
} from '../reconcile/modules/mirror-lanes.js';
import { mirrorModuleCr, readModuleConfig } from '../reconcile/modules/module-config.js';
import { isResourceState } from '../reconcile/status.js';

/**
 * When each step of one targeted mirror ended (epoch ms, sub-millisecond), for the debug log that says where an
 * edit's milliseconds go (bench:e2e prints them); steps not taken stay undefined.
 */
export interface MirrorSteps {
  /** The last SKR read of the Module CR returned (the one that showed the change). */
  skrReadAt?: number;
  kymaReadAt?: number;
  configReadAt?: number;
  /** The ModuleConfig spec was applied (the edit is visible in KCP from here). */
  specAppliedAt?: number;
  /** generation of the Module CR as read. */
  generation?: number;
  /** generation of the ModuleConfig the spec apply returned (what a module manager's watch sees next). */
  configGeneration?: number;
}

/** Epoch milliseconds from the system clock, comparable with other processes' (timeOrigin + now() drifts). */
export const epochMs = (): number => Date.now();

/**
 * The module of `kyma` whose Module CR (as its status records it) is the object the change is about; a module the
 * user runs (Unmanaged) is not mirrored.
 */
export function moduleOfChange(kyma: Kyma, change: ModuleCrChange): string | undefined {
  return kyma.status?.modules?.find(({ resource, state }) => {
    if (state === 'Unmanaged') return false;
    const object = trackedObject(resource);
    if (!object) return false;
    const { group, kind, namespace, name } = mirroredObjectOf(object);
    return (
      group === change.gvk.group &&
      kind === change.gvk.kind &&
      namespace === change.namespace &&
      name === change.name
    );
  })?.name;
}

/**
 * `kyma` is the KCP Kyma as being read (undefined: absent, paused or deleting: nothing is written). It is awaited
 * only after the SKR read has started, so the two reads overlap instead of adding up. `guess` is the module a cached
 * Kyma names for the object: its ModuleConfig is read alongside too.
 */
export async function mirrorChangedModuleCr(
  ctx: ReconcileContext,
  kymaName: string,
  kyma: Promise<Kyma | undefined>,
  change: ModuleCrChange,
  steps: MirrorSteps = {},
  guess?: string,
  superseded: () => boolean = () => false,
): Promise<ModuleMirrorResult> {
  kyma.catch(() => undefined);
  void kyma.then(
    () => (steps.kymaReadAt = epochMs()),
    () => undefined,
  );
  const lookup = await ctx.skrClients.forKyma(kymaName);
  if (!lookup) return { outcome: 'not-a-module', reads: 0 };
  // Any other object (the SKR Kyma) is only waited for, so the full reconcile that follows reads the change.
  const moduleRead = kyma.then((read) => (read ? moduleOfChange(read, change) : undefined));
  // The guessed module's ModuleConfig is read at once; the fresh Kyma read decides whether it was the right one.
  const guessed = guess === undefined ? undefined : readModuleConfig(ctx, kymaName, guess);
  guessed?.catch(() => undefined);
  const configRead = moduleRead.then(async (module) => {
    const config =
      module === undefined
        ? undefined
        : module === guess && guessed
          ? await guessed
          : await readModuleConfig(ctx, kymaName, module);
    steps.configReadAt = epochMs();
    return config;
  });
  configRead.catch(() => undefined);
  const { group, version, kind } = change.gvk;
  const ref = {
    apiVersion: group ? `${group}/${version}` : version,
    kind,
    name: change.name,
    ...(change.namespace ? { namespace: change.namespace } : {}),
  };
  // Validating admission runs before the API server stores the write: a read right after the callback may
  // still show the object before it. Re-read on a short backoff until the fingerprint shows, within a bound.
  const started = Date.now();
  let reads = 0;
  let moduleCr: (KubernetesObject & { spec?: unknown; status?: unknown }) | undefined;
  for (;;) {
    moduleCr = await readObject(lookup.client.objects, ref);
    steps.skrReadAt = epochMs();
    reads++;
    if (showsChange(change.fingerprint, moduleCr)) break;
    const delay = backoffDelay(reads, MODULE_MIRROR.rereadInitialMs, MODULE_MIRROR.rereadMaxMs);
    if (Date.now() + delay - started > MODULE_MIRROR.rereadBoundMs) {
      await configRead.catch(() => undefined);
      return { outcome: 'not-shown', reads };
    }
    ctx.logger.debug(
      {
        kyma: kymaName,
        gvk: change.gvk,
        namespace: change.namespace,
        name: change.name,
        reads,
        delayMs: delay,
      },
      'SKR object does not show the announced write yet; reading it again',
    );
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
  const module = await moduleRead;
  if (!module) return { outcome: 'not-a-module', reads };
  if (!moduleCr) {
    await configRead.catch(() => undefined);
    return { outcome: 'absent', reads };
  }
  const crState = (moduleCr.status as { state?: unknown } | undefined)?.state;
  const state: ResourceState = isResourceState(crState) ? crState : 'Ready';
  steps.generation = moduleCr.metadata?.generation;
  const existing = await configRead;
  // Only the full reconcile creates a ModuleConfig (it removes them too, in this lane): one absent here was never
  // made or was just removed (module disabled or unmanaged), and the full reconcile that follows decides which.
  if (!existing) return { outcome: 'not-a-module', reads };
  // The full pass writes the module's state (from the Module CR) into the Kyma's status: unchanged, it has nothing
  // to write for this edit. Read from the same fresh Kyma that named the module.
  const shown = (await kyma)?.status?.modules?.find((entry) => entry.name === module)?.state;
  const kymaStatusChanged = shown !== state;
  const wrote = await mirrorModuleCr(
    ctx,
    kymaName,
    module,
    moduleCr,
    state,
    existing,
    (generation) => {
      steps.specAppliedAt = epochMs();
      steps.configGeneration = generation;
    },
    superseded,
  );
  return { outcome: wrote ? 'mirrored' : 'unchanged', reads, kymaStatusChanged };
}
