/**
 * Automatic webhook registration: on every reconcile of a Kyma the agent makes sure its SKR runs a
 * webhook that calls back to this KCP. Inputs are read fresh each time (level-triggered):
 *   - the SKR's certificate `<kyma>-webhook-tls` in KCP, issued from the signing CA, renewed with 30 days left,
 *     re-issued after a CA rotation or when its names changed (run by a controller, a pass that changes nothing
 *     takes it, the CA and the bundle from watches: pki-cache.ts);
 *   - the SKR Secret `skr-webhook-tls` (`ca.crt`, `tls.crt`, `tls.key`), a copy of it;
 *   - the ValidatingWebhookConfiguration `skr-webhook`: one webhook per Watcher CR, plus the Module CRs of the
 *     modules enabled in that SKR;
 *   - the webhook's ServiceAccount and a ClusterRole to read its own configuration (watched, so a deletion is noticed);
 *   - in-cluster mode: Deployment, Service, NetworkPolicy; URL mode (a Kyma annotated with
 *     `operator.kyma-project.io/skr-webhook-url`): the webhook runs outside the SKR, e.g. on a laptop.
 * An object found deleted or changed by someone else since our last apply is put back, and the result says so.
 */
import { createHash } from 'node:crypto';
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  ANNOTATIONS,
  DEFAULTS,
  KCP_LISTENER_IDENTITY,
  LABELS,
  SKR_WEBHOOK_REGISTRATION,
  type Kyma,
  type Watcher,
} from '@skr-watcher/api';
import {
  AppliedVersions,
  type ApplyOutcome,
  applyObjectUnlessUnchanged,
  deleteIfExists,
  type ClusterClient,
} from '@skr-watcher/kube';
import { webhookTlsSecretName } from '@skr-watcher/pki';
import { ensureSkrCertificate } from './certificate.js';
import type { PkiCache } from './pki-cache.js';
import {
  inClusterResourcesFor,
  SKR_WEBHOOK_TLS_SECRET,
  tlsSecretFor,
  webhookIdentityFor,
} from './skr-resources.js';
import { listWatchers, resolveModuleResources } from './targets.js';
import { SKR_WEBHOOK_NAME, webhookConfigurationFor, type WebhookTarget } from './webhook-configuration.js';

export { listWatchers } from './targets.js';
export { watchPkiSecrets, type PkiCache } from './pki-cache.js';
export { createWatcherHealth, type WatcherHealth } from './watcher-health.js';

/** Field manager of everything the registration writes in an SKR (the webhook tells its writes from others'). */
const FIELD_MANAGER = SKR_WEBHOOK_REGISTRATION.fieldManager;

/**
 * Per SKR client, what the registration's last applies produced: a pass whose inputs are unchanged reads each
 * object's metadata and applies only what changed since (decision 016). A rebuilt client starts afresh.
 */
const appliedIn = new WeakMap<ClusterClient, AppliedVersions>();

export function appliedVersionsOf(skr: ClusterClient): AppliedVersions {
  let applied = appliedIn.get(skr);
  if (!applied) {
    applied = new AppliedVersions();
    appliedIn.set(skr, applied);
  }
  return applied;
}

export interface RegistrationOptions {
  /** Image of the in-cluster webhook. */
  image: string;
  /** host:port of the KCP listener as SKR webhooks reach it. */
  kcpAddress: string;
  /** CN the webhooks require of the KCP server's certificate (`KCP_SERVER_CN`); unset: their default. */
  kcpServerCn?: string;
  /** Namespace of the webhook in every SKR. */
  skrNamespace?: string;
  timeoutSeconds?: number;
}

export interface RegistrationInput {
  kcp: ClusterClient;
  /** KCP namespace of Kymas, Watchers and certificate Secrets. */
  namespace: string;
  kyma: Kyma;
  skr: ClusterClient;
  /** apiVersion/kind of the Module CRs of the modules enabled in this SKR (from their templates' spec.data). */
  moduleKinds: { apiVersion: string; kind: string }[];
  options: RegistrationOptions;
  now: Date;
  /** The namespace's live Watchers when the caller has read them already this pass; listed otherwise. */
  watchers?: Watcher[];
  /** The KCP PKI Secrets from watches (watchPkiSecrets); read fresh on every pass without it. */
  pki?: PkiCache;
  /** Watch writes of the objects modules installed, so drift is put back at once; on when modules are installed. */
  installedObjects?: boolean;
}

export interface RegistrationResult {
  /** True when everything is in place; false with a reason the Kyma's SKRWebhook condition shows. */
  ok: boolean;
  reason: string;
  message: string;
  /** Set when a certificate was issued in this pass. */
  issued?: string;
  /** Objects this pass found deleted or changed by someone else and put back: `Kind name (deleted|changed)`. */
  restored?: string[];
}

