// A small fleet on a real KCP, shaped as the agent would have left it: Kymas whose status is written directly (one
// Ready, one whose SKR is unreachable, one whose module fails on the registry, one whose webhook went silent with a
// certificate past renewal, one never reconciled), their Manifests, webhook certificate Secrets and Events; and
// identities that act with less than cluster-admin: an on-call ServiceAccount and a read-only one.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AuthorizationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1PolicyRule,
} from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS } from '@skr-watcher/api';
import { createCa, issueLeaf, webhookTlsSecretName, SECRET_KEYS } from '@skr-watcher/pki';
import { waitUntil } from '../../test/support/eventually.js';

const DAY_MS = 86_400_000;
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export const ref = (kind: keyof typeof KINDS, namespace: string) => ({
  group: GROUP,
  version: KINDS[kind].version,
  plural: KINDS[kind].plural,
  namespace,
});

interface ConditionShape {
  type: string;
  status: 'True' | 'False';
  reason: string;
  message: string;
}

interface ModuleShape {
  name: string;
  state: string;
  version: string;
  message?: string;
  manifest?: { state: string; lastOperation: string };
}

export interface KymaShape {
  state?: string;
  conditions?: ConditionShape[];
  modules?: ModuleShape[];
}

export async function createKyma(
  kcp: KubeConfig,
  namespace: string,
  name: string,
  shape: KymaShape,
): Promise<void> {
  const custom = kcp.makeApiClient(CustomObjectsApi);
  await custom.createNamespacedCustomObject({
    ...ref('kyma', namespace),
    body: {
      apiVersion: `${GROUP}/${KINDS.kyma.version}`,
      kind: 'Kyma',
      metadata: { name, namespace, labels: { [LABELS.runtimeId]: `runtime-${name}` } },
      spec: { channel: 'regular', modules: (shape.modules ?? []).map((m) => ({ name: m.name })) },
    },
  });
  for (const module of shape.modules ?? []) {
    if (!module.manifest) continue;
    const manifestName = `${name}-${module.name}`;
    await custom.createNamespacedCustomObject({
      ...ref('manifest', namespace),
      body: {
        apiVersion: `${GROUP}/${KINDS.manifest.version}`,
        kind: 'Manifest',
        metadata: {
          name: manifestName,
          namespace,
          labels: { [LABELS.kymaName]: name, [LABELS.moduleName]: module.name },
        },
        spec: {
          remote: false,
          version: module.version,
          install: {
            name: 'raw-manifest',
            source: { repo: 'registry.test', name: `kyma/${module.name}`, ref: module.version },
          },
        },
      },
    });
    await custom.patchNamespacedCustomObjectStatus(
      {
        ...ref('manifest', namespace),
        name: manifestName,
        body: {
          status: {
            state: module.manifest.state,
            lastOperation: {
              operation: module.manifest.lastOperation,
              lastUpdateTime: new Date().toISOString(),
            },
          },
        },
      },
      mergePatch,
    );
  }
  if (shape.state) await writeKymaStatus(kcp, namespace, name, shape);
}

/** The status a pass of the agent would have written, written directly. */
export async function writeKymaStatus(
  kcp: KubeConfig,
  namespace: string,
  name: string,
  shape: KymaShape,
): Promise<void> {
  const now = new Date().toISOString();
  await kcp.makeApiClient(CustomObjectsApi).patchNamespacedCustomObjectStatus(
    {
      ...ref('kyma', namespace),
      name,
      body: {
        status: {
          state: shape.state,
          conditions: (shape.conditions ?? []).map((c) => ({ ...c, lastTransitionTime: now })),
          modules: (shape.modules ?? []).map((m) => ({
            name: m.name,
            state: m.state,
            version: m.version,
            channel: 'regular',
            ...(m.message ? { message: m.message } : {}),
            ...(m.manifest
              ? {
                  manifest: {
                    apiVersion: `${GROUP}/${KINDS.manifest.version}`,
                    kind: 'Manifest',
                    metadata: { name: `${name}-${m.name}`, namespace },
                  },
                }
              : {}),
          })),
          lastOperation: { operation: `reconciled: ${shape.state}`, lastUpdateTime: now },
        },
      },
    },
    mergePatch,
  );
}

