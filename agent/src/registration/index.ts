/**
 * Automatic webhook registration: on every reconcile of a Kyma the agent makes sure its SKR runs a
 * webhook that calls back to this KCP. Inputs are read fresh each time (level-triggered):
 *   - the SKR's certificate `<kyma>-webhook-tls` in KCP, issued from the signing CA, renewed with 30 days left,
 *     re-issued after a CA rotation or when its names changed;
 *   - the SKR Secret `skr-webhook-tls` (`ca.crt`, `tls.crt`, `tls.key`), a copy of it;
 *   - the ValidatingWebhookConfiguration `skr-webhook`: one webhook per Watcher CR, plus the Module CRs of the
 *     modules enabled in that SKR;
 *   - in-cluster mode: ServiceAccount, Deployment, Service, NetworkPolicy; URL mode (a Kyma annotated with
 *     `operator.kyma-project.io/skr-webhook-url`): the webhook runs outside the SKR, e.g. on a laptop.
 */
import { createHash } from 'node:crypto';
import type { KubernetesObject, V1CustomResourceDefinition } from '@kubernetes/client-node';
import {
  ANNOTATIONS,
  DEFAULTS,
  GROUP,
  KINDS,
  LABELS,
  listItems,
  splitApiVersion,
  watcherSchema,
  type GroupVersionResource,
  type Kyma,
  type Watcher,
} from '@skr-watcher/api';
import {
  applyObject,
  deleteIfExists,
  KcpPkiSecrets,
  listInPages,
  type ClusterClient,
} from '@skr-watcher/kube';
import {
  CA_IN_BUNDLE_SINCE_ANNOTATION,
  decideLeaf,
  describeCertificate,
  isSignedBy,
  issueLeaf,
  parseTimestamp,
  RENEW_BEFORE_MS,
  rotationStateFromAnnotations,
  webhookDnsNames,
  webhookTlsSecretName,
  signingCaFor,
} from '@skr-watcher/pki';
import { inClusterResourcesFor, SKR_WEBHOOK_TLS_SECRET, tlsSecretFor } from './skr-resources.js';
import { SKR_WEBHOOK_NAME, webhookConfigurationFor, type WebhookTarget } from './webhook-configuration.js';

export { createWatcherHealth, type WatcherHealth } from './watcher-health.js';

/** Field manager of everything the registration writes in an SKR. */
const FIELD_MANAGER = 'skr-watcher-registration';

export interface RegistrationOptions {
  /** Image of the in-cluster webhook. */
  image: string;
  /** host:port of the KCP listener as SKR webhooks reach it. */
  kcpAddress: string;
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
}

export interface RegistrationResult {
  /** True when everything is in place; false with a reason the Kyma's SKRWebhook condition shows. */
  ok: boolean;
  reason: string;
  message: string;
  /** Set when a certificate was issued in this pass. */
  issued?: string;
}

