// Upstream's --skr-image-pull-secret: a Secret of the KCP namespace (the credentials of the registry that serves the
// modules' images) is copied into every SKR next to the SKR Kyma, where the module workloads name it in
// `imagePullSecrets` (the transform in manifest-install.ts). The copy is written only when what it should hold
// changed or someone changed it in the SKR, so a no-op pass reads its metadata and writes nothing. The copy goes
// with its Kyma (deletion.ts), as the module workloads that named it do.
import type { KubernetesObject, V1Secret } from '@kubernetes/client-node';
import { FIELD_MANAGER, LABELS, MANAGED_BY } from '@skr-watcher/api';
import {
  applyObjectUnlessUnchanged,
  deleteIfExists,
  isNotFound,
  KubeRequestError,
  type ClusterClient,
} from '@skr-watcher/kube';
import { appliedVersionsOf } from '../../registration/index.js';
import type { ReconcileContext } from '../context.js';
import { CONDITIONS, type ConditionInput } from '../status.js';

/** The SKR copy of the KCP Secret `source`: its type and data, nothing of the KCP object's metadata. */
export function pullSecretCopy(source: V1Secret, name: string, skrNamespace: string): KubernetesObject {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: skrNamespace, labels: { [LABELS.managedBy]: MANAGED_BY } },
    ...(source.type ? { type: source.type } : {}),
    data: source.data ?? {},
  } as KubernetesObject;
}

/** Copies the image pull Secret `name` into the SKR's `skrNamespace`; the condition says whether it is there. */
export async function syncImagePullSecret(
  ctx: ReconcileContext,
  skr: ClusterClient,
  skrNamespace: string,
  name: string,
): Promise<ConditionInput> {
  let source: V1Secret;
  try {
    source = await ctx.kcp.core.readNamespacedSecret({ name, namespace: ctx.namespace });
  } catch (error) {
    if (!isNotFound(error)) throw new KubeRequestError(`read Secret ${ctx.namespace}/${name}`, error);
    return {
      type: CONDITIONS.imagePullSecret,
      ok: false,
      reason: 'SecretMissing',
      message: `no Secret ${ctx.namespace}/${name} in the KCP (--skr-image-pull-secret): module images that need it cannot be pulled`,
    };
  }
  await applyObjectUnlessUnchanged(
    skr.objects,
    pullSecretCopy(source, name, skrNamespace),
    { fieldManager: FIELD_MANAGER, force: true },
    appliedVersionsOf(skr),
  );
  return {
    type: CONDITIONS.imagePullSecret,
    ok: true,
    reason: 'Copied',
    message: `Secret ${skrNamespace}/${name} holds the KCP's ${ctx.namespace}/${name}`,
  };
}

/**
 * Deletes the SKR copy when its Kyma goes. Only a copy this agent wrote (our managed-by label): a Secret of that
 * name someone else keeps in the namespace stays.
 */
export async function removeImagePullSecret(
  skr: ClusterClient,
  skrNamespace: string,
  name: string,
): Promise<void> {
  let found: V1Secret;
  try {
    found = await skr.core.readNamespacedSecret({ name, namespace: skrNamespace });
  } catch (error) {
    if (isNotFound(error)) return;
    throw new KubeRequestError(`read Secret ${skrNamespace}/${name} in ${skr.name}`, error);
  }
  if (found.metadata?.labels?.[LABELS.managedBy] !== MANAGED_BY) return;
  await deleteIfExists(skr.objects, { apiVersion: 'v1', kind: 'Secret', namespace: skrNamespace, name });
}