/** The SKR's webhook certificate Secret as the agent writes it, issued `issuedDaysAgo` days ago for 60 days. */
export async function createWebhookCertificate(
  kcp: KubeConfig,
  namespace: string,
  kyma: string,
  issuedDaysAgo: number,
): Promise<void> {
  const issued = new Date(Date.now() - issuedDaysAgo * DAY_MS);
  const ca = createCa({ commonName: 'fleet-test-ca', keyBits: 2048, now: issued });
  const leaf = issueLeaf({
    ca,
    runtimeId: `runtime-${kyma}`,
    dnsNames: [`${kyma}.skr.test`],
    validityDays: 60,
    now: issued,
  });
  const base64 = (text: string) => Buffer.from(text).toString('base64');
  await kcp.makeApiClient(CoreV1Api).createNamespacedSecret({
    namespace,
    body: {
      metadata: { name: webhookTlsSecretName(kyma), namespace },
      type: 'kubernetes.io/tls',
      data: {
        [SECRET_KEYS.cert]: base64(leaf.certPem),
        [SECRET_KEYS.key]: base64(leaf.keyPem),
        [SECRET_KEYS.ca]: base64(ca.certPem),
      },
    },
  });
}

/** A Warning Event on the Kyma as the agent records one, last seen `minutesAgo`. */
export async function createKymaEvent(
  kcp: KubeConfig,
  namespace: string,
  kyma: string,
  reason: string,
  message: string,
  minutesAgo: number,
): Promise<void> {
  const at = new Date(Date.now() - minutesAgo * 60_000);
  await kcp.makeApiClient(CoreV1Api).createNamespacedEvent({
    namespace,
    body: {
      metadata: { name: `${kyma}.${reason.toLowerCase()}`, namespace },
      involvedObject: { apiVersion: `${GROUP}/${KINDS.kyma.version}`, kind: 'Kyma', name: kyma, namespace },
      type: 'Warning',
      reason,
      message,
      count: 3,
      firstTimestamp: at,
      lastTimestamp: at,
      source: { component: 'skr-watcher-agent' },
    },
  });
}

/** Read-only: what an engineer on a read-only rota may do. */
export const READ_ONLY_RULES: V1PolicyRule[] = [
  { apiGroups: [GROUP], resources: ['kymas', 'manifests'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: [''], resources: ['events'], verbs: ['get', 'list', 'watch'] },
];

/** On call: reads, patches Kymas, records Events, reads the webhook certificates. */
export const ON_CALL_RULES: V1PolicyRule[] = [
  ...READ_ONLY_RULES,
  { apiGroups: [GROUP], resources: ['kymas'], verbs: ['patch'] },
  { apiGroups: [''], resources: ['events'], verbs: ['create'] },
  { apiGroups: [''], resources: ['secrets'], verbs: ['get'] },
];

/**
 * A kubeconfig file that authenticates as ServiceAccount `name` of `namespace`, bound to a Role with `rules` there;
 * returned once the API server applies the binding (`probe` is allowed to that identity).
 */
export async function kubeconfigFileAs(
  admin: KubeConfig,
  namespace: string,
  name: string,
  rules: V1PolicyRule[],
): Promise<{ path: string; username: string }> {
  const core = admin.makeApiClient(CoreV1Api);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name, namespace } } });
  await rbac.createNamespacedRole({ namespace, body: { metadata: { name, namespace }, rules } });
  await rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name, namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace }],
    },
  });
  const token = await core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const cluster = admin.getCurrentCluster()!;
  const identity = new KubeConfig();
  identity.loadFromOptions({
    clusters: [cluster],
    users: [{ name, token: token.status?.token ?? '' }],
    contexts: [{ name, cluster: cluster.name, user: name, namespace }],
    currentContext: name,
  });
  const authorization = identity.makeApiClient(AuthorizationV1Api);
  await waitUntil(`the RoleBinding of ${name} is in effect`, async () => {
    const review = await authorization.createSelfSubjectAccessReview({
      body: { spec: { resourceAttributes: { namespace, group: GROUP, resource: 'kymas', verb: 'list' } } },
    });
    return review.status?.allowed === true;
  });
  const path = join(await mkdtemp(join(tmpdir(), 'kubectl-skr-')), `${name}.kubeconfig`);
  await writeFile(path, identity.exportConfig(), { mode: 0o600 });
  return { path, username: `system:serviceaccount:${namespace}:${name}` };
}