export async function registerSkrWebhook(input: RegistrationInput): Promise<RegistrationResult> {
  const { kyma, options } = input;
  const runtimeId = kyma.metadata.labels?.[LABELS.runtimeId];
  if (!runtimeId) {
    return { ok: false, reason: 'NoRuntimeId', message: `the Kyma has no ${LABELS.runtimeId} label` };
  }
  const urlMode = kyma.metadata.annotations?.[ANNOTATIONS.skrWebhookUrl];
  const secrets = new KcpPkiSecrets(input.kcp.core, input.namespace);

  const ca = await secrets.readCa();
  const bundlePem = await secrets.readBundle();
  if (!ca || !bundlePem) {
    return {
      ok: false,
      reason: 'NoCertificateAuthority',
      message: `no CA in Secret ${input.namespace}/skr-watcher-ca and its bundle; run skr-certs init-ca`,
    };
  }
  const rotation = rotationStateFromAnnotations(ca.annotations);
  const signing = signingCaFor(ca, rotation);
  const inBundleSinceRaw = ca.annotations[CA_IN_BUNDLE_SINCE_ANNOTATION];
  const inBundleSince = inBundleSinceRaw
    ? parseTimestamp(inBundleSinceRaw, CA_IN_BUNDLE_SINCE_ANNOTATION)
    : undefined;

  const domain = kyma.metadata.annotations?.[ANNOTATIONS.skrDomain];
  const dnsNames = webhookDnsNames(domain ? [domain] : []);
  const ipAddresses = urlMode ? ipAddressesOf(urlMode) : [];

  // The SKR's certificate in KCP: issue, renew or re-issue.
  let leaf = await secrets.readLeaf(kyma.metadata.name);
  let issued: string | undefined;
  const decision = leaf
    ? decideOnLeaf(
        leaf.certPem,
        // A leaf rotate-ca already moved to the CA it is introducing is fine too: no churn back and forth.
        [signing.certPem, ...(ca.pending ? [ca.pending.certPem] : [])],
        runtimeId,
        dnsNames,
        ipAddresses,
        input.now,
        inBundleSince,
      )
    : { action: 'issue', reason: 'no certificate yet' };
  const caNotAfter = describeCertificate(signing.certPem).notAfter;
  if (decision.action === 'renew' && leaf && caNotAfter.getTime() - input.now.getTime() <= RENEW_BEFORE_MS) {
    // A new leaf cannot outlive its CA, so it would need renewal again at once: report instead of re-issuing
    // on every pass (each write would trigger the next).
    return {
      ok: false,
      reason: 'CertificateAuthorityExpiring',
      message: `the signing CA expires at ${caNotAfter.toISOString()}, so the SKR certificate (${decision.reason}) cannot be renewed; rotate the CA with skr-certs rotate-ca`,
    };
  }
  if (decision.action !== 'none') {
    const fresh = issueLeaf({ ca: signing, runtimeId, dnsNames, ipAddresses, now: input.now });
    await secrets.writeLeaf(kyma.metadata.name, fresh, bundlePem);
    leaf = { certPem: fresh.certPem, keyPem: fresh.keyPem, caPem: bundlePem };
    issued = decision.reason;
  }
  if (!leaf)
    throw new Error(
      `certificate Secret ${input.namespace}/${webhookTlsSecretName(kyma.metadata.name)} vanished`,
    );

  // The SKR trusts what the KCP trusts now (the bundle may hold two CAs during a rotation).
  const material = {
    namespace: options.skrNamespace,
    caBundlePem: bundlePem,
    certPem: leaf.certPem,
    keyPem: leaf.keyPem,
  };
  await applyObject(input.skr.objects, tlsSecretFor(material), { fieldManager: FIELD_MANAGER, force: true });

  const watchers = await listWatchers(input.kcp, input.namespace);
  const moduleResources = await resolveModuleResources(input.skr, input.moduleKinds);
  const skrNamespace = options.skrNamespace ?? DEFAULTS.skrNamespace;
  const target: WebhookTarget = urlMode
    ? { kind: 'url', baseUrl: urlMode }
    : { kind: 'service', namespace: skrNamespace, name: SKR_WEBHOOK_NAME, port: 443 };

  if (!urlMode) {
    const checksum = createHash('sha256').update(leaf.certPem).digest('hex').slice(0, 16);
    for (const object of inClusterResourcesFor({
      namespace: skrNamespace,
      image: options.image,
      kcpAddress: options.kcpAddress,
      certificateChecksum: checksum,
    })) {
      await applyObject(input.skr.objects, object, { fieldManager: FIELD_MANAGER, force: true });
    }
  }
  const configuration = webhookConfigurationFor({
    watchers,
    moduleResources: moduleResources.resolved,
    caBundlePem: bundlePem,
    target,
    timeoutSeconds: options.timeoutSeconds,
  });
  await applyObject(input.skr.objects, configuration as KubernetesObject, {
    fieldManager: FIELD_MANAGER,
    force: true,
  });

  if (moduleResources.unresolved.length > 0) {
    return {
      ok: false,
      reason: 'ModuleResourceUnknown',
      message: `the SKR serves no resource for ${moduleResources.unresolved.join(', ')}`,
      issued,
    };
  }
  return {
    ok: true,
    reason: 'Installed',
    message: `webhook with ${configuration.webhooks?.length ?? 0} hooks, ${urlMode ? `URL ${urlMode}` : 'in-cluster'}`,
    issued,
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

function decideOnLeaf(
  certPem: string,
  acceptedCaPems: string[],
  runtimeId: string,
  dnsNames: string[],
  ipAddresses: string[],
  now: Date,
  inBundleSince: Date | undefined,
): { action: string; reason: string } {
  const info = describeCertificate(certPem);
  const sameNames = (a: string[], b: string[]) => [...a].sort().join(',') === [...b].sort().join(',');
  if (info.commonName !== runtimeId)
    return { action: 'reissue', reason: `runtime-id changed to ${runtimeId}` };
  if (!sameNames(info.dnsNames, dnsNames) || !sameNames(info.ipAddresses, ipAddresses)) {
    return { action: 'reissue', reason: 'names changed' };
  }
  return decideLeaf(info, {
    now,
    currentCaInBundleSince: inBundleSince,
    signedByCurrentCa: acceptedCaPems.some((caPem) => isSignedBy(certPem, caPem)),
  });
}

/** The IP address of a URL-mode webhook becomes an IP SAN (the API server checks it). */
function ipAddressesOf(url: string): string[] {
  try {
    const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
    return /^[\d.]+$|:/.test(host) ? [host] : [];
  } catch {
    return [];
  }
}

/** The live Watchers of a namespace; one that does not parse is left out, so it cannot break the others. */
export async function listWatchers(kcp: ClusterClient, namespace: string): Promise<Watcher[]> {
  const { plural, version } = KINDS.watcher;
  let list: unknown;
  try {
    list = await kcp.custom.listNamespacedCustomObject({ group: GROUP, version, namespace, plural });
  } catch (cause) {
    throw new Error(`list Watchers in ${namespace}`, { cause });
  }
  return listItems(list, `Watcher list ${namespace}`).flatMap((item) => {
    const parsed = watcherSchema.safeParse(item);
    return parsed.success && !parsed.data.metadata.deletionTimestamp ? [parsed.data] : [];
  });
}

interface CrdNames {
  group: string;
  kind: string;
  plural: string;
  served: string[];
}

/** Resolves Module CR kinds to resources through the SKR's CRDs (Module CRs are always custom resources). */
async function resolveModuleResources(
  skr: ClusterClient,
  kinds: { apiVersion: string; kind: string }[],
): Promise<{ resolved: GroupVersionResource[]; unresolved: string[] }> {
  if (kinds.length === 0) return { resolved: [], unresolved: [] };
  // Paged, and only the names kept: an SKR with hundreds of large CRDs must not be held in memory at once.
  let crds: CrdNames[];
  try {
    crds = await listInPages(
      async ({ limit, continueToken }) => {
        const page = await skr.apiextensions.listCustomResourceDefinition({
          limit,
          ...(continueToken ? { _continue: continueToken } : {}),
        });
        return { items: page.items, metadata: { continue: page.metadata?._continue ?? '' } };
      },
      (crd: V1CustomResourceDefinition): CrdNames => ({
        group: crd.spec.group,
        kind: crd.spec.names.kind,
        plural: crd.spec.names.plural,
        served: crd.spec.versions.filter((v) => v.served).map((v) => v.name),
      }),
    );
  } catch (cause) {
    throw new Error('list CRDs in the SKR', { cause });
  }
  const resolved: GroupVersionResource[] = [];
  const unresolved: string[] = [];
  for (const { apiVersion, kind } of kinds) {
    const { group, version } = splitApiVersion(apiVersion);
    const crd = crds.find((c) => c.group === group && c.kind === kind && c.served.includes(version));
    if (crd) resolved.push({ group, version, resource: crd.plural });
    else unresolved.push(`${kind}.${apiVersion}`);
  }
  return { resolved, unresolved };
}
