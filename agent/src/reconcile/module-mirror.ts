// The targeted path (decision 010): a callback about one Module CR mirrors that Module CR into its ModuleConfig
// at once (one SKR read, one KCP apply), before the Kyma's full reconcile, which follows as usual.
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  MODULE_MIRROR,
  backoffDelay,
  showsChange,
  type ChangeFingerprint,
  type Kyma,
  type ResourceState,
} from '@skr-watcher/api';
import { readObject } from '@skr-watcher/kube';
import type { ReconcileContext } from './context.js';
import { mirrorModuleCr, readModuleConfig } from './module-config.js';
import { isResourceState } from './status.js';

/** The SKR object a callback named, and what its webhook said about the write. */
export interface ModuleCrChange {
  gvk: { group: string; version: string; kind: string };
  namespace: string;
  name: string;
  fingerprint: ChangeFingerprint;
}

/**
 * mirrored / unchanged: the ModuleConfig shows the Module CR as read (written now, or already);
 * not-a-module: no module of the Kyma has this object (a Kyma edit, or not yet reconciled once): it was only
 * waited for;
 * absent: the Module CR is gone (the full reconcile handles that); not-shown: the write never showed within
 * the bound (it may have been refused after admission), so nothing was written.
 */
export type ModuleMirrorOutcome = 'mirrored' | 'unchanged' | 'not-a-module' | 'absent' | 'not-shown';

export interface ModuleMirrorResult {
  outcome: ModuleMirrorOutcome;
  /** SKR reads of the Module CR; more than one means the write had not landed at the first read. */
  reads: number;
}

/** The module of `kyma` whose Module CR (as its status records it) is the object the change is about. */
export function moduleOfChange(kyma: Kyma, change: ModuleCrChange): string | undefined {
  return kyma.status?.modules?.find(
    ({ resource }) =>
      resource !== undefined &&
      resource.kind === change.gvk.kind &&
      groupOf(resource.apiVersion) === change.gvk.group &&
      resource.metadata?.name === change.name &&
      (resource.metadata?.namespace ?? '') === change.namespace,
  )?.name;
}

/** `group/version` → group; a core `version` has the empty group. */
function groupOf(apiVersion: string | undefined): string {
  const slash = apiVersion?.indexOf('/') ?? -1;
  return slash < 0 ? '' : (apiVersion as string).slice(0, slash);
}

/**
 * `kyma` is the KCP Kyma as being read (undefined: absent, paused or deleting: nothing is written). It is awaited
 * only after the SKR read has started, so the two reads overlap instead of adding up.
 */
export async function mirrorChangedModuleCr(
  ctx: ReconcileContext,
  kymaName: string,
  kyma: Promise<Kyma | undefined>,
  change: ModuleCrChange,
): Promise<ModuleMirrorResult> {
  kyma.catch(() => undefined);
  const lookup = await ctx.skrClients.forKyma(kymaName);
  if (!lookup) return { outcome: 'not-a-module', reads: 0 };
  // Any other object (the SKR Kyma) is only waited for, so the full reconcile that follows reads the change.
  const moduleRead = kyma.then((read) => (read ? moduleOfChange(read, change) : undefined));
  const configRead = moduleRead.then((module) =>
    module ? readModuleConfig(ctx, kymaName, module) : undefined,
  );
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
  const wrote = await mirrorModuleCr(ctx, kymaName, module, moduleCr, state, await configRead);
  return { outcome: wrote ? 'mirrored' : 'unchanged', reads };
}
