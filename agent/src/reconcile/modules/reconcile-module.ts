// One wanted module, whatever the mode: an unmanaged one is let go, a listed or mandatory one is resolved, and a
// resolved one is handed to its mode (registry-mode.ts or template-mode.ts) to install and mirror.
import { trackedObject, type KymaModuleStatus } from '@skr-watcher/api';
import { removeModuleConfig } from './mirror-step.js';
import type { ModuleInput, ModuleMode } from './module-input.js';
import { failedStatus, unmanagedStatus } from './module-status.js';
import { isModuleFailure, resolveModule } from './resolution.js';

/** The status entry of one wanted module, reconciled in `mode`. */
export async function reconcileModule(input: ModuleInput, mode: ModuleMode): Promise<KymaModuleStatus> {
  const { module, mandatory } = input.wanted;
  const { previous } = input;
  if (module.managed === false) {
    // The user runs the module: its Module CR is left alone and no longer mirrored (docs/decisions/009); its
    // Manifest is marked, and its reconcile leaves the SKR objects to the user and removes it (decision 021).
    await removeModuleConfig(input, trackedObject(previous?.resource));
    await mode.release(input);
    return unmanagedStatus(module.name, previous);
  }

  const resolved = await resolveModule(input.ctx, {
    module,
    kyma: input.kyma,
    kymaChannel: input.kymaChannel,
    skrNamespace: input.skrNamespace,
    installedVersion: previous?.version,
    ...(mandatory ? { mandatory } : {}),
  });
  if (isModuleFailure(resolved)) {
    // The Kyma may not use the module (any more): what was installed for it goes, as upstream removes it. A mandatory
    // module leaves only with its ModuleReleaseMeta.
    if (resolved.accessDenied && !mandatory) return mode.revoke(input, resolved);
    // The mirror of an existing Module CR stays: a catalog problem in KCP is no reason to lose user data.
    return failedStatus(resolved, previous);
  }
  return mode.install(input, resolved);
}
