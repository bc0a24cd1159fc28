// Runs agent tests under the RBAC the project ships (manifests/kcp/rbac.yaml), not as system:masters: the
// ServiceAccount, Role and RoleBinding are created in a test namespace and a token of that ServiceAccount is used.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, KubeConfig, KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';

const RBAC_MANIFEST = fileURLToPath(new URL('../../manifests/kcp/rbac.yaml', import.meta.url));

/**
 * A KubeConfig for `admin`'s cluster that authenticates as the shipped `skr-agent` ServiceAccount, bound to the
 * shipped Role in `namespace` (created there from the manifest, with its namespace replaced).
 */
export async function kubeConfigAsAgent(admin: KubeConfig, namespace: string): Promise<KubeConfig> {
  const objects = KubernetesObjectApi.makeApiClient(admin);
  let serviceAccount = '';
  for (const document of parseAllDocuments(await readFile(RBAC_MANIFEST, 'utf8'))) {
    const object = document.toJS() as KubernetesObject & { subjects?: { namespace?: string }[] };
    if (!object) continue;
    object.metadata = { ...object.metadata, namespace };
    for (const subject of object.subjects ?? []) subject.namespace = namespace;
    if (object.kind === 'ServiceAccount') serviceAccount = object.metadata.name ?? '';
    // A second reconciler in the same namespace finds them there already.
    await objects.create(object).catch((error: unknown) => {
      if ((error as { code?: number }).code !== 409) throw error;
    });
  }
  const token = await admin.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
    name: serviceAccount,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const cluster = admin.getCurrentCluster()!;
  const agent = new KubeConfig();
  agent.loadFromOptions({
    clusters: [cluster],
    users: [{ name: serviceAccount, token: token.status?.token ?? '' }],
    contexts: [{ name: 'agent', cluster: cluster.name, user: serviceAccount, namespace }],
    currentContext: 'agent',
  });
  return agent;
}
