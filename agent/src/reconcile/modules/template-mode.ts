// Modules without module installation from an OCI registry: a module's Module CR is created in the SKR from its
// ModuleTemplate's spec.data when absent (unless customResourcePolicy is Ignore), its state is the Module CR's,
// and the Module CR the agent created goes when the module leaves the Kyma.
import { DEFAULTS, FIELD_MANAGER, LABELS, MANAGED_BY, type KymaModuleStatus } from '@skr-watcher/api';
import { createIfAbsent, deleteIfExists, readObject } from '@skr-watcher/kube';
import { isResourceState } from '../status.js';
import { mirrorModule, type AbsentModuleCr, type ModuleCr, type NamespacedRef } from './mirror-step.js';
import type { KymaScope, ModuleInput, ModuleMode } from './module-input.js';
import { failedStatus, resolvedStatus, withWarning } from './module-status.js';
import type { ResolvedModule } from './resolution.js';

/** The template mode for the Kyma in `scope`. */
export function templateMode({ skr }: KymaScope): ModuleMode {
  return {
    install: installFromTemplate,
    release: async () => {},
    // Nothing of upstream's to follow here: the Module CR stays, as for any module that fails to resolve.
    revoke: (input, failure) => Promise.resolve(failedStatus(failure, input.previous)),
    removeUnwanted: async () => [],
    async removeModuleCr(moduleCr) {
      const current = await readObject(skr.objects, moduleCr);
      if (current?.metadata?.labels?.[LABELS.managedBy] === MANAGED_BY)
        await deleteIfExists(skr.objects, moduleCr);
    },
  };
}

function installFromTemplate(input: ModuleInput, resolved: ResolvedModule): Promise<KymaModuleStatus> {
  const base = resolvedStatus(resolved);
  return mirrorModule(input, resolved, base, resolved.resource, {
    absent: (resource, dropMirror) => absentModuleCr(input, resolved, base, resource, dropMirror),
    mirroredState: (moduleCr) => {
      const state = (moduleCr.status as { state?: unknown } | undefined)?.state;
      return isResourceState(state) ? state : 'Ready';
    },
    mirrored: (state) =>
      withWarning(resolved, {
        ...base,
        state,
        ...(state !== 'Ready' ? { message: `Module CR state ${state}` } : {}),
      }),
  });
}

/** A Module CR absent from the SKR: created from the template, or left to the user under customResourcePolicy Ignore. */
async function absentModuleCr(
  input: ModuleInput,
  resolved: ResolvedModule,
  base: KymaModuleStatus,
  resource: NamespacedRef,
  dropMirror: () => Promise<void>,
): Promise<AbsentModuleCr> {
  if ((input.wanted.module.customResourcePolicy ?? 'CreateAndDelete') === 'Ignore') {
    await dropMirror();
    return {
      status: withWarning(resolved, {
        ...base,
        state: 'Warning',
        message: `Module CR ${resource.kind} ${resource.namespace}/${resource.name} absent; customResourcePolicy Ignore leaves it to the user`,
      }),
    };
  }
  return { moduleCr: await createModuleCr(input, resolved, resource) };
}

/** Creates the Module CR at `resource` from the template's spec.data, labelled as the agent's. */
async function createModuleCr(
  { ctx, kyma, skr, wanted }: ModuleInput,
  resolved: ResolvedModule,
  resource: NamespacedRef,
): Promise<ModuleCr> {
  const data = resolved.template.spec.data!;
  const body = {
    apiVersion: data.apiVersion,
    kind: data.kind,
    metadata: {
      name: resource.name,
      namespace: resource.namespace,
      labels: { [LABELS.managedBy]: MANAGED_BY, [LABELS.watchedBy]: DEFAULTS.manager },
    },
    ...(data.spec ? { spec: structuredClone(data.spec) } : {}),
  };
  const moduleCr =
    (await createIfAbsent(skr.objects, body, FIELD_MANAGER)) ?? (await readObject(skr.objects, resource));
  if (!moduleCr) throw new Error(`Module CR ${resource.name} vanished right after its creation`);
  ctx.logger.info(
    { kyma: kyma.metadata.name, module: wanted.module.name, gvk: `${data.apiVersion}/${data.kind}` },
    'created Module CR from template',
  );
  return moduleCr;
}
