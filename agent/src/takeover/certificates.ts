// Lifecycle-manager's certificate of one SKR's webhook in KCP: a cert-manager Certificate (Gardener's
// cert-management in restricted markets) `<kyma>-webhook-tls` and the Secret it issues under the same name, in
// lifecycle-manager's certificate namespace. The agent issues its own from its PKI (`skr-certs`, decision 004) into
// `<kyma>-webhook-tls` in its namespace; upstream's go once the agent's webhook serves with the agent's.
import type { KubernetesObject } from '@kubernetes/client-node';
import { LABELS, MANAGED_BY } from '@skr-watcher/api';
import { deleteIfExists, readObject, type ClusterClient, type ObjectRef } from '@skr-watcher/kube';

/** The Certificate kinds lifecycle-manager issues SKR certificates with; a kind the KCP does not serve is skipped. */
const CERTIFICATE_KINDS = [
  { apiVersion: 'cert-manager.io/v1', kind: 'Certificate' },
  { apiVersion: 'cert.gardener.cloud/v1alpha1', kind: 'Certificate' },
];

/** Lifecycle-manager's name for an SKR's certificate and its Secret. */
export function upstreamCertificateName(kymaName: string): string {
  return `${kymaName}-webhook-tls`;
}

/**
 * Removes lifecycle-manager's Certificate and certificate Secret of a Kyma from `namespace`; answers what went (or,
 * dry, would go). A Secret the agent wrote (when both share a namespace, the name is the same) is left alone.
 */
export async function removeUpstreamCertificate(
  kcp: ClusterClient,
  namespace: string,
  kymaName: string,
  dryRun = false,
): Promise<string[]> {
  const name = upstreamCertificateName(kymaName);
  const removed: string[] = [];
  for (const kind of CERTIFICATE_KINDS) {
    const ref: ObjectRef = { ...kind, name, namespace };
    if (!(await readObject(kcp.objects, ref))) continue;
    if (!dryRun) await deleteIfExists(kcp.objects, ref);
    removed.push(`${kind.kind}.${kind.apiVersion.split('/')[0]} ${namespace}/${name}`);
  }
  const secretRef: ObjectRef = { apiVersion: 'v1', kind: 'Secret', name, namespace };
  const secret = await readObject(kcp.objects, secretRef);
  if (secret && !isAgents(secret)) {
    if (!dryRun) await deleteIfExists(kcp.objects, secretRef);
    removed.push(`Secret ${namespace}/${name}`);
  }
  return removed;
}

function isAgents(secret: KubernetesObject): boolean {
  return secret.metadata?.labels?.[LABELS.managedBy] === MANAGED_BY;
}
