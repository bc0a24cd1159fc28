// Lifecycle-manager's SKR webhook (runtime-watcher's chart, as lifecycle-manager installs it in every SKR) replaced
// by the agent's (decision 028). The configuration, the TLS Secret and the Service share their names with the agent's
// and are taken over in place by its registration; the Deployment cannot be (its selector is immutable and differs),
// so it is removed to make room, and the agent installs its own on its next pass. Everything else of upstream's
// goes only once the agent's webhook is in place: its configuration written by the agent's registration and, in the
// SKR, its Deployment available. A rollback runs the same steps with the roles swapped.
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  ANNOTATIONS,
  LABELS,
  LIFECYCLE_MANAGER,
  MANAGED_BY,
  SKR_WEBHOOK_REGISTRATION,
  type Kyma,
} from '@skr-watcher/api';
import {
  applyObject,
  deleteIfExists,
  readObject,
  type ClusterClient,
  type ObjectRef,
} from '@skr-watcher/kube';
import type { ManagedFieldsEntry } from './field-ownership.js';

const NAME = SKR_WEBHOOK_REGISTRATION.name;

/** Upstream's objects that share a name with the agent's: the agent's registration writes over them. */
export function sharedWebhookObjects(namespace: string): ObjectRef[] {
  return [
    { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingWebhookConfiguration', name: NAME },
    { apiVersion: 'v1', kind: 'Secret', name: `${NAME}-tls`, namespace },
    { apiVersion: 'v1', kind: 'Service', name: NAME, namespace },
  ];
}

/** Upstream's objects the agent has no counterpart of under the same name (lifecycle-manager's skr-webhook chart). */
export function upstreamOnlyWebhookObjects(namespace: string): ObjectRef[] {
  const rbac = 'rbac.authorization.k8s.io/v1';
  const policies = ['seed-to-watcher', 'watcher-to-apiserver', 'metrics-to-watcher', 'watcher-to-dns'];
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', name: `${NAME}-sa`, namespace },
    { apiVersion: rbac, kind: 'ClusterRole', name: 'kyma-reader' },
    { apiVersion: rbac, kind: 'ClusterRoleBinding', name: 'read-kymas' },
    { apiVersion: 'v1', kind: 'Service', name: `${NAME}-metrics`, namespace },
    { apiVersion: 'v1', kind: 'ConfigMap', name: `${NAME}-config`, namespace },
    { apiVersion: 'scheduling.k8s.io/v1', kind: 'PriorityClass', name: `${NAME}-priority` },
    ...policies.map((policy) => ({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      name: `kyma-project.io--${policy}`,
      namespace,
    })),
  ];
}

/** The agent's own objects without a counterpart of upstream's under the same name (agent/src/registration). */
export function agentOnlyWebhookObjects(namespace: string): ObjectRef[] {
  const rbac = 'rbac.authorization.k8s.io/v1';
  return [
    { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', name: NAME, namespace },
    { apiVersion: 'v1', kind: 'ServiceAccount', name: NAME, namespace },
    { apiVersion: rbac, kind: 'ClusterRole', name: NAME },
    { apiVersion: rbac, kind: 'ClusterRoleBinding', name: NAME },
  ];
}

/** Where the webhook handover of one SKR stands. */
export type WebhookHandover =
  /** The new webhook serves and nothing of the old one's is left. */
  | { state: 'done'; removed: string[] }
  /** Waiting for the new webhook's installation (and, in the SKR, for its Deployment to become available). */
  | { state: 'waiting'; reason: string; removed: string[] };

const managers = (object: KubernetesObject | undefined) =>
  ((object?.metadata?.managedFields ?? []) as ManagedFieldsEntry[]).map((entry) => entry.manager);

const selectorOf = (deployment: KubernetesObject) =>
  (deployment as { spec?: { selector?: { matchLabels?: Record<string, string> } } }).spec?.selector
    ?.matchLabels ?? {};

/** One side of a handover: how its objects are told apart, and which of them the other side has no counterpart of. */
interface WebhookSide {
  name: string;
  /** Field manager of its writes of the shared objects. */
  fieldManager: string;
  /** Its objects by name, without a counterpart on the other side. */
  only: (namespace: string) => ObjectRef[];
  owns: (object: KubernetesObject) => boolean;
  /** Its Deployment selects its pods so. */
  ownsDeployment: (deployment: KubernetesObject) => boolean;
}

const AGENT: WebhookSide = {
  name: "the agent's",
  fieldManager: SKR_WEBHOOK_REGISTRATION.fieldManager,
  only: agentOnlyWebhookObjects,
  owns: (object) => object.metadata?.labels?.[LABELS.managedBy] === MANAGED_BY,
  ownsDeployment: (deployment) =>
    selectorOf(deployment)['app.kubernetes.io/name'] === NAME && AGENT.owns(deployment),
};

const UPSTREAM: WebhookSide = {
  name: "lifecycle-manager's",
  fieldManager: LIFECYCLE_MANAGER.fieldManager,
  only: upstreamOnlyWebhookObjects,
  owns: (object) => {
    const managedBy = object.metadata?.labels?.[LABELS.managedBy];
    if (managedBy === MANAGED_BY) return false;
    return (
      managedBy === LIFECYCLE_MANAGER.managedBy || managers(object).includes(LIFECYCLE_MANAGER.fieldManager)
    );
  },
  ownsDeployment: (deployment) => selectorOf(deployment)['app'] === NAME && UPSTREAM.owns(deployment),
};

function isAvailable(deployment: KubernetesObject): boolean {
  return ((deployment as { status?: { availableReplicas?: number } }).status?.availableReplicas ?? 0) >= 1;
}

/** Why the new side's webhook is not yet in place in this SKR; undefined once it is. */
async function pendingInstall(
  skr: ClusterClient,
  side: WebhookSide,
  namespace: string,
  outsideTheSkr: boolean,
): Promise<string | undefined> {
  const configuration = await readObject(skr.objects, sharedWebhookObjects(namespace)[0]!);
  if (!managers(configuration).includes(side.fieldManager))
    return `${side.name} webhook configuration is not written yet`;
  // URL mode: the agent's webhook runs outside the SKR, and no Deployment of its is there.
  if (outsideTheSkr) return undefined;
  const deployment = await readObject(skr.objects, deploymentRef(namespace));
  if (!deployment || !side.ownsDeployment(deployment))
    return `${side.name} webhook Deployment is not there yet`;
  if (!isAvailable(deployment)) return `${side.name} webhook Deployment is not available yet`;
  return undefined;
}

const deploymentRef = (namespace: string): ObjectRef => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  name: NAME,
  namespace,
});

