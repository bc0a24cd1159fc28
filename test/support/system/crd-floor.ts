// The API server's floor for installing a module with a CRD and a default CR: a fresh CRD applied (server-side, as
// the agent applies a module's objects), read until Established, then one CR of it created, retried while the server
// does not serve the kind yet. The first create of a CR of a new CRD returns only once the server has started storage
// for it (about 2 s on kube-apiserver v1.35.4), so no install of such a module can be faster than this.
import {
  ApiextensionsV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  type KubeConfig,
} from '@kubernetes/client-node';
import { apiErrorCode, applyObject, deleteIfExists } from '@skr-watcher/kube';

/** One fresh CRD's timeline, ms from the apply being sent. */
export interface CrdFloorSample {
  establishedMs: number;
  /** The first CR's create returned 201: the floor. */
  crAcceptedMs: number;
}

const FLOOR_GROUP = 'floor.bench.kyma-project.io';
/** Short enough not to add to the floor in a way that matters, long enough not to load a shared machine. */
const RETRY_MS = 10;
const GIVE_UP_MS = 60_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Measures the floor once on a CRD named after `suffix` (unique per sample), then deletes what it made. */
export async function measureCrdFloor(kubeConfig: KubeConfig, suffix: string): Promise<CrdFloorSample> {
  const kind = `Floor${suffix.replace(/[^a-z0-9]/gi, '')}`;
  const plural = kind.toLowerCase() + 's';
  const name = `${plural}.${FLOOR_GROUP}`;
  const objects = KubernetesObjectApi.makeApiClient(kubeConfig);
  const crds = kubeConfig.makeApiClient(ApiextensionsV1Api);
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const crd = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name },
    spec: {
      group: FLOOR_GROUP,
      names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
      scope: 'Namespaced',
      versions: [
        {
          name: 'v1alpha1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
        },
      ],
    },
  };
  const sent = Date.now();
  const deadline = sent + GIVE_UP_MS;
  await applyObject(objects, crd, { fieldManager: 'bench-floor', force: true });
  for (;;) {
    const live = await crds.readCustomResourceDefinition({ name });
    if (live.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
    if (Date.now() > deadline) throw new Error(`CRD ${name} not Established within ${GIVE_UP_MS} ms`);
    await sleep(RETRY_MS);
  }
  const establishedMs = Date.now() - sent;
  const cr = { group: FLOOR_GROUP, version: 'v1alpha1', plural, namespace: 'default' };
  for (;;) {
    try {
      await custom.createNamespacedCustomObject({
        ...cr,
        body: { apiVersion: `${FLOOR_GROUP}/v1alpha1`, kind, metadata: { name: 'first' } },
      });
      break;
    } catch (error) {
      const code = apiErrorCode(error);
      if ((code !== 404 && code !== 429) || Date.now() > deadline)
        throw new Error(`create the first ${kind} of CRD ${name}`, { cause: error });
      await sleep(RETRY_MS);
    }
  }
  const crAcceptedMs = Date.now() - sent;
  await custom.deleteNamespacedCustomObject({ ...cr, name: 'first' });
  await deleteIfExists(objects, { apiVersion: crd.apiVersion, kind: crd.kind, name });
  return { establishedMs, crAcceptedMs };
}