export async function registerSkrWebhook(input: RegistrationInput): Promise<RegistrationResult> {
  const { kyma, options } = input;
  const runtimeId = kyma.metadata.labels?.[LABELS.runtimeId];
  if (!runtimeId) {
    return { ok: false, reason: 'NoRuntimeId', message: `the Kyma has no ${LABELS.runtimeId} label` };
  }
  if (runtimeId === KCP_LISTENER_IDENTITY) {
    // A leaf with this CN could serve as the listener to other SKRs' webhooks (decision 004).
    return {
      ok: false,
      reason: 'RuntimeIdReserved',
      message: `runtime-id ${runtimeId} is the KCP listener's identity; no SKR certificate is issued for it`,
    };
  }
  const urlMode = kyma.metadata.annotations?.[ANNOTATIONS.skrWebhookUrl];
  const certificate = await ensureSkrCertificate({
    kcp: input.kcp,
    namespace: input.namespace,
    kymaName: kyma.metadata.name,
    runtimeId,
    domain: kyma.metadata.annotations?.[ANNOTATIONS.skrDomain],
    urlMode,
    now: input.now,
    ...(input.pki ? { cache: input.pki } : {}),
  });
  if (!certificate.ok) return certificate;
  const { leaf, bundlePem, issued } = certificate;

  // The SKR trusts what the KCP trusts now (the bundle may hold two CAs during a rotation).
  const material = {
    namespace: options.skrNamespace,
    caBundlePem: bundlePem,
    certPem: leaf.certPem,
    keyPem: leaf.keyPem,
  };
  const applied = appliedVersionsOf(input.skr);
  const restored: string[] = [];
  const apply = async (object: KubernetesObject) => {
    const outcome: ApplyOutcome = await applyObjectUnlessUnchanged(
      input.skr.objects,
      object,
      { fieldManager: FIELD_MANAGER, force: true },
      applied,
    );
    if (outcome === 'recreated' || outcome === 'restored')
      restored.push(
        `${object.kind} ${object.metadata?.name} (${outcome === 'recreated' ? 'deleted' : 'changed'})`,
      );
  };
  await apply(tlsSecretFor(material));

  const watchers = input.watchers ?? (await listWatchers(input.kcp, input.namespace));
  const moduleResources = await resolveModuleResources(input.skr, input.moduleKinds);
  const skrNamespace = options.skrNamespace ?? DEFAULTS.skrNamespace;
  const target: WebhookTarget = urlMode
    ? { kind: 'url', baseUrl: urlMode }
    : { kind: 'service', namespace: skrNamespace, name: SKR_WEBHOOK_NAME, port: 443 };

  for (const object of webhookIdentityFor(skrNamespace)) await apply(object);
  if (!urlMode) {
    const checksum = createHash('sha256').update(leaf.certPem).digest('hex').slice(0, 16);
    for (const object of inClusterResourcesFor({
      namespace: skrNamespace,
      image: options.image,
      kcpAddress: options.kcpAddress,
      kcpServerCn: options.kcpServerCn,
      certificateChecksum: checksum,
    })) {
      await apply(object);
    }
  }
  const configuration = webhookConfigurationFor({
    watchers,
    moduleResources: moduleResources.resolved,
    caBundlePem: bundlePem,
    target,
    timeoutSeconds: options.timeoutSeconds,
    installedObjects: input.installedObjects,
  });
  await apply(configuration as KubernetesObject);

  if (moduleResources.unresolved.length > 0) {
    return {
      ok: false,
      reason: 'ModuleResourceUnknown',
      message: `the SKR serves no resource for ${moduleResources.unresolved.join(', ')}`,
      issued,
      restored,
    };
  }
  return {
    ok: true,
    reason: 'Installed',
    message: `webhook with ${configuration.webhooks?.length ?? 0} hooks, ${urlMode ? `URL ${urlMode}` : 'in-cluster'}`,
    issued,
    restored,
  };
}

/** Removes what the registration installed in the SKR and the certificate Secret in KCP; idempotent. */
export async function unregisterSkrWebhook(input: {
  kcp: ClusterClient;
  namespace: string;
  kymaName: string;
  skr: ClusterClient | undefined;
  skrNamespace?: string;
}): Promise<void> {
  const namespace = input.skrNamespace ?? DEFAULTS.skrNamespace;
  if (input.skr) {
    const objects = input.skr.objects;
    await deleteIfExists(objects, {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingWebhookConfiguration',
      name: SKR_WEBHOOK_NAME,
    });
    for (const [apiVersion, kind] of [
      ['apps/v1', 'Deployment'],
      ['v1', 'Service'],
      ['networking.k8s.io/v1', 'NetworkPolicy'],
      ['v1', 'ServiceAccount'],
    ] as const) {
      await deleteIfExists(objects, { apiVersion, kind, name: SKR_WEBHOOK_NAME, namespace });
    }
    for (const kind of ['ClusterRoleBinding', 'ClusterRole']) {
      await deleteIfExists(objects, {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind,
        name: SKR_WEBHOOK_NAME,
      });
    }
    await deleteIfExists(objects, {
      apiVersion: 'v1',
      kind: 'Secret',
      name: SKR_WEBHOOK_TLS_SECRET,
      namespace,
    });
  }
  await deleteIfExists(input.kcp.objects, {
    apiVersion: 'v1',
    kind: 'Secret',
    name: webhookTlsSecretName(input.kymaName),
    namespace: input.namespace,
  });
}