/**
 * One step of the handover from `from` to `to` in one SKR; run it again until it answers done. Before `to`'s webhook
 * is in place it only removes `from`'s Deployment, which `to`'s cannot replace in place. Once it is: `from`'s own
 * objects go, and on the objects both wrote, what only `from` still owns is dropped (an empty apply under its field
 * manager), so nothing of its configuration, such as a webhook entry `to` does not register, lingers.
 */
async function handOver(
  skr: ClusterClient,
  sides: { from: WebhookSide; to: WebhookSide },
  namespace: string,
  outsideTheSkr: boolean,
  dryRun: boolean,
): Promise<WebhookHandover> {
  const { from, to } = sides;
  const removed: string[] = [];
  const remove = async (ref: ObjectRef) => {
    const live = await readObject(skr.objects, ref);
    if (!live || !from.owns(live)) return;
    if (!dryRun) await deleteIfExists(skr.objects, ref);
    removed.push(`${ref.kind} ${ref.name}`);
  };
  const deployment = await readObject(skr.objects, deploymentRef(namespace));
  if (deployment && from.ownsDeployment(deployment)) await remove(deploymentRef(namespace));

  const pending = await pendingInstall(skr, to, namespace, outsideTheSkr);
  if (pending) return { state: 'waiting', reason: pending, removed };

  for (const ref of from.only(namespace)) await remove(ref);
  for (const ref of sharedWebhookObjects(namespace)) {
    const live = await readObject(skr.objects, ref);
    if (!managers(live).includes(from.fieldManager)) continue;
    const metadata = { name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) };
    if (!dryRun)
      await applyObject(
        skr.objects,
        { apiVersion: ref.apiVersion, kind: ref.kind, metadata },
        { fieldManager: from.fieldManager },
      );
    removed.push(`${ref.kind} ${ref.name} (fields of ${from.fieldManager})`);
  }
  return { state: 'done', removed };
}

/** Lifecycle-manager's webhook replaced by the agent's: one step (see handOver). */
export function handOverWebhook(
  skr: ClusterClient,
  kyma: Kyma,
  namespace: string,
  dryRun = false,
): Promise<WebhookHandover> {
  const outsideTheSkr = kyma.metadata.annotations?.[ANNOTATIONS.skrWebhookUrl] !== undefined;
  return handOver(skr, { from: UPSTREAM, to: AGENT }, namespace, outsideTheSkr, dryRun);
}

/** Rollback: the agent's webhook replaced by lifecycle-manager's once that one serves again: one step. */
export function handBackWebhook(
  skr: ClusterClient,
  namespace: string,
  dryRun = false,
): Promise<WebhookHandover> {
  return handOver(skr, { from: AGENT, to: UPSTREAM }, namespace, false, dryRun);
}
