// Identities in a real SKR for the kubeconfig Secret the agent reads: a ServiceAccount bound to the API server's
// built-in `view` ClusterRole (it may read most namespaced objects, write none, and read neither CRDs nor Kymas),
// written out as a kubeconfig, and the Kyma's Secret switched to a given kubeconfig.
import { readFile } from 'node:fs/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import { CoreV1Api, PatchStrategy, RbacAuthorizationV1Api, setHeaderOptions } from '@kubernetes/client-node';

/** A kubeconfig for `admin`'s cluster as the ServiceAccount `default/<name>`, which may only view. */
export async function viewOnlyKubeconfig(admin: KubeConfig, name: string): Promise<string> {
  const core = admin.makeApiClient(CoreV1Api);
  const ignoreExisting = (error: unknown) => {
    if ((error as { code?: number }).code !== 409) throw error;
  };
  await core
    .createNamespacedServiceAccount({ namespace: 'default', body: { metadata: { name } } })
    .catch(ignoreExisting);
  await admin
    .makeApiClient(RbacAuthorizationV1Api)
    .createClusterRoleBinding({
      body: {
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
        subjects: [{ kind: 'ServiceAccount', name, namespace: 'default' }],
      },
    })
    .catch(ignoreExisting);
  const token = await core.createNamespacedServiceAccountToken({
    name,
    namespace: 'default',
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const cluster = admin.getCurrentCluster()!;
  const ca = cluster.caData ?? (cluster.caFile ? (await readFile(cluster.caFile)).toString('base64') : '');
  // Written by hand: the agent accepts inline credentials only, and exportConfig adds fields it refuses.
  return `apiVersion: v1
kind: Config
clusters: [{name: skr, cluster: {server: "${cluster.server}", certificate-authority-data: ${ca}}}]
users: [{name: ${name}, user: {token: ${token.status?.token ?? ''}}}]
contexts: [{name: ${name}, context: {cluster: skr, user: ${name}}}]
current-context: ${name}
`;
}

/** The kubeconfig Secret `secret` in `namespace` of the KCP `kcp` now holds `kubeconfig`. */
export async function replaceKubeconfig(
  kcp: KubeConfig,
  namespace: string,
  secret: string,
  kubeconfig: string,
): Promise<void> {
  await kcp
    .makeApiClient(CoreV1Api)
    .patchNamespacedSecret(
      { name: secret, namespace, body: { data: { config: Buffer.from(kubeconfig).toString('base64') } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
}
