// Runs agent tests under the RBAC the project ships (manifests/kcp/rbac.yaml), not as system:masters: the
// ServiceAccount, Role and RoleBinding are created in a test namespace and a token of that ServiceAccount is used.
// The admission policies that bound what that ServiceAccount writes (manifests/kcp/agent-writes-policy.yaml) are
// installed too, and in effect before the KubeConfig is handed out.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, KubeConfig, KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { waitUntil } from './eventually.js';

const RBAC_MANIFEST = fileURLToPath(new URL('../../manifests/kcp/rbac.yaml', import.meta.url));
export const AGENT_WRITES_POLICY = fileURLToPath(
  new URL('../../manifests/kcp/agent-writes-policy.yaml', import.meta.url),
);

/** Creates each object of a manifest; one that exists already (another suite, another namespace) is left as it is. */
async function createAll(
  objects: KubernetesObjectApi,
  manifest: string,
  adapt: (object: KubernetesObject & { subjects?: { namespace?: string }[] }) => void = () => {},
): Promise<void> {
  for (const document of parseAllDocuments(await readFile(manifest, 'utf8'))) {
    const object = document.toJS() as KubernetesObject & { subjects?: { namespace?: string }[] };
    if (!object) continue;
    adapt(object);
    await objects.create(object).catch((error: unknown) => {
      if ((error as { code?: number }).code !== 409) throw error;
    });
  }
}

/**
 * Installs the agent-writes admission policies and waits until the API server applies them: `agent` (a KubeConfig
 * as the skr-agent ServiceAccount) is refused a Secret that is no webhook certificate.
 */
export async function installAgentWritesPolicy(
  admin: KubeConfig,
  agent: KubeConfig,
  namespace: string,
): Promise<void> {
  await createAll(KubernetesObjectApi.makeApiClient(admin), AGENT_WRITES_POLICY);
  const probe = { metadata: { name: 'agent-writes-policy-probe', namespace }, type: 'Opaque' };
  await waitUntil(
    'the agent-writes policy refuses the agent an Opaque Secret',
    async () => {
      try {
        await agent.makeApiClient(CoreV1Api).createNamespacedSecret({ namespace, body: probe });
      } catch (error) {
        // Not RBAC's 403 (a fresh RoleBinding can lag too): the policy's own message.
        const refusal = error as { code?: number; body?: unknown };
        return refusal.code === 403 && String(refusal.body).includes('webhook certificates');
      }
      await admin.makeApiClient(CoreV1Api).deleteNamespacedSecret({ name: probe.metadata.name, namespace });
      return false;
    },
    60_000,
  );
}

/**
 * A KubeConfig for `admin`'s cluster that authenticates as the shipped `skr-agent` ServiceAccount, bound to the
 * shipped Role in `namespace` (created there from the manifest, with its namespace replaced).
 */
export async function kubeConfigAsAgent(admin: KubeConfig, namespace: string): Promise<KubeConfig> {
  let serviceAccount = '';
  await createAll(KubernetesObjectApi.makeApiClient(admin), RBAC_MANIFEST, (object) => {
    object.metadata = { ...object.metadata, namespace };
    for (const subject of object.subjects ?? []) subject.namespace = namespace;
    if (object.kind === 'ServiceAccount') serviceAccount = object.metadata.name ?? '';
  });
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
  await installAgentWritesPolicy(admin, agent, namespace);
  return agent;
}
